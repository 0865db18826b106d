"""Shared helpers for the Python tests: they run this build's taas-kernel through real
Jupyter clients. The kernel binary comes from $TAAS_KERNEL (ctest sets it), and a private
kernelspec directory is put first on JUPYTER_PATH so that the tests never depend on (or
touch) an installed kernelspec."""

import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from queue import Empty

SOURCE_DIR = os.environ.get(
    "TAAS_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
)
KERNEL_NAME = "taas"
# The same kernel, interrupted by interrupt_request on control instead of SIGINT.
KERNEL_NAME_MSG_INTERRUPT = "taas-interrupt-message"

# Messages that carry cell outputs on iopub (everything but status and execute_input).
OUTPUT_TYPES = ("stream", "display_data", "update_display_data", "execute_result", "error",
                "clear_output")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def kernel_binary():
    path = os.environ.get("TAAS_KERNEL")
    if not path:
        raise RuntimeError("TAAS_KERNEL is not set: run the tests through ctest")
    return os.path.abspath(path)


def _write_spec(root, name, **overrides):
    spec_dir = os.path.join(root, "kernels", name)
    os.makedirs(spec_dir, exist_ok=True)
    with open(os.path.join(SOURCE_DIR, "share/jupyter/kernels/taas/kernel.json")) as f:
        spec = json.load(f)
    spec["argv"][0] = kernel_binary()
    spec.update(overrides)
    with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
        json.dump(spec, f)
    return spec_dir


def install_test_kernelspec():
    """Writes kernels/taas/kernel.json (argv -> this build's binary) into a temporary
    JUPYTER_PATH entry and returns that directory. Idempotent per process. The same
    directory also holds the variant KERNEL_NAME_MSG_INTERRUPT (interrupt_mode "message")."""
    if os.environ.get("_TAAS_TEST_JUPYTER_PATH"):
        return os.environ["_TAAS_TEST_JUPYTER_PATH"]
    root = tempfile.mkdtemp(prefix="taas-jupyter-")
    atexit.register(shutil.rmtree, root, True)
    _write_spec(root, KERNEL_NAME)
    _write_spec(root, KERNEL_NAME_MSG_INTERRUPT, interrupt_mode="message",
                display_name="taas (interrupt by message)")
    os.environ["JUPYTER_PATH"] = root + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    os.environ["_TAAS_TEST_JUPYTER_PATH"] = root
    return root


def taas_processes():
    """PIDs of live taas-kernel processes started from this build's binary."""
    binary = kernel_binary()
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True,
                         text=True).stdout
    pids = []
    for line in out.splitlines():
        fields = line.split(None, 2)
        if len(fields) < 3:
            continue
        pid, stat, args = fields
        # a zombie is gone as far as the user is concerned, but its parent has not reaped it
        if stat.startswith("Z"):
            continue
        if args == binary or args.startswith(binary + " "):
            pids.append(int(pid))
    return pids


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def worker_binary():
    return os.path.join(os.path.dirname(kernel_binary()), "taas-worker")


def gpus():
    """This machine's GPUs as this build's `taas-worker gpus` finds them (a list; empty on a
    machine without a GPU, a driver or the CUDA plugin)."""
    out = subprocess.run([worker_binary(), "gpus"], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)["gpus"]


def rank_line(ranks):
    """The line the plan of a pragma cell prints about where its ranks train, on this machine."""
    n = len(gpus())
    who = "the %d rank%s train%s" % (ranks, "" if ranks == 1 else "s", "s" if ranks == 1 else "")
    if n == 0:
        return "no GPU on this machine: %s on the CPU" % who
    return "GPUs: %s on %d of this machine's %d" % (who, ranks, n)


def processes():
    """{pid: (ppid, args)} of every live process (zombies are gone as far as a user can tell)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,stat=,args="], capture_output=True, text=True).stdout
    procs = {}
    for line in out.splitlines():
        f = line.split(None, 3)
        if len(f) == 4 and not f[2].startswith("Z"):
            procs[int(f[0])] = (int(f[1]), f[3])
    return procs


def descendants(pid):
    """{pid: args} of every live process below pid (children, their children, ...)."""
    procs, found, todo = processes(), {}, [pid]
    while todo:
        parent = todo.pop()
        for p, (ppid, args) in procs.items():
            if ppid == parent and p not in found:
                found[p] = args
                todo.append(p)
    return found


def worker_pids(parent=None):
    """Live taas-worker processes of this build (children of parent, when given)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,stat=,args="], capture_output=True,
                         text=True).stdout
    pids = []
    for line in out.splitlines():
        fields = line.split(None, 3)
        if len(fields) < 4 or fields[2].startswith("Z"):
            continue
        if fields[3].startswith(worker_binary()) and (parent is None or int(fields[1]) == parent):
            pids.append(int(fields[0]))
    return pids


