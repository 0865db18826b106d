"""examples/fashion_mnist.ipynb in a real browser: the classic Jupyter Notebook server (Debian's
jupyter-notebook) with this build's kernel, driven by Debian's Chromium through playwright-core
(run_notebook.mjs). The notebook is a copy in a temporary folder whose training cell has
`epochs=9` replaced by a small budget; the driver picks the taas kernel in the Kernel menu, runs
Cell → Run All and checks the training display (bar at 100 %, the epochs' table, the chart, the
summary), that no output shows an error and that the evaluation cell shows an Evaluation. The
server (on 127.0.0.1, a free port, with a token), its kernel and Chromium are stopped at the end,
whether the test passed or not.

Under ctest (label `browser`) it needs `npm ci` in tests/browser first (scripts/test.sh runs it).
By hand, for the screenshot in docs/ (the notebook as committed, 9 epochs: 3 minutes or more on two
cores):

    TAAS_KERNEL=build/kernel/taas-kernel /usr/bin/python3 tests/browser/test_browser.py \\
        --full --screenshot docs/notebook-screenshot.png
"""

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import taastest  # noqa: E402

NOTEBOOK = os.path.join(taastest.SOURCE_DIR, "examples", "fashion_mnist.ipynb")
FASHION = "/usr/share/datasets/fashion-mnist"
CHROMIUM = "/usr/bin/chromium"
JUPYTER = "/usr/bin/jupyter"
DRIVER = os.path.join(HERE, "run_notebook.mjs")
# 250 batches of 64 in one epoch: enough for every part of the training display
BUDGET = "epochs=1, units=16000"

# Set from the command line (see the module's docstring); the ctest run uses the defaults.
OPTIONS = {"full": False, "screenshot": None, "lab_screenshot": None}


def missing_tools():
    """What this test needs and this machine lacks, each with how to install it."""
    missing = []
    if not shutil.which("node"):
        missing.append("node (apt-get install nodejs npm, or scripts/deps.sh)")
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(CHROMIUM + " (apt-get install chromium)")
    if not os.access(JUPYTER, os.X_OK) or subprocess.run(
            [JUPYTER, "notebook", "--version"], capture_output=True).returncode != 0:
        missing.append("jupyter notebook (apt-get install jupyter-notebook)")
    if not os.path.isdir(FASHION):
        missing.append(FASHION + " (apt-get install dataset-fashion-mnist)")
    with open(os.path.join(HERE, "package.json")) as f:
        wanted = json.load(f)["dependencies"]
    for name, version in sorted(wanted.items()):  # playwright-core, JupyterLab's packages, esbuild
        try:
            with open(os.path.join(HERE, "node_modules", name, "package.json")) as f:
                installed = json.load(f)["version"]
        except FileNotFoundError:
            installed = None
        if installed != version:
            missing.append("%s %s in tests/browser/node_modules (found %s: run `npm ci` in tests/browser, as "
                           "scripts/test.sh does)" % (name, version, installed or "none"))
    return missing


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """(pid, args) of the live processes whose parent is pid."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,stat=,args="], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split(None, 3)
        if len(fields) == 4 and int(fields[1]) == pid and not fields[2].startswith("Z"):
            found.append((int(fields[0]), fields[3]))
    return found


def processes_using(marker):
    """PIDs of live processes whose command line contains marker (a path only this test made)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and taastest.pid_alive(int(entry)):
            pids.append(int(entry))
    return pids


