"""The ssh and slurm backends on the test cluster (tests/lib/cluster.py: two cpu and two gpu
hosts in network namespaces on a bridge, each with a private /tmp, a slurmd and an sshd):
the docs/design.md section 1 network trained with --gpus 2 --cpus 2 through nbclient on each
backend, byte for byte the local backend's result; where each process ran; the batches on
the bridge; a killed loader; the stop button; a node that dies; intruders without the job's
keys; a capture of the bridge; bad configurations. Needs root and the packages of
scripts/deps.sh; without them it fails (it does not skip).

A test that needs a job still running holds it: it stops rank 1 (SIGSTOP), so that no step
can finish (the ranks sum every step), and lets it go on (SIGCONT) when it is done."""

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

import nbformat

import taastest
from cluster import TestCluster
from taastest import stream_text

SOURCE_DIR = taastest.SOURCE_DIR
BUILD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(os.environ["TAAS_KERNEL"])))
FASHION = "/usr/share/datasets/fashion-mnist"
DEADLINE = 60

NET = """\
net = Sequential(
    Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(),
    MaxPool2d(2), Dropout(0.25), Flatten(),
    Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5),
    Linear(128, 10), LogSoftmax(dim=1))
"""
SETUP = """\
transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])
train = DataLoader(FashionMNIST(root='%s', train=True, transform=transform), batch_size=32, shuffle=False)
register(train)
""" % FASHION + NET
FIT = ("h = fit(net, train, epochs=1, loss=NLLLoss(), optimizer=Adadelta(lr=1.0), "
       "scheduler=StepLR(step_size=1, gamma=0.7), seed=5)\nsave(net, 'out.safetensors')")