def set_pragma(source, header):
    """A cell's source with its own `#!` and `#pragma taas` lines replaced by header (lines
    that end in a newline)."""
    lines = source.split("\n")
    while lines and (lines[0].startswith("#pragma taas") or lines[0].startswith("#!")):
        lines.pop(0)
    return header + "\n".join(lines)


def best_kernels():
    """The kernel set a job of this machine runs at best (workers/train/cpu.h): the CPU's best
    from /proc/cpuinfo, or TAAS_CPU's when the suite runs under it."""
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    sets = ["generic"]
    if "avx2" in flags and "fma" in flags:
        sets.append("avx2")
        if all(x in flags for x in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
            sets.append("avx512")
    asked = os.environ.get("TAAS_CPU")
    return asked if asked in sets else sets[-1]


def lower_kernels():
    """A set below best_kernels(), for a host to report (generic when the best is generic)."""
    return {"avx512": "avx2"}.get(best_kernels(), "generic")


def kernels_why(why):
    """Why a job runs its set, as its `kernels:` line says: TAAS_CPU when the suite runs under
    it (the kernel's environment names the set), else why."""
    return "TAAS_CPU" if os.environ.get("TAAS_CPU") else why


def checkpoint_record(path):
    """A checkpoint's record: the JSON of its safetensors __metadata__["taas.checkpoint"]."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return json.loads(header["__metadata__"]["taas.checkpoint"])


def wait_until(predicate, timeout, interval=0.02):
    """Polls predicate until it is true or timeout seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def slow_npy_source(folder, n, delay, host="127.0.0.1"):
    """The loader-pool tests' slow source: images.npy (n random 28x28 uint8) and labels.npy in
    folder, served by tests/lib/faultserver.py on host (a test cluster's bridge, or loopback)
    with `delay` seconds before every answer. With TAAS_NPY_MEMORY_LIMIT below the file every
    sample is one request, so a loader worker makes at most its threads / delay samples a
    second, whatever the machine. Returns the server's process and the folder's URL."""
    import numpy
    import sys
    rng = numpy.random.default_rng(3)
    numpy.save(os.path.join(folder, "images.npy"), rng.integers(0, 256, (n, 28, 28), dtype=numpy.uint8))
    numpy.save(os.path.join(folder, "labels.npy"), rng.integers(0, 10, n, dtype=numpy.int64))
    portfile = os.path.join(folder, "port")
    argv = [sys.executable, os.path.join(SOURCE_DIR, "tests", "lib", "faultserver.py"), "--root", folder,
            "--portfile", portfile, "--host", host, "--latency", str(delay)]
    if not host.startswith("127."):
        argv.append("--test-bridge")
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_until(lambda: os.path.exists(portfile), 20):
        server.kill()
        raise RuntimeError("tests/lib/faultserver.py did not start")
    with open(portfile) as f:
        return server, "http://%s:%d/" % (host, int(f.read()))


def plain(text):
    """Traceback text without ANSI colour codes (front ends render them; tests compare text)."""
    return _ANSI.sub("", text)


def execute_content(code, stop_on_error=False):
    """The content of an execute_request for code: not silent, stored in the history, no
    stdin, and stop_on_error as given."""
    return {"code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": stop_on_error}


class Kernel:
    """A taas kernel started through jupyter_client's KernelManager, with a blocking client
    whose replies and iopub messages are sorted by the request (parent msg_id) they
    answer, so that tests can pipeline requests without losing messages."""

    def __init__(self, kernel_name=KERNEL_NAME, cwd=None, env=None, startup_timeout=30):
        from jupyter_client.manager import KernelManager

        install_test_kernelspec()
        self.km = KernelManager(kernel_name=kernel_name)
        kwargs = {}
        if cwd is not None:
            kwargs["cwd"] = cwd
        if env is not None:
            kwargs["env"] = env
        self.km.start_kernel(**kwargs)
        self.pid = self.km.provisioner.process.pid
        self.kc = self.km.client()
        self.kc.start_channels()
        self._pending = {"shell": {}, "control": {}, "iopub": {}}
        self.seen = []  # every message received, in order (for msg_id checks)
        try:
            self.kc.wait_for_ready(timeout=startup_timeout)
        except Exception:
            self.close()
            raise
        # wait_for_ready leaves its own kernel_info traffic behind
        self.drain(0.3)

    @property
    def session(self):
        return self.kc.session

    def connection_info(self):
        return self.km.get_connection_info(session=False)

    def _channel(self, name):
        return {"shell": self.kc.shell_channel, "control": self.kc.control_channel,
                "iopub": self.kc.iopub_channel}[name]

    def send(self, channel, msg_type, content=None, **header_extra):
        """Sends a request; returns its msg_id."""
        msg = self.session.msg(msg_type, content or {})
        msg["header"].update(header_extra)
        self._channel(channel).send(msg)
        return msg["header"]["msg_id"]

    def _next(self, channel, timeout):
        get = {"shell": self.kc.get_shell_msg, "control": self.kc.get_control_msg,
               "iopub": self.kc.get_iopub_msg}[channel]
        msg = get(timeout=timeout)
        self.seen.append(msg)
        return msg

    def reply(self, msg_id, channel="shell", timeout=10):
        """The reply to msg_id on channel (other replies are kept for later calls)."""
        pending = self._pending[channel]
        deadline = time.monotonic() + timeout
        while msg_id not in pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no %s reply to %s within %.1f s" % (channel, msg_id, timeout))
            try:
                msg = self._next(channel, left)
            except Empty:
                continue
            pending.setdefault(msg["parent_header"].get("msg_id"), []).append(msg)
        msgs = pending[msg_id]
        msg = msgs.pop(0)
        if not msgs:
            del pending[msg_id]
        return msg

    def iopub(self, msg_id, timeout=10):
        """iopub messages whose parent is msg_id, up to and including its idle status."""
        pending = self._pending["iopub"]
        deadline = time.monotonic() + timeout
        while True:
            for msg in pending.get(msg_id, []):
                if (msg["msg_type"] == "status"
                        and msg["content"].get("execution_state") == "idle"):
                    return pending.pop(msg_id)
            left = deadline - time.monotonic()
            if left <= 0:
                got = [m["msg_type"] for m in pending.get(msg_id, [])]
                raise TimeoutError("no idle status for %s within %.1f s (got %s)"
                                   % (msg_id, timeout, got))
            try:
                msg = self._next("iopub", min(left, 0.5))
            except Empty:
                continue
            pending.setdefault(msg["parent_header"].get("msg_id"), []).append(msg)

    def iopub_now(self, msg_id, wait=0.2):
        """Whatever iopub has for msg_id after waiting `wait` seconds (no idle needed)."""
        self.drain(wait)
        return self._pending["iopub"].pop(msg_id, [])

    def drain(self, wait=0.1):
        """Reads everything available on iopub into the per-parent buffers."""
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self._next("iopub", max(left, 0.01))
            except Empty:
                if left <= 0:
                    return
                continue
            self._pending["iopub"].setdefault(
                msg["parent_header"].get("msg_id"), []).append(msg)

    def request(self, channel, msg_type, content=None, timeout=10):
        """Sends a request and returns (reply, iopub messages up to idle)."""
        msg_id = self.send(channel, msg_type, content)
        reply = self.reply(msg_id, channel, timeout)
        return reply, self.iopub(msg_id, timeout)

    def execute(self, code, timeout=20, **options):
        """Runs a cell; returns (execute_reply, iopub messages up to idle)."""
        content = execute_content(code, stop_on_error=True)
        content.update(options)
        return self.request("shell", "execute_request", content, timeout)

    def close(self):
        try:
            self.kc.stop_channels()
            # the client's own context: closed here rather than in its __del__ at
            # interpreter exit, where logging is already torn down
            if not self.kc.context.closed:
                self.kc.context.destroy(linger=0)
        finally:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=False)