def stop_process(proc, timeout=20):
    """SIGTERM, then SIGKILL to the process group of proc (started with start_new_session)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass


def write_notebook(notebook_dir, full):
    """The example into notebook_dir, its training cell's epochs=9 replaced by BUDGET unless
    full."""
    with open(NOTEBOOK) as f:
        nb = json.load(f)
    if not full:
        train = [c for c in nb["cells"] if c.get("id") == "train"]
        if len(train) != 1 or "epochs=9" not in "".join(train[0]["source"]):
            raise AssertionError("the example has no cell with id 'train' that says epochs=9")
        train[0]["source"] = "".join(train[0]["source"]).replace("epochs=9", BUDGET)
    with open(os.path.join(notebook_dir, "fashion_mnist.ipynb"), "w") as f:
        json.dump(nb, f, indent=1)


class NotebookServer:
    """`jupyter notebook` on 127.0.0.1 with a token, serving notebook_dir, with the test's
    kernelspec first on JUPYTER_PATH and its own config, data and runtime folders."""

    def __init__(self, notebook_dir, tmp):
        spec = os.path.join(taastest.install_test_kernelspec(), "kernels", taastest.KERNEL_NAME)
        # the logos an installed kernelspec has: Notebook shows one beside the kernel's name
        share = os.path.join(taastest.SOURCE_DIR, "share", "jupyter", "kernels", "taas")
        for name in os.listdir(share):
            if name.startswith("logo-"):
                shutil.copy(os.path.join(share, name), spec)
        self.token = secrets.token_hex(24)
        self.port = free_port()
        env = dict(os.environ)
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
            env[name] = os.path.join(tmp, name.lower())
        self.log_path = os.path.join(tmp, "notebook-server.log")
        self.log = open(self.log_path, "wb")
        self.tmp = tmp
        argv = self.command(notebook_dir)
        if os.geteuid() == 0:
            argv.append("--allow-root")  # scripts/test.sh runs as root
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.base = "http://127.0.0.1:%d" % self.port
        try:
            self._wait_ready()
        except Exception:
            self.stop()
            raise

    def command(self, notebook_dir):
        return [JUPYTER, "notebook", "--no-browser", "--ip=127.0.0.1", "--port=%d" % self.port, "--port-retries=0",
                "--NotebookApp.token=" + self.token, "--NotebookApp.password=", "--notebook-dir=" + notebook_dir]

    def _wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the notebook server exited (%d):\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                with urllib.request.urlopen("%s/api/status?token=%s" % (self.base, self.token), timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the notebook server did not answer within %d s:\n%s" % (timeout, self.log_tail()))

    def url(self, path):
        return "%s/notebooks/%s?token=%s" % (self.base, path, self.token)

    def kernels(self):
        """(pid, args) of the kernels the server runs."""
        return [(pid, args) for pid, args in children(self.proc.pid) if "-f" in args.split()]

    def log_tail(self, lines=40):
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])

    def stop(self):
        """Stops the server (SIGTERM: it shuts its kernels down); returns the PIDs of its kernels
        and their workers that are still alive afterwards (killed here)."""
        procs = [pid for pid, _ in self.kernels()]
        for pid in list(procs):
            procs += [w for w, _ in children(pid)]
        stop_process(self.proc, timeout=30)
        self.log.close()
        left = [pid for pid in procs if not taastest.wait_until(lambda: not taastest.pid_alive(pid), 10)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return left


def in_tmp(prefix, run):
    """run(tmp) in a new temporary folder, removed when it passes and kept (and named) when
    it fails, for a look at the screenshots and the server's log."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    keep = True
    try:
        run(tmp)
        keep = False
    finally:
        if keep:
            print("kept for a look: %s (screenshots, the server's log)" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def drive(test, server, tmp, argv, wait):
    """node argv (a driver of tests/browser) against server, at most wait seconds; then the
    driver, the server (its kernels, their workers) and Chromium are stopped, pass or fail.
    The driver must pass, on this build's kernel, with nothing left behind."""
    driver = None
    try:
        driver = subprocess.Popen(["node"] + argv, stdin=subprocess.DEVNULL, cwd=HERE,
                                  start_new_session=True)  # its lines go to our output
        try:
            driver.wait(wait)
        except subprocess.TimeoutExpired:
            print("the driver did not finish within %d s" % wait, flush=True)
        kernels = server.kernels()
    finally:
        if driver is not None:
            stop_process(driver, timeout=10)
        left = server.stop()
        # the driver makes Chromium's profile there: a process naming it is this test's browser
        chromium_left = processes_using(os.path.join(tmp, "chromium-profile-"))
        for pid in chromium_left:
            os.kill(pid, signal.SIGKILL)
    test.assertEqual(driver.returncode, 0, "the browser checks failed (output above); server log:\n"
                     + server.log_tail())
    test.assertEqual([args.split()[0] for _, args in kernels], [taastest.kernel_binary()],
                     "the notebook ran on one kernel, this build's taas-kernel")
    print("ok   the notebook ran on %s" % taastest.kernel_binary())
    test.assertEqual(left, [], "kernel or worker processes outlived the server")
    test.assertEqual(chromium_left, [], "Chromium processes outlived the driver")
    print("ok   the server, its kernel and Chromium stopped")


def keep_screenshot(test, shot, copy):
    with open(shot, "rb") as f:
        test.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG")
    if copy:
        shutil.copyfile(shot, copy)
        print("screenshot copied to %s" % copy)


class BrowserNotebook(unittest.TestCase):
    def test_fashion_mnist_in_notebook(self):
        missing = missing_tools()
        if missing:
            self.fail("the browser test needs: " + "; ".join(missing))
        in_tmp("taas-browser-", self.run_in_browser)

    def run_in_browser(self, tmp):
        notebook_dir = os.path.join(tmp, "notebooks")
        os.makedirs(notebook_dir)
        write_notebook(notebook_dir, OPTIONS["full"])
        screenshot = os.path.join(tmp, "notebook.png")
        lab_screenshot = os.path.join(tmp, "jupyterlab.png")
        timeout = 1200 if OPTIONS["full"] else 400  # for Run All; a loaded machine trains 10x slower
        server = NotebookServer(notebook_dir, tmp)
        print("notebook server %s (pid %d), training budget: %s"
              % (server.base, server.proc.pid, "epochs=9 (as committed)" if OPTIONS["full"] else BUDGET), flush=True)
        drive(self, server, tmp, [DRIVER, "--url", server.url("fashion_mnist.ipynb"), "--screenshot", screenshot,
                                  "--lab-screenshot", lab_screenshot, "--tmp", tmp, "--timeout", str(timeout),
                                  "--chromium", CHROMIUM], timeout + 120)
        keep_screenshot(self, screenshot, OPTIONS["screenshot"])
        keep_screenshot(self, lab_screenshot, OPTIONS["lab_screenshot"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    parser.add_argument("--full", action="store_true", help="train as the notebook is committed (9 epochs)")
    parser.add_argument("--screenshot", metavar="PNG", help="copy the full-page screenshot here")
    parser.add_argument("--lab-screenshot", metavar="PNG", help="copy the JupyterLab output area's screenshot here")
    args, rest = parser.parse_known_args()
    OPTIONS.update(full=args.full, screenshot=args.screenshot and os.path.abspath(args.screenshot),
                   lab_screenshot=args.lab_screenshot and os.path.abspath(args.lab_screenshot))
    unittest.main(argv=[sys.argv[0]] + rest)
