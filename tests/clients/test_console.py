"""jupyter console (Debian's 6.4.4) against taas, typed into a real terminal: tmux on a
private server, keys sent as a user types them, the screen read back. A cell, a cell
completed over two lines by the kernel's is_complete, Tab completion, is_complete while
the kernel is busy (the console keeps asking the kernel, so `exit` still ends it), and
exit, quit and Ctrl-D ending the console and its kernel with no process left. Every wait is
for text the console must show, bounded by PROMPT; nothing guesses how long work takes."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from jupyter_client import BlockingKernelClient

import taastest

PROMPT = 60   # how long a test waits for what the console or kernel must do (a loaded machine)
HELD = 600    # a sleep no test waits out
CONT = r"^ +\.\.\.: "            # the console's continuation prompt
TMUX = shutil.which("tmux")
CONSOLE = shutil.which("jupyter-console") or "/usr/bin/jupyter-console"


@unittest.skipUnless(TMUX and os.access(CONSOLE, os.X_OK),
                     "tmux and jupyter-console are installed by scripts/deps.sh")
class Console(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.runtime = tempfile.mkdtemp(prefix="taas-console-")
        self.sock = "taas-test-%d-%s" % (os.getpid(), self._testMethodName)
        taastest.install_test_kernelspec()
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=self.runtime, TERM="xterm-256color")
        cmd = [TMUX, "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-s", "c", "-x", "150",
               "-y", "50", CONSOLE, "--kernel", taastest.KERNEL_NAME]
        subprocess.run(cmd, env=env, check=True)
        self.wait_for(r"In \[1\]: ")
        files = glob.glob(os.path.join(self.runtime, "kernel-*.json"))
        self.assertEqual(len(files), 1, files)
        self.connection = files[0]
        self.kernel_pid = self.pid_of(self.connection)
        self.assertIsNotNone(self.kernel_pid, "no taas-kernel runs with %s" % self.connection)

    def tearDown(self):
        subprocess.run([TMUX, "-L", self.sock, "kill-server"], capture_output=True)
        if self.kernel_pid and self.kernel_pid in taastest.taas_processes():
            os.kill(self.kernel_pid, 9)
        shutil.rmtree(self.runtime, ignore_errors=True)

    @staticmethod
    def pid_of(connection):
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            if "taas-kernel" in args and connection in args:
                return int(pid)
        return None

    def screen(self):
        r = subprocess.run([TMUX, "-L", self.sock, "capture-pane", "-p", "-J", "-S", "-300", "-t", "c"],
                           capture_output=True, text=True)
        return r.stdout.rstrip("\n") if r.returncode == 0 else ""  # not the blank rows below

    def alive(self):
        return subprocess.run([TMUX, "-L", self.sock, "has-session", "-t", "c"], capture_output=True).returncode == 0

    def count(self, pattern):
        return len(re.findall(pattern, self.screen(), re.M))

    def wait_for(self, pattern, seen=0):
        """Once pattern shows more than `seen` times on the screen (its rows are redrawn,
        so what is new is counted, not found by position): the screen's text."""
        found = taastest.wait_until(lambda: self.count(pattern) > seen, PROMPT, 0.05)
        self.assertTrue(found, "%r never showed; the screen:\n%s" % (pattern, self.screen()))
        return self.screen()

    def type(self, text, *keys):
        if text:
            subprocess.run([TMUX, "-L", self.sock, "send-keys", "-t", "c", "-l", text], check=True)
        for k in keys:
            subprocess.run([TMUX, "-L", self.sock, "send-keys", "-t", "c", k], check=True)

    def cell(self, text, pattern):
        seen = self.count(pattern)
        self.type(text, "Enter")
        return self.wait_for(pattern, seen)

    def assert_console_and_kernel_end(self):
        self.assertTrue(taastest.wait_until(lambda: not self.alive(), PROMPT), self.screen())
        self.assertTrue(taastest.wait_until(lambda: self.kernel_pid not in taastest.taas_processes(), PROMPT),
                        "taas-kernel %d outlived its console" % self.kernel_pid)
        self.kernel_pid = None

    def test_1_cells_completion_and_exit_while_busy_elsewhere(self):
        self.cell("1 + 2", r"Out\[1\]: 3")
        # is_complete: the console waits for the rest of an open call
        seen = self.count(CONT)
        self.type("Linear(4,", "Enter")
        self.wait_for(CONT, seen)
        self.cell("2)", r"Out\[2\]: Linear\(in_features=4, out_features=2")
        # Tab lists the kernel's completions
        self.type("Ada", "Tab")
        text = self.wait_for(r"AdamW")
        for name in ("Adadelta", "Adam ", "AdamW"):
            self.assertIn(name, text)
        self.type("", "BSpace", "BSpace", "BSpace")
        # another client keeps the kernel busy: the console's is_complete is answered anyway
        kc = BlockingKernelClient(connection_file=self.connection)
        kc.load_connection_file()
        kc.start_channels()
        try:
            held = kc.execute("sleep(%d)" % HELD)
            self.assertTrue(taastest.wait_until(lambda: self.busy_with(kc, held), PROMPT), "the sleep never started")
            seen = self.count(CONT)
            self.type("Linear(4,", "Enter")
            self.wait_for(CONT, seen)
            self.type("", "C-c")  # drops the unfinished input at the prompt
            self.assertTrue(taastest.wait_until(lambda: self.count(CONT) == seen, PROMPT), self.screen())
            self.assertNotIn("did not respond", self.screen())
            kc.control_channel.send(kc.session.msg("interrupt_request", {}))
            reply = kc.get_shell_msg(timeout=PROMPT)
            while reply["parent_header"].get("msg_id") != held:
                reply = kc.get_shell_msg(timeout=PROMPT)
            self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        finally:
            kc.stop_channels()
        # exit is still a complete line (the console still asks the kernel), and ends both
        self.type("exit", "Enter")
        self.assert_console_and_kernel_end()
        self.assertNotIn("did not respond", self.screen())

    @staticmethod
    def busy_with(kc, msg_id):
        """The execute_input of msg_id came: the cell runs."""
        while kc.iopub_channel.msg_ready():
            m = kc.get_iopub_msg(timeout=1)
            if m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == msg_id:
                return True
        return False

    def test_2_quit_ends_console_and_kernel(self):
        self.type("quit", "Enter")
        self.assert_console_and_kernel_end()

    def test_3_ctrl_d_ends_console_and_kernel(self):
        self.type("", "C-d")
        self.wait_for(r"Do you really want to exit")
        self.type("y", "Enter")
        self.assert_console_and_kernel_end()


if __name__ == "__main__":
    unittest.main()