def text(value):
    """A notebook field that nbformat may keep as a list of lines, as one string."""
    return "".join(value) if isinstance(value, list) else value


def stream_of(cell, name="stdout"):
    """The text a notebook cell's outputs wrote to one stream."""
    return "".join(text(o["text"]) for o in cell.outputs if o["output_type"] == "stream" and o["name"] == name)


def chart_svg(html):
    """The training display's chart: the SVG inside img.taas-chart's data: URI (None if none)."""
    import base64
    m = re.search(r'<img class="taas-chart" alt="" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)">', html)
    return base64.b64decode(m.group(1)).decode() if m else None


def last_display(msgs):
    """The data of the last display_data or update_display_data among msgs (the state a
    display shows after them), or None."""
    shown = [m for m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
    return shown[-1]["content"]["data"] if shown else None


def outputs(msgs):
    """The output messages among an execute's iopub messages."""
    return [m for m in msgs if m["msg_type"] in OUTPUT_TYPES]


def stream_text(msgs, name="stdout"):
    return "".join(m["content"]["text"] for m in msgs
                   if m["msg_type"] == "stream" and m["content"]["name"] == name)


def only(msgs, msg_type):
    return [m for m in msgs if m["msg_type"] == msg_type]


def error_of(msgs):
    """The single error output's content (asserts there is exactly one)."""
    errs = only(msgs, "error")
    if len(errs) != 1:
        raise AssertionError("expected one error output, got %s"
                             % [m["msg_type"] for m in msgs])
    return errs[0]["content"]


def traceback_text(content):
    return "\n".join(plain(line) for line in content["traceback"])


def result_text(msgs):
    """text/plain of the single execute_result."""
    res = only(msgs, "execute_result")
    if len(res) != 1:
        raise AssertionError("expected one execute_result, got %s"
                             % [m["msg_type"] for m in msgs])
    return res[0]["content"]["data"]["text/plain"]


def caret_column(traceback_lines, source_line):
    """1-based column of the first caret under `source_line` in a traceback, following
    the layout of common/error.h: the source line indented by four spaces, the caret line
    below it with the same indent. None when the layout is not there."""
    lines = [plain(line) for line in traceback_lines]
    # a traceback entry may itself hold several lines
    flat = []
    for line in lines:
        flat.extend(line.split("\n"))
    for i, line in enumerate(flat[:-1]):
        if line.rstrip() == "    " + source_line.rstrip():
            caret = flat[i + 1]
            if "^" in caret and caret.startswith("    "):
                return len(caret[4:].split("^", 1)[0]) + 1
    return None


class RawClient:
    """Plain pyzmq sockets on a running kernel's ports, for what jupyter_client will not
    send (bad signatures, missing frames, bytes that are not JSON) and for looking at the
    kernel's messages exactly as they come off the wire. Messages from the kernel are
    checked against its signature by jupyter_client's Session when parsed."""

    DELIM = b"<IDS|MSG>"

    def __init__(self, info):
        import zmq
        from jupyter_client.session import Session

        self.zmq = zmq
        key = info["key"]
        if isinstance(key, str):
            key = key.encode()
        self.key = key
        self.session = Session(key=key, signature_scheme=info["signature_scheme"])
        self.ctx = zmq.Context()
        base = "%s://%s:" % (info["transport"], info["ip"])
        self.shell = self._socket(zmq.DEALER, base + str(info["shell_port"]))
        self.control = self._socket(zmq.DEALER, base + str(info["control_port"]))
        self.iopub = self._socket(zmq.SUB, base + str(info["iopub_port"]))
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.hb_url = base + str(info["hb_port"])

    def _socket(self, kind, url):
        s = self.ctx.socket(kind)
        s.setsockopt(self.zmq.LINGER, 0)
        s.connect(url)
        return s

    def close(self):
        self.ctx.destroy(linger=0)

    def sign(self, frames):
        return self.session.sign(frames)

    def header(self, msg_type):
        return self.session.msg_header(msg_type)

    def frames(self, msg_type, content, header=None, parent=None, metadata=None):
        """Correctly signed frames; content may be a dict or raw bytes (sent as they are)."""
        header = header or self.header(msg_type)
        parts = [header, parent or {}, metadata or {}, content]
        packed = [p if isinstance(p, bytes) else self.session.pack(p) for p in parts]
        return [self.DELIM, self.sign(packed)] + packed, header["msg_id"]

    def send_frames(self, sock, frames):
        sock.send_multipart(frames)

    def send(self, sock, msg_type, content):
        frames, msg_id = self.frames(msg_type, content)
        sock.send_multipart(frames)
        return msg_id

    def recv_raw(self, sock, timeout):
        """The next multipart message on sock, or None after timeout seconds."""
        if sock.poll(int(timeout * 1000)):
            return sock.recv_multipart()
        return None

    def parse(self, frames):
        """A received multipart message as a dict (signature verified, dates left as the
        strings the kernel wrote)."""
        import json

        idents, msg_list = self.session.feed_identities(frames, copy=True)
        msg = self.session.deserialize(msg_list, content=True, copy=True)
        msg["raw_header"] = json.loads(msg_list[1])
        msg["raw_parent_header"] = json.loads(msg_list[2])
        return msg

    def reply(self, sock, msg_id, timeout=10):
        """The reply to msg_id on sock; replies to other requests are dropped."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            frames = self.recv_raw(sock, left)
            if frames is None:
                return None
            msg = self.parse(frames)
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def iopub_messages(self, wait):
        """Every iopub message that arrives within `wait` seconds."""
        out = []
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            frames = self.recv_raw(self.iopub, left)
            if frames is None:
                return out
            out.append(self.parse(frames))

    def iopub_until_idle(self, msg_id, timeout=10):
        """iopub messages (of any parent) up to the idle status whose parent is msg_id."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no idle status for %s on iopub" % msg_id)
            frames = self.recv_raw(self.iopub, left)
            if frames is None:
                continue
            msg = self.parse(frames)
            out.append(msg)
            if (msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
                    and msg["parent_header"].get("msg_id") == msg_id):
                return out

    def sync_iopub(self, timeout=10):
        """Waits until the iopub subscription is live (a SUB that has just connected misses
        what is published before its subscription reaches the kernel)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg_id = self.send(self.shell, "kernel_info_request", {})
            if self.reply(self.shell, msg_id, 5) is None:
                continue
            for msg in self.iopub_messages(0.3):
                if msg["parent_header"].get("msg_id") == msg_id:
                    self.iopub_messages(0.1)
                    return
        raise TimeoutError("iopub never delivered a status message")


class RawKernelCase(unittest.TestCase):
    """Tests that share one kernel (cls.k) and a RawClient on its ports (cls.raw), whose
    iopub subscription is live before the first test."""

    @classmethod
    def setUpClass(cls):
        cls.k = Kernel()
        cls.raw = RawClient(cls.k.connection_info())
        cls.raw.sync_iopub()

    @classmethod
    def tearDownClass(cls):
        cls.raw.close()
        cls.k.close()


def job_tmp(cwd):
    """A kernel_env: the kernel's TMPDIR, where job folders go, a folder of the test's own."""
    path = os.path.join(cwd, "tmp")
    os.makedirs(path, exist_ok=True)
    return {"TMPDIR": path}


class KernelCase(unittest.TestCase):
    """Tests that share one kernel, started in a private working directory (self.tmp.name)
    with `kernel_env` added to its environment, after which `setup_code` (when given) runs
    in it and must succeed."""

    tmp_prefix = "taas-test-"
    kernel_env = None
    setup_code = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix=cls.tmp_prefix)
        env = None
        if cls.kernel_env:
            env = dict(os.environ)
            env.update(cls.kernel_env(cls.tmp.name) if callable(cls.kernel_env) else cls.kernel_env)
        cls.k = Kernel(cwd=cls.tmp.name, env=env)
        if cls.setup_code:
            reply, msgs = cls.k.execute(cls.setup_code, timeout=30)
            assert reply["content"]["status"] == "ok", msgs

    @classmethod
    def tearDownClass(cls):
        cls.k.close()
        cls.tmp.cleanup()

    def ok(self, code, timeout=30):
        """Runs code, which must succeed; its iopub messages."""
        reply, msgs = self.k.execute(code, timeout=timeout)
        if reply["content"]["status"] != "ok":
            self.fail("%s failed: %s" % (code, traceback_text(error_of(msgs))))
        return msgs

    def result(self, code, timeout=30):
        """The data of the single execute_result of code."""
        msgs = self.ok(code, timeout)
        res = only(msgs, "execute_result")
        self.assertEqual(len(res), 1, msgs)
        return res[0]["content"]["data"]

    def error(self, code, ename=None, timeout=30):
        """Runs code, which must fail (with ename when given); the error's content."""
        reply, msgs = self.k.execute(code, timeout=timeout)
        self.assertEqual(reply["content"]["status"], "error", code)
        err = error_of(msgs)
        if ename is not None:
            self.assertEqual(err["ename"], ename, traceback_text(err))
        return err
