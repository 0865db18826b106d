"""examples/fashion_mnist.ipynb in the JupyterLab application, in a real browser. Debian 12
packages no JupyterLab and there is no PyPI, but JupyterLab is a front end built from npm
packages served by a Python server application that Debian has (jupyterlab_server 2.16 on
jupyter_server 1.23): tests/browser/jupyterlab builds JupyterLab 3.6 from its packages with
its own builder (@jupyterlab/builder, webpack), as JupyterLab's examples/app does, and
lab_app.py serves it. run_lab.mjs drives it in Debian's Chromium through playwright-core:
Run All, the training display, History and Evaluation, no error; the toolbar's interrupt
button; Tab completion and the Shift+Tab tooltip. The server (127.0.0.1, a free port, a
token), its kernel and Chromium are stopped at the end, whether the test passed or not.

Under ctest (label `browser`) it needs `npm ci` and the build in tests/browser/jupyterlab
first (scripts/test.sh does both). By hand, for the screenshot in docs/ and the README
(9 epochs, as committed):

    TAAS_KERNEL=build/kernel/taas-kernel /usr/bin/python3 tests/browser/test_jupyterlab.py \\
        --full --screenshot docs/jupyterlab-screenshot.png
"""

import argparse
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from test_browser import (BUDGET, CHROMIUM, NotebookServer, drive, in_tmp, keep_screenshot,  # noqa: E402
                          missing_tools, write_notebook)

APP = os.path.join(HERE, "jupyterlab")
DRIVER = os.path.join(HERE, "run_lab.mjs")
OPTIONS = {"full": False, "screenshot": None}


def lab_missing():
    """What the JupyterLab run needs beyond the Notebook test's tools, with how to get it."""
    missing = missing_tools()
    if not os.path.isfile(os.path.join(APP, "build", "bundle.js")):
        missing.append("the JupyterLab build (in tests/browser/jupyterlab: npm ci && npx webpack, as "
                       "scripts/test.sh does)")
    if subprocess.run(["/usr/bin/python3", "-c", "import jupyterlab_server"], capture_output=True).returncode:
        missing.append("jupyterlab_server (apt-get install python3-jupyterlab-server)")
    return missing


class LabServer(NotebookServer):
    """lab_app.py (jupyterlab_server's LabServerApp) instead of `jupyter notebook`."""

    def command(self, notebook_dir):
        return ["/usr/bin/python3", os.path.join(APP, "lab_app.py"), "--no-browser", "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port=%d" % self.port, "--ServerApp.port_retries=0", "--ServerApp.token=" + self.token,
                "--ServerApp.password=", "--ServerApp.root_dir=" + notebook_dir,
                "--TaasLabApp.user_settings_dir=" + os.path.join(self.tmp, "lab-settings"),
                "--TaasLabApp.workspaces_dir=" + os.path.join(self.tmp, "lab-workspaces")]

    def url(self, path):
        return "%s/lab/tree/%s?token=%s" % (self.base, path, self.token)


class BrowserLab(unittest.TestCase):
    def test_fashion_mnist_in_jupyterlab(self):
        missing = lab_missing()
        if missing:
            self.fail("the JupyterLab test needs: " + "; ".join(missing))
        in_tmp("taas-lab-", self.run_in_lab)

    def run_in_lab(self, tmp):
        notebook_dir = os.path.join(tmp, "notebooks")
        os.makedirs(notebook_dir)
        write_notebook(notebook_dir, OPTIONS["full"])
        screenshot = os.path.join(tmp, "jupyterlab.png")
        timeout = 1200 if OPTIONS["full"] else 400  # for Run All; a loaded machine trains 10x slower
        server = LabServer(notebook_dir, tmp)
        print("JupyterLab %s (pid %d), training budget: %s"
              % (server.base, server.proc.pid, "epochs=9 (as committed)" if OPTIONS["full"] else BUDGET), flush=True)
        drive(self, server, tmp, [DRIVER, "--url", server.url("fashion_mnist.ipynb"), "--screenshot", screenshot,
                                  "--tmp", tmp, "--timeout", str(timeout), "--chromium", CHROMIUM], timeout + 300)
        keep_screenshot(self, screenshot, OPTIONS["screenshot"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    parser.add_argument("--full", action="store_true", help="train as the notebook is committed (9 epochs)")
    parser.add_argument("--screenshot", metavar="PNG", help="copy the screenshot here")
    args, rest = parser.parse_known_args()
    OPTIONS.update(full=args.full, screenshot=args.screenshot and os.path.abspath(args.screenshot))
    unittest.main(argv=[sys.argv[0]] + rest)