# A rank's compute threads change the order of BLAS's sums, so results are byte-identical for
# the same threads per rank (docs/training.md): the local backend gives each of its 2 ranks
# half this machine's cores, and the hosts say they have as many.
THREADS = max(1, (os.cpu_count() or 2) // 2)
# the ranks' configuration on Slurm: one rank a gpu host (no GPU there: the CPU core trains)
CONFIGURATIONS = {"t1.4": {"gpus": 1, "cpus": THREADS, "partition": "gpu"},
                  "c1.4": {"gpus": 0, "cpus": 4, "partition": "cpu"}}

CL = None
WORK = None
CONFIG = None
SHARED = None  # a folder every host sees (in the build tree), for the test's wrappers


def shared_script(name, text):
    """An executable script at a path every host and this machine see."""
    path = os.path.join(SHARED, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def setUpModule():
    global CL, WORK, CONFIG, SHARED
    if os.geteuid() != 0:
        raise RuntimeError("the cluster tests need root (network and mount namespaces, Slurm and sshd "
                           "daemons); run them as root")
    WORK = tempfile.mkdtemp(prefix="taas-backends-")
    SHARED = tempfile.mkdtemp(prefix="taas-backends-", dir=BUILD_DIR)
    CONFIG = os.path.join(WORK, "config.json")
    try:
        CL = TestCluster(cpus=2, gpus=2, share=[SOURCE_DIR, BUILD_DIR], cpus_per_host=max(4, THREADS))
        CL.start()
    except BaseException:
        shutil.rmtree(WORK, ignore_errors=True)
        shutil.rmtree(SHARED, ignore_errors=True)
        raise


def tearDownModule():
    try:
        if CL is not None:
            CL.stop()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
        shutil.rmtree(SHARED, ignore_errors=True)


def hosts_section():
    return [{"name": h.name, "address": h.addr, "gpus": 1 if h.kind == "gpu" else 0,
             "cpus": THREADS if h.kind == "gpu" else 4} for h in CL.cpu_hosts + CL.gpu_hosts]


def write_config(backend, t14=None, **cluster):
    """The configuration file every kernel of the module reads (it reads it on each cell):
    the cluster section for backend, with cluster's keys, and t14's keys in configuration t1.4."""
    doc = {"configurations": dict(CONFIGURATIONS, **{"t1.4": dict(CONFIGURATIONS["t1.4"], **(t14 or {}))})}
    if backend == "ssh":
        doc["cluster"] = dict({"backend": "ssh", "ssh_config": CL.ssh_config, "hosts": hosts_section()}, **cluster)
    elif backend == "slurm":
        doc["cluster"] = dict({"backend": "slurm", "munge_socket": CL.munge_socket}, **cluster)
    elif backend != "local":
        doc["cluster"] = dict({"backend": backend}, **cluster)
    with open(CONFIG + ".part", "w") as f:
        json.dump(doc, f)
    os.replace(CONFIG + ".part", CONFIG)


def kernel_env(**extra):
    """The kernels' environment: OpenBLAS's variables set as some hosts set them (and the
    cluster's hosts do not), which must change no number of a job (docs/training.md)."""
    return CL.slurm_env(dict(os.environ, TAAS_CONFIG=CONFIG, OPENBLAS_CORETYPE="Haswell", OPENBLAS_L2_SIZE="512",
                             **extra))


def pragma(backend, units, cpus=2, gpus=2):
    # on Slurm the configuration says where the ranks go; ssh fills the gpu hosts' slots
    head = "#!t1.4\n" if backend == "slurm" else ""
    return head + "#pragma taas --gpus %d --cpus %d --units %d\n" % (gpus, cpus, units)


def run_nbclient(backend, cwd, units=1280, cpus=2, env=None, **cluster):
    """SETUP and the fit cell in a notebook, executed by nbclient on backend (the cluster
    section's keys added, env in the kernel's environment); the fit cell."""
    from nbclient import NotebookClient

    write_config(backend, **cluster)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(pragma(backend, units, cpus) + FIT)]
    saved = dict(os.environ)
    os.environ.update(kernel_env(**(env or {})))
    try:
        taastest.install_test_kernelspec()
        NotebookClient(nb, kernel_name="taas", timeout=600, resources={"metadata": {"path": cwd}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    for c in nb.cells:
        errors = [o for o in c.outputs if o["output_type"] == "error"]
        if errors:
            raise AssertionError("%s: %s" % (backend, "\n".join(taastest.plain(l) for l in errors[0]["traceback"])))
    return nb.cells[1]


def cell_stdout(cell):
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == "stdout")


def summary(text):
    lines = [l for l in text.splitlines() if l.startswith("done: ")]
    assert len(lines) == 1, text
    return lines[0].split("; ")[-1]


def started(text, last=False):
    """{"rank 0": (host, pid, data), "loader train.0": (host, pid, None), ...} from the line
    a job off this machine prints once every worker is there (last: the last of several, a
    job that resumed)."""
    line = [l for l in text.splitlines() if l.startswith("started: ")]
    assert line and (last or len(line) == 1), text
    out = {}
    for m in re.finditer(r"(rank \d+|loader \S+) on (\S+) \(pid (\d+)(?:, data (\S+))?\)", line[-1]):
        out[m.group(1)] = (m.group(2), int(m.group(3)), m.group(4))
    return out


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def first_labels(n):
    """The labels of the first n training samples as a batch carries them: int64, little-endian."""
    with gzip.open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")) as f:
        data = f.read()
    return b"".join(struct.pack("<q", b) for b in data[8:8 + n])


def workers_on(host):
    return [(p, c) for p, c in CL.processes_on(host) if "taas-worker" in c and (" trainer " in c or " loader " in c)]


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class SameJobEverywhere(unittest.TestCase):
    """One notebook on the local, ssh and slurm backends (--cpus 2, 2 and 4): the same weights,
    byte for byte, and the same per-epoch checksums; the ranks on the gpu hosts, the loaders on the cpu hosts,
    the batches across the bridge, nothing of the job or a batch in the clear on it."""

    maxDiff = None

    def run_backend(self, backend, capture=False, cpus=2):
        cwd = os.path.join(WORK, backend)
        os.makedirs(cwd, exist_ok=True)
        if capture:
            pcap = os.path.join(WORK, backend + ".pcap")
            with CL.tcpdump(pcap):
                cell = run_nbclient(backend, cwd, cpus=cpus)
            with open(pcap, "rb") as f:
                self.captures[backend] = f.read()
        else:
            cell = run_nbclient(backend, cwd, cpus=cpus)
        text = cell_stdout(cell)
        self.results[backend] = (sha256(os.path.join(cwd, "out.safetensors")), summary(text), text)
        return text

    @classmethod
    def setUpClass(cls):
        cls.results, cls.captures = {}, {}

    def test_1_local(self):
        text = self.run_backend("local")
        self.assertRegex(summary(text), r"^samples trained and their checksum: epoch 1 1,280 0x[0-9a-f]{16}$")
        self.assertIn("\nkernels: %s on every rank (%s)\n" % (taastest.best_kernels(),
                      taastest.kernels_why("the best every rank's host runs")), text)

    def check_remote(self, backend, cpus):
        # the batches do not depend on how many loaders make them: --cpus 4 gives the bytes
        # that --cpus 2 gave
        text = self.run_backend(backend, capture=True, cpus=cpus)
        self.assertEqual(self.results[backend][:2], self.results["local"][:2], text)
        self.assertIn("\nkernels: %s on every rank (%s)\n" % (taastest.best_kernels(),
                      taastest.kernels_why("the best every rank's host runs")), text)
        where = started(text)
        gpu = {h.name: h.addr for h in CL.gpu_hosts}
        self.assertEqual(sorted(where[r][0] for r in ("rank 0", "rank 1")), sorted(gpu))
        self.assertEqual(sorted({where["loader train.%d" % i][0] for i in range(cpus)}),
                         sorted(h.name for h in CL.cpu_hosts))
        for r in ("rank 0", "rank 1"):  # each rank's data endpoint is its host's address
            self.assertTrue(where[r][2].startswith("tcp://%s:" % gpu[where[r][0]]), where[r])
        cap = self.captures[backend]
        # the batches crossed the bridge (a few hundred KB of them), encrypted: neither the
        # spec's words nor the first batch's labels are in the capture
        self.assertGreater(len(cap), 1280 * 28 * 28 * 4)
        for plain in (b"Adadelta", b"NLLLoss", b"fashion-mnist", b"StepLR", first_labels(16)):
            self.assertNotIn(plain, cap)
        return text

    def test_2_ssh(self):
        text = self.check_remote("ssh", 2)
        self.assertIn("ssh: the 2 ranks on ", text)

    def test_3_slurm(self):
        text = self.check_remote("slurm", 4)  # two loader steps on each cpu host
        self.assertRegex(text, r"slurm: one heterogeneous job: the 2 ranks on 2 nodes of partition gpu \(t1\.4\), "
                               r"%d threads? each" % THREADS)
        self.assertRegex(text, r"slurm: job \d+ granted")
        self.assertTrue(taastest.wait_until(lambda: not CL.slurm("squeue", "-h").stdout.strip(), 5),
                        CL.slurm("squeue").stdout)

    def test_4_a_host_that_runs_less_lowers_every_rank(self):
        """gpu2's worker reports a lower set (TAAS_CPU in its host's environment, set by a
        wrapper named as the cluster's "worker"): on ssh and Slurm every rank runs that set,
        with the weights of a local run whose kernel has TAAS_CPU set to it."""
        low = taastest.lower_kernels()
        cwd = os.path.join(WORK, "low-local")
        os.makedirs(cwd, exist_ok=True)
        text = cell_stdout(run_nbclient("local", cwd, env={"TAAS_CPU": low}))
        self.assertIn("\nkernels: %s on every rank (TAAS_CPU)\n" % low, text)
        want = (sha256(os.path.join(cwd, "out.safetensors")), summary(text))
        if low != taastest.best_kernels() and "local" in self.results:  # the set shows in the numbers
            self.assertNotEqual(want[0], self.results["local"][0])
        worker = shared_script("worker-low.sh", '#!/bin/sh\n[ "$(hostname)" = %s ] && export TAAS_CPU=%s\nexec %s "$@"\n'
                               % (CL.gpu_hosts[1].name, low, os.path.join(BUILD_DIR, "kernel", "taas-worker")))
        for backend in ("ssh", "slurm"):
            with self.subTest(backend=backend):
                cwd = os.path.join(WORK, "low-" + backend)
                os.makedirs(cwd, exist_ok=True)
                # the kernel names no set (TAAS_CPU empty is none): the ranks' reports decide
                text = cell_stdout(run_nbclient(backend, cwd, env={"TAAS_CPU": ""}, worker=worker))
                self.assertIn("\nkernels: %s on every rank (the best every rank's host runs)\n" % low, text)
                self.assertEqual((sha256(os.path.join(cwd, "out.safetensors")), summary(text)), want, text)


class ClusterKernel(unittest.TestCase):
    """One kernel for the class's tests, in WORK/<folder>, that has run `setup`."""

    folder, setup = None, None

    @classmethod
    def setUpClass(cls):
        cls.cwd = os.path.join(WORK, cls.folder)
        os.makedirs(cls.cwd, exist_ok=True)
        write_config("local")
        cls.k = taastest.Kernel(env=kernel_env(), cwd=cls.cwd)
        reply, msgs = cls.k.execute(cls.setup, timeout=60)
        assert reply["content"]["status"] == "ok", msgs

    @classmethod
    def tearDownClass(cls):
        cls.k.close()


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class Faults(ClusterKernel):
    """A running job, held by the test, that loses a loader, is stopped, loses a node, or is
    approached by a process without its keys."""

    maxDiff = None
    folder, setup = "faults", SETUP

    def start(self, backend, units, gpus=2, fit=FIT, **cluster):
        write_config(backend, **cluster)
        msg_id = self.k.send("shell", "execute_request", {"code": pragma(backend, units, gpus=gpus) + fit,
                                                          "silent": False,
                                                          "store_history": True, "user_expressions": {},
                                                          "allow_stdin": False, "stop_on_error": True})
        seen = []

        def up():
            seen.extend(self.k.iopub_now(msg_id, 0.05))
            return "started: " in stream_text(seen)
        self.assertTrue(taastest.wait_until(up, 120), stream_text(seen) + stream_text(seen, "stderr"))
        return msg_id, seen, started(stream_text(seen))

    def hold(self, host):
        """SIGSTOP to the rank on host: no step of the job can finish. The pids of the host's
        rank as the root namespace sees them (a Slurm step's are in slurmd's namespace)."""
        ranks = [p for p, c in workers_on(host) if " trainer " in c]
        self.assertEqual(len(ranks), 1, workers_on(host))
        os.kill(ranks[0], signal.SIGSTOP)
        return ranks[0]

    def finish(self, msg_id, seen, timeout=300):
        reply = self.k.reply(msg_id, timeout=timeout)
        msgs = seen + self.k.iopub(msg_id)
        return reply, msgs

    def tearDown(self):
        """Whatever a failed test left: held ranks go on, a running job is stopped."""
        for h in CL.gpu_hosts:
            for p, c in workers_on(h.name):
                try:
                    os.kill(p, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        self.k.request("control", "interrupt_request")
        self.k.drain(1.0)
        self.no_job_left(30)

    def no_job_left(self, within):
        t0 = time.monotonic()
        left = lambda: {h.name: workers_on(h.name) for h in CL.cpu_hosts + CL.gpu_hosts if workers_on(h.name)}
        self.assertTrue(taastest.wait_until(lambda: not left(), within), left())
        return time.monotonic() - t0

    def undisturbed(self, backend, units, gpus=2, **cluster):
        msg_id, seen, _ = self.start(backend, units, gpus, **cluster)
        reply, msgs = self.finish(msg_id, seen)
        self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
        return summary(stream_text(msgs))

    def test_1_a_killed_loader_is_replaced(self):
        for backend in ("ssh", "slurm"):
            with self.subTest(backend=backend):
                before = self.undisturbed(backend, 3200)
                msg_id, seen, where = self.start(backend, 3200)
                held = self.hold(where["rank 1"][0])
                victim_host = where["loader train.0"][0]
                victims = [p for p, c in workers_on(victim_host) if " loader " in c]
                self.assertEqual(len(victims), 1)
                os.kill(victims[0], signal.SIGKILL)
                def replaced():
                    seen.extend(self.k.iopub_now(msg_id, 0.05))
                    return "a replacement takes over" in stream_text(seen, "stderr")
                self.assertTrue(taastest.wait_until(replaced, DEADLINE), stream_text(seen, "stderr"))
                os.kill(held, signal.SIGCONT)
                reply, msgs = self.finish(msg_id, seen)
                self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
                self.assertRegex(stream_text(msgs, "stderr"), r"\[loader train\.0\] died \(pid \d+ on %s, "
                                 % re.escape(victim_host))
                self.assertEqual(summary(stream_text(msgs)), before)

    def test_2_stop_button_ends_everything(self):
        for backend in ("ssh", "slurm"):
            with self.subTest(backend=backend):
                msg_id, seen, where = self.start(backend, 64000)
                self.hold(where["rank 1"][0])
                self.k.request("control", "interrupt_request")
                reply, msgs = self.finish(msg_id, seen, timeout=30)
                self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
                self.no_job_left(30)  # the held job cannot end by itself: this is the stop's doing
                if backend == "slurm":
                    self.assertTrue(taastest.wait_until(lambda: not CL.slurm("squeue", "-h").stdout.strip(), 5),
                                    CL.slurm("squeue").stdout)

    def test_3_a_node_that_dies_is_named(self):
        """The job resumes without the node, which it cannot: 2 ranks, 1 gpu host left."""
        msg_id, seen, where = self.start("slurm", 64000)
        host = where["rank 1"][0]
        self.hold(host)
        try:
            CL.kill_slurmd(host)
            reply, msgs = self.finish(msg_id, seen, timeout=120)
            self.assertEqual(reply["content"]["status"], "error")
            err = taastest.error_of(msgs)
            self.assertEqual(err["ename"], "TaasOffloadError", err["evalue"])
            # the cause is the first end the job saw: the node's failure, its rank's end, or the
            # end of the other rank, which lost its peer (srun may report that one first)
            self.assertRegex(err["evalue"], r"^Slurm did not grant the job's allocation: .*\(while resuming after: "
                                            r"(trainer rank \d on node gpu\d ended|the ranks' node %s failed)"
                                            % host)
            self.assertRegex(stream_text(msgs, "stderr"), r"; (resuming from step \d+ \(epoch 1\)|starting again "
                                                          r"\(no checkpoint yet\)), restart 1 of 3\n")
            self.assertTrue(taastest.wait_until(lambda: not CL.slurm("squeue", "-h").stdout.strip(), 30),
                            CL.slurm("squeue").stdout)
        finally:
            CL.start_slurmd(host, wait=True)

    def test_6_a_dead_rank_resumes_byte_for_byte(self):
        """ssh: rank 1 killed, on a fast network and on one where every ssh command takes 3 s
        more (a wrapper named as the cluster's "ssh": a bastion's round trip); Slurm: a
        one-rank job's node killed, the job resumes on the other gpu host. From the last
        checkpoint, with the undisturbed run's result."""
        fit = FIT.replace("seed=5)", "seed=5, checkpoint_every=1)")
        slow = {"ssh": shared_script("ssh-slow.sh", '#!/bin/sh\nsleep 3\nexec ssh "$@"\n')}
        for backend, gpus, cluster in (("ssh", 2, {}), ("ssh", 2, slow), ("slurm", 1, {})):
            with self.subTest(backend=backend, slow=bool(cluster)):
                self.k.execute(NET)  # both runs start from the same weights
                before = self.undisturbed(backend, 3200, gpus)
                weights = sha256(os.path.join(self.cwd, "out.safetensors"))
                self.k.execute(NET)
                msg_id, seen, where = self.start(backend, 3200, gpus, fit, **cluster)
                host = where["rank %d" % (gpus - 1)][0]
                held = self.hold(host)
                try:
                    if backend == "ssh":
                        os.kill(held, signal.SIGKILL)
                    else:
                        CL.kill_slurmd(host)
                    reply, msgs = self.finish(msg_id, seen)
                finally:
                    if backend == "slurm":
                        CL.start_slurmd(host, wait=True)
                self.assertEqual(reply["content"]["status"], "ok", "%s\n%s" % (
                    stream_text(msgs, "stderr"), taastest.traceback_text(taastest.error_of(msgs)) if
                    reply["content"]["status"] == "error" else ""))
                self.assertRegex(stream_text(msgs, "stderr"), r"%s[^\n]*; (resuming from step \d+ \(epoch 1\)|starting "
                                 r"again \(no checkpoint yet\)), restart 1 of 3\n" % re.escape(host))
                self.assertEqual(summary(stream_text(msgs)), before)
                self.assertEqual(sha256(os.path.join(self.cwd, "out.safetensors")), weights)
                if backend == "slurm":  # the ranks went where the node that died is not
                    again = started(stream_text(msgs), last=True)
                    self.assertNotEqual(again["rank 0"][0], host)

    def test_7_a_preempted_job_resumes_when_it_runs_again(self):
        """A job of the urgent partition (PriorityTier 10) takes the gpu hosts: Slurm cancels
        the job's allocation (PreemptMode=CANCEL); it waits in the queue and resumes from its
        checkpoint once the urgent job is gone, with the undisturbed run's result."""
        fit = FIT.replace("seed=5)", "seed=5, checkpoint_every=1)")
        self.k.execute(NET)
        before = self.undisturbed("slurm", 3200)
        weights = sha256(os.path.join(self.cwd, "out.safetensors"))
        self.k.execute(NET)
        msg_id, seen, where = self.start("slurm", 3200, 2, fit)
        self.hold(where["rank 1"][0])
        r = CL.slurm("sbatch", "--parsable", "--partition", "urgent", "--nodes", "2", "--exclusive",
                     "--output", "/dev/null", "--chdir", "/tmp", "--wrap", "sleep 600")
        self.assertEqual(r.returncode, 0, r.stderr)
        urgent = r.stdout.strip().split(";")[0]
        try:
            def preempted():
                seen.extend(self.k.iopub_now(msg_id, 0.05))
                return "when it runs again" in stream_text(seen, "stderr")
            self.assertTrue(taastest.wait_until(preempted, DEADLINE), stream_text(seen, "stderr"))
        finally:
            CL.slurm("scancel", urgent)
        reply, msgs = self.finish(msg_id, seen)
        self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
        self.assertRegex(stream_text(msgs, "stderr"), r"Slurm preempted the job \(allocation \d+\); (resuming from step "
                                                      r"\d+ \(epoch 1\)|starting again \(no checkpoint yet\)) when it "
                                                      r"runs again\n")
        self.assertEqual(summary(stream_text(msgs)), before)
        self.assertEqual(sha256(os.path.join(self.cwd, "out.safetensors")), weights)

    def test_9_a_host_that_does_not_confirm_the_cancel(self):
        """ssh: rank 1 killed, and the host never answers the cancel (a wrapper named as the
        cluster's "ssh" holds that command): the job does not resume beside processes that
        may still run there; it stops with an error that names the host, and nothing of it
        is left."""
        mute = {"ssh": shared_script("ssh-mute.sh", '#!/bin/sh\ncase "$*" in *"echo gone"*) exec sleep 600 ;; esac\n'
                                                   'exec ssh "$@"\n')}
        fit = FIT.replace("seed=5)", "seed=5, checkpoint_every=1)")
        msg_id, seen, where = self.start("ssh", 3200, 2, fit, **mute)
        host = where["rank 1"][0]
        os.kill(self.hold(host), signal.SIGKILL)
        reply, msgs = self.finish(msg_id, seen, timeout=120)
        self.assertEqual(reply["content"]["status"], "error", stream_text(msgs))
        err = taastest.error_of(msgs)
        addr = {h.name: h.addr for h in CL.gpu_hosts + CL.cpu_hosts}
        self.assertEqual(err["ename"], "TaasOffloadError", err["evalue"])
        self.assertRegex(err["evalue"], r"^host \S+ \([0-9.]+\) did not confirm that the job's processes are gone and its "
                                        r"keys removed: no answer over ssh within 30 s \(while resuming after: .*%s"
                                        % re.escape(host))
        named = re.match(r"host (\S+) \(([0-9.]+)\)", err["evalue"])
        self.assertEqual(addr[named.group(1)], named.group(2))
        self.assertIn("end any taas-worker left there", taastest.traceback_text(err))
        self.no_job_left(30)

    def test_8_a_detached_job_outlives_its_kernel(self):
        """Slurm: a --detach fit, held by the test, while its kernel shuts down; a fresh kernel
        lists it with jobs() and attach() gives the undisturbed run's result and weights."""
        self.k.execute(NET)
        before = self.undisturbed("slurm", 3200)
        weights = sha256(os.path.join(self.cwd, "out.safetensors"))
        env = dict(kernel_env(), TAAS_JOBS_DIR=os.path.join(WORK, "detached"))
        k = taastest.Kernel(env=env, cwd=self.cwd)
        try:
            reply, msgs = k.execute(SETUP, timeout=60)
            self.assertEqual(reply["content"]["status"], "ok", msgs)
            cell = pragma("slurm", 3200).replace("--units 3200\n", "--units 3200 --detach\n") + FIT
            msg_id = k.send("shell", "execute_request", {"code": cell, "silent": False})
            seen = []

            def up():
                seen.extend(k.iopub_now(msg_id, 0.05))
                return "started: " in stream_text(seen)
            self.assertTrue(taastest.wait_until(up, 120), stream_text(seen) + stream_text(seen, "stderr"))
            held = self.hold(started(stream_text(seen))["rank 1"][0])
        finally:
            k.close()
        k = taastest.Kernel(env=env, cwd=self.cwd)
        try:
            reply, msgs = k.execute("jobs()")
            listed = taastest.result_text(msgs)
            m = re.search(r"(job-\S+)\s+running\s", listed)
            self.assertTrue(m, listed)
            os.kill(held, signal.SIGCONT)
            reply, msgs = k.execute(NET + "h = attach('%s', into=net)\nsave(net, 'detached.safetensors')" % m.group(1),
                                    timeout=300)
            self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
            self.assertEqual(summary(stream_text(msgs)), before)
            self.assertEqual(sha256(os.path.join(self.cwd, "detached.safetensors")), weights)
        finally:
            k.close()

    def test_5_a_kernel_that_dies_takes_its_job(self):
        """SIGKILL to the kernel: on ssh the workers' connections end with it (a loader's stdin,
        mpirun's daemons); on Slurm the reaper cancels the allocation. Nothing of the job is
        left on any host, and squeue is empty."""
        for backend in ("ssh", "slurm"):
            with self.subTest(backend=backend):
                write_config(backend)
                k = taastest.Kernel(env=kernel_env(), cwd=self.cwd)
                try:
                    reply, msgs = k.execute(SETUP, timeout=60)
                    self.assertEqual(reply["content"]["status"], "ok", msgs)
                    msg_id = k.send("shell", "execute_request", {"code": pragma(backend, 64000) + FIT,
                                                                 "silent": False})
                    seen = []

                    def up():
                        seen.extend(k.iopub_now(msg_id, 0.05))
                        return "started: " in stream_text(seen)
                    self.assertTrue(taastest.wait_until(up, 120), stream_text(seen) + stream_text(seen, "stderr"))
                    os.kill(k.pid, signal.SIGKILL)
                    # the workers go with their connections; at the latest when the kernel
                    # has been silent for 15 s (workers/ctl_client.h)
                    self.no_job_left(30)
                    self.assertTrue(taastest.wait_until(lambda: not CL.slurm("squeue", "-h").stdout.strip(), 30),
                                    CL.slurm("squeue").stdout)
                finally:
                    k.close()

    def test_4_no_keys_no_way_in(self):
        """From another host of the bridge, without the job's keys: the kernel's control
        endpoint and a rank's data endpoint answer nothing and take nothing; the job's result
        is the undisturbed one."""
        before = self.undisturbed("ssh", 3200)
        msg_id, seen, where = self.start("ssh", 3200)
        held = self.hold(where["rank 1"][0])
        control = None
        for p, c in workers_on(where["rank 0"][0]):
            m = re.search(r"--control (\S+)", c)
            control = control or (m and m.group(1))
        self.assertTrue(control and control.startswith("tcp://"), control)
        intruder = """
import json, sys, zmq
ctx = zmq.Context()
got = []
for ep, frames in ((sys.argv[1], [json.dumps({"t": "error", "ename": "Forged", "message": "forged"}).encode()]),
                   (sys.argv[2], [b"H", json.dumps({"stream": 0, "worker": 0}).encode()])):
    for ident in (b"rank.0", b"loader.0.0.0"):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.IDENTITY, ident)
        s.connect(ep)
        s.send_multipart(frames)
        if s.poll(2000):
            got.append(s.recv_multipart())
        s.close()
ctx.term()
print("answers", len(got))
"""
        out = CL.run_on("cpu2", ["/usr/bin/python3", "-c", intruder, control, where["rank 0"][2]], timeout=60)
        self.assertEqual(out.stdout.strip(), "answers 0", out)
        os.kill(held, signal.SIGCONT)
        reply, msgs = self.finish(msg_id, seen)
        self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
        self.assertNotIn("forged", stream_text(msgs, "stderr").lower())
        self.assertEqual(summary(stream_text(msgs)), before)

# The slow source of PoolAndBudget (taastest.slow_npy_source)
POOL_N = 1536        # samples of the slow source: 24 steps of 2 ranks x 32
POOL_DELAY = 0.005   # seconds before every answer of its server
TINY_FIT = ("tiny = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))\n"
            "h = fit(tiny, slow, epochs=%d, loss=NLLLoss(), optimizer=Adam(lr=0.002), seed=5)\n"
            "save(tiny, 'tiny-%s.safetensors')\nh")


class PoolAndBudget(unittest.TestCase):
    """--cpus auto and --budget on the ssh and slurm backends: the pool grows over the loader
    hosts with the weights of the local backend's --cpus 1; a time budget stops the job with
    its History and weights, counted from when the machines are held.

    The slow source, as protocol.test_pool's: the test's HTTP server (tests/lib/faultserver.py)
    on the cluster's bridge, with a delay before every answer, and an NpyDataset whose every
    sample is one range request (TAAS_NPY_MEMORY_LIMIT below the file: ssh sends it, Slurm
    exports it). A loader worker makes at most its threads / delay samples a second, whatever
    the machine: the ranks of a one-layer model always outrun one, and a job has a floor under
    its length."""

    @classmethod
    def setUpClass(cls):
        cls.cwd = os.path.join(WORK, "pool")
        data = os.path.join(cls.cwd, "data")
        os.makedirs(data, exist_ok=True)
        cls.server, url = taastest.slow_npy_source(data, POOL_N, POOL_DELAY, host=CL.bridge_addr)
        cls.url = url
        write_config("local")
        cls.k = taastest.Kernel(env=kernel_env(TAAS_NPY_MEMORY_LIMIT="1K", TAAS_CACHE_DIR=""), cwd=cls.cwd)
        reply, msgs = cls.k.execute(
            "slow = DataLoader(NpyDataset('%simages.npy', '%slabels.npy', transform=ToTensor()), batch_size=32, "
            "shuffle=True, num_workers=2)\nregister(slow)" % (url, url), timeout=60)
        assert reply["content"]["status"] == "ok", msgs

    @classmethod
    def tearDownClass(cls):
        cls.k.close()
        cls.server.terminate()
        cls.server.wait()

    def requests(self):
        import urllib.request
        with urllib.request.urlopen(self.url + "_stats", timeout=20) as r:
            return json.load(r)["requests"]

    def run_cell(self, backend, flags, name, epochs=2, timeout=600):
        write_config(backend)
        head = "#!t1.4\n" if backend == "slurm" else ""
        reply, msgs = self.k.execute(head + "#pragma taas --gpus 2 %s\n" % flags + TINY_FIT % (epochs, name),
                                     timeout=timeout)
        self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs) + stream_text(msgs, "stderr"))
        return msgs

    def test_1_auto_grows_over_the_loader_hosts(self):
        local = summary(stream_text(self.run_cell("local", "--cpus 1", "local")))
        for backend in ("ssh", "slurm"):
            before = self.requests()
            msgs = self.run_cell(backend, "--cpus auto:2", backend)
            # a request a sample: the remote loaders had the variable, the floor held
            self.assertGreaterEqual(self.requests() - before, 2 * POOL_N, backend)
            out = stream_text(msgs)
            self.assertRegex(out, r"\nloaders 1 → 2: the ranks waited for data \d+% of the time", out)
            self.assertEqual(sha256(os.path.join(self.cwd, "tiny-%s.safetensors" % backend)),
                             sha256(os.path.join(self.cwd, "tiny-local.safetensors")), backend)
            self.assertEqual(summary(out), local, backend)  # the same samples, with the same contents

    def test_2_a_time_budget_stops_the_job(self):
        # 400 epochs: one loader worker (2 threads, a sample a request) takes at least
        # 1536 x 0.005 / 2 = 3.8 s an epoch, so the job would last 25 minutes: the budget stops it
        for backend in ("ssh", "slurm"):
            msgs = self.run_cell(backend, "--cpus 1 --budget 20s", "budget-" + backend, epochs=400)
            err = stream_text(msgs, "stderr")
            self.assertRegex(err, r"the budget \(--budget 20s\) is used up after \d+ s, at epoch \d+ step \d+",
                             backend)
            self.assertTrue(taastest.result_text(msgs).startswith("History ("), backend)
            self.assertGreater(os.path.getsize(os.path.join(self.cwd, "tiny-budget-%s.safetensors" % backend)), 0)


class BadConfiguration(unittest.TestCase):
    """Each a clear error before anything starts: no worker on any host, no Slurm job."""

    @classmethod
    def setUpClass(cls):
        write_config("local")
        cls.k = taastest.Kernel(env=kernel_env(), cwd=WORK)
        reply, msgs = cls.k.execute(SETUP, timeout=60)
        assert reply["content"]["status"] == "ok", msgs

    @classmethod
    def tearDownClass(cls):
        cls.k.close()

    def error(self, head, ename, *parts):
        reply, msgs = self.k.execute(head + FIT, timeout=120)
        self.assertEqual(reply["content"]["status"], "error", stream_text(msgs))
        err = taastest.error_of(msgs)
        self.assertEqual(err["ename"], ename, err)
        for p in parts:
            self.assertIn(p, err["evalue"])
        self.assertFalse([h.name for h in CL.hosts if h.kind in ("cpu", "gpu") and workers_on(h.name)])
        self.assertEqual(CL.slurm("squeue", "-h").stdout.strip(), "")
        return err

    def test_unknown_backend(self):
        write_config("kubernetes")
        self.error(pragma("ssh", 640), "TaasConfigError", "kubernetes")

    def test_slurm_partition_that_does_not_exist(self):
        write_config("slurm", t14={"partition": "gpux"})
        self.error(pragma("slurm", 640), "TaasOffloadError", "Slurm has no partition 'gpux'")

    def test_gpus_the_cluster_does_not_have(self):
        """A configuration's "gres": "gpu" asks Slurm for a GPU a rank (--gpus-per-node); this
        cluster has none to give, and Slurm says so before anything starts."""
        write_config("slurm", t14={"gres": "gpu"})
        err = self.error(pragma("slurm", 640), "TaasOffloadError", "Slurm cannot run this job")
        self.assertRegex(err["evalue"].lower(), r"gres|gpu")

    def test_unreachable_host(self):
        hosts = hosts_section()
        hosts[-1]["address"] = str(CL.subnet.network_address + 99)  # of the test's own bridge; no host has it
        write_config("ssh", hosts=hosts)
        self.error(pragma("ssh", 640), "TaasOffloadError", "cannot log in to host gpu2")

    def test_a_host_that_refuses_the_login(self):
        """ssh with a key the hosts do not know: the first host's refusal is the error."""
        key = os.path.join(WORK, "stranger")
        if not os.path.exists(key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
        with open(CL.ssh_config) as f:
            text = f.read()
        config = os.path.join(WORK, "stranger_ssh_config")
        with open(config, "w") as f:
            f.write(text.replace(CL.ssh_key, key))
        write_config("ssh", ssh_config=config)
        err = self.error(pragma("ssh", 640), "TaasOffloadError", "cannot log in to host ", "with ssh:")
        self.assertIn("Permission denied", err["evalue"])
        self.assertIn("keys only", taastest.plain("\n".join(err["traceback"])))

    def test_more_gpus_than_the_cluster_has(self):
        write_config("ssh")
        self.error("#pragma taas --gpus 3 --cpus 1 --units 640\n", "TaasOffloadError",
                   "--gpus 3 asks for more ranks than the cluster's hosts have GPUs: 2")
        write_config("slurm")
        self.error("#!t1.4\n#pragma taas --gpus 3 --cpus 1 --units 640\n", "TaasOffloadError",
                   "Slurm cannot run this job")


if __name__ == "__main__":
    unittest.main()
