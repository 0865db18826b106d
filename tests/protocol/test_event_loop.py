"""A running cell is a state of the kernel's event loop, not a blocking call: control
requests and the heartbeat are served while `sleep(...)` runs, both kinds of interrupt end
the cell promptly, SIGINT when idle is harmless, and shutdown leaves no process behind.
Nothing here depends on the machine's speed: the cells sleep for HELD seconds, longer than
any test waits, so a cell that ended was interrupted, and an answer that came while it
still ran was served during the sleep."""

import os
import signal
import time
import unittest

import zmq

import taastest
from taastest import result_text


def heartbeat_rtt(url, payload=b"ping", timeout=1.0):
    """Seconds for one heartbeat echo through a fresh REQ socket, or None without one."""
    ctx = zmq.Context()
    try:
        s = ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(url)
        t0 = time.monotonic()
        s.send(payload)
        if not s.poll(int(timeout * 1000)):
            return None
        echo = s.recv()
        if echo != payload:
            raise AssertionError("heartbeat echoed %r for %r" % (echo, payload))
        return time.monotonic() - t0
    finally:
        ctx.destroy(linger=0)


# a sleep no test waits out: its end can only be the interrupt's (or shutdown's)
HELD = 600
# how long a test waits for what the kernel must do at once (generous: a loaded machine)
PROMPT = 30


def hb_url(k):
    info = k.connection_info()
    return "%s://%s:%d" % (info["transport"], info["ip"], info["hb_port"])


class WhileACellRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = taastest.Kernel()

    @classmethod
    def tearDownClass(cls):
        cls.k.close()

    def start_sleep(self, seconds):
        msg_id = self.k.send("shell", "execute_request",
                             {"code": "sleep(%s)" % seconds, "silent": False})
        # the cell has started once execute_input is out
        deadline = time.monotonic() + PROMPT
        while time.monotonic() < deadline:
            self.k.drain(0.05)
            got = self.k._pending["iopub"].get(msg_id, [])
            if any(m["msg_type"] == "execute_input" for m in got):
                return msg_id
        self.fail("sleep cell did not start")

    def still_running(self, msg_id):
        """The cell has not replied yet."""
        try:
            self.k.reply(msg_id, timeout=0.05)
        except TimeoutError:
            return True
        return False

    def assert_interrupted_then_next_runs(self, msg_id):
        reply = self.k.reply(msg_id, timeout=PROMPT)  # a HELD sleep ends only by the interrupt
        self.assertEqual(reply["content"]["status"], "error")
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        err = taastest.error_of(self.k.iopub(msg_id))
        self.assertEqual(err["ename"], "KeyboardInterrupt")
        reply, msgs = self.k.execute("40 + 2")
        self.assertEqual(reply["content"]["status"], "ok")
        self.assertEqual(result_text(msgs), "42")

    def test_control_and_heartbeat_answered_during_sleep(self):
        msg_id = self.start_sleep(HELD)
        info_id = self.k.send("control", "kernel_info_request")
        reply = self.k.reply(info_id, "control", timeout=PROMPT)
        self.assertEqual(reply["content"]["status"], "ok")
        for _ in range(3):
            rtt = heartbeat_rtt(hb_url(self.k), timeout=PROMPT)
            self.assertIsNotNone(rtt, "no heartbeat echo while a cell runs")
        self.assertTrue(self.still_running(msg_id), "answered only after the cell")
        self.k.km.interrupt_kernel()
        self.assert_interrupted_then_next_runs(msg_id)

    def test_shell_requests_wait_for_the_running_cell(self):
        msg_id = self.start_sleep(0.5)
        second = self.k.send("shell", "execute_request", {"code": "'second'", "silent": False})
        first_reply = self.k.reply(msg_id, timeout=PROMPT)
        second_reply = self.k.reply(second, timeout=PROMPT)
        self.assertEqual(first_reply["content"]["status"], "ok")
        self.assertEqual(second_reply["content"]["status"], "ok")
        self.assertEqual(second_reply["content"]["execution_count"],
                         first_reply["content"]["execution_count"] + 1)
        self.assertEqual(result_text(self.k.iopub(second)), "'second'")

    def test_is_complete_answered_during_sleep(self):
        """A console asks is_complete on every Enter: answered while a cell runs, with no
        status of its own (the kernel stays busy); other shell requests keep their order
        and, sent before the running cell's error, are aborted (stop_on_error)."""
        msg_id = self.start_sleep(HELD)
        queued = self.k.send("shell", "execute_request", {"code": "'queued'", "silent": False})
        for code, want in (("Linear(4,", "incomplete"), ("x = 1", "complete"), ("x = )", "invalid")):
            ic = self.k.send("shell", "is_complete_request", {"code": code})
            reply = self.k.reply(ic, timeout=PROMPT)
            self.assertEqual(reply["content"]["status"], want, code)
            statuses = [m for m in self.k.iopub_now(ic, 0.05) if m["msg_type"] == "status"]
            self.assertEqual(statuses, [], "a status for a request answered while the cell runs")
        self.assertTrue(self.still_running(msg_id), "answered only after the cell")
        self.assertTrue(self.still_running(queued), "a queued cell ran beside the running one")
        self.k.send("control", "interrupt_request")
        reply = self.k.reply(msg_id, timeout=PROMPT)
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assertEqual(self.k.reply(queued, timeout=PROMPT)["content"]["status"], "aborted")
        reply, msgs = self.k.execute("40 + 2")
        self.assertEqual(result_text(msgs), "42")

    def test_interrupt_by_signal_during_sleep(self):
        self.assertEqual(self.k.km.kernel_spec.interrupt_mode, "signal")
        msg_id = self.start_sleep(HELD)
        self.k.km.interrupt_kernel()
        self.assert_interrupted_then_next_runs(msg_id)

    def test_interrupt_request_on_control_during_sleep(self):
        msg_id = self.start_sleep(HELD)
        int_id = self.k.send("control", "interrupt_request")
        reply = self.k.reply(int_id, "control", timeout=PROMPT)
        self.assertEqual(reply["msg_type"], "interrupt_reply")
        self.assertEqual(reply["content"]["status"], "ok")
        self.assert_interrupted_then_next_runs(msg_id)

    def test_interrupt_when_idle_is_harmless(self):
        for how in ("sigint", "kill_group", "message"):
            with self.subTest(how=how):
                if how == "sigint":
                    os.kill(self.k.pid, signal.SIGINT)
                elif how == "kill_group":
                    self.k.km.interrupt_kernel()
                else:
                    rid = self.k.send("control", "interrupt_request")
                    self.assertEqual(self.k.reply(rid, "control")["content"]["status"], "ok")
                time.sleep(0.3)
                self.assertTrue(self.k.km.is_alive(), "SIGINT when idle killed the kernel")
                # no interrupt is left pending for the next cell
                reply, msgs = self.k.execute("sleep(0.2)\n'still here'")
                self.assertEqual(reply["content"]["status"], "ok")
                self.assertEqual(result_text(msgs), "'still here'")


class InterruptModeMessage(unittest.TestCase):
    """A kernelspec with interrupt_mode "message": jupyter_client interrupts through an
    interrupt_request on control instead of SIGINT."""

    def test_kernel_manager_interrupt_by_message(self):
        k = taastest.Kernel(kernel_name=taastest.KERNEL_NAME_MSG_INTERRUPT)
        try:
            self.assertEqual(k.km.kernel_spec.interrupt_mode, "message")
            msg_id = k.send("shell", "execute_request", {"code": "sleep(%d)" % HELD, "silent": False})
            started = []
            self.assertTrue(taastest.wait_until(lambda: started.extend(k.iopub_now(msg_id, 0.05)) or any(
                m["msg_type"] == "execute_input" for m in started), PROMPT), "the cell did not start")
            k.km.interrupt_kernel()
            reply = k.reply(msg_id, timeout=PROMPT)
            self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
            reply, msgs = k.execute("1 + 1")
            self.assertEqual(result_text(msgs), "2")
        finally:
            k.close()


class Shutdown(unittest.TestCase):
    def test_shutdown_leaves_no_process(self):
        k = taastest.Kernel()
        pid = k.pid
        self.assertIn(pid, taastest.taas_processes())
        k.execute("x = 1")
        k.close()  # KernelManager.shutdown_kernel: shutdown_request on control, then waits
        self.assertTrue(taastest.wait_until(lambda: pid not in taastest.taas_processes(), 5),
                        "taas-kernel %d still runs after shutdown" % pid)

    def test_shutdown_request_exits_cleanly(self):
        k = taastest.Kernel()
        try:
            msg_id = k.send("control", "shutdown_request", {"restart": False})
            reply = k.reply(msg_id, "control")
            self.assertEqual(reply["content"]["status"], "ok")
            self.assertIs(reply["content"]["restart"], False)
            code = k.km.provisioner.process.wait(5)
            self.assertEqual(code, 0, "the kernel exited with %s after shutdown_request" % code)
        finally:
            k.close()
        self.assertNotIn(k.pid, taastest.taas_processes())

    def test_exit_asks_the_front_end_to_end(self):
        """exit (or quit) alone, as a console user types it: the reply carries the ask_exit
        payload a console ends on; the kernel lives until the front end shuts it down."""
        k = taastest.Kernel()
        try:
            for code in ("exit", "quit()"):
                reply, msgs = k.execute(code)
                self.assertEqual(reply["content"]["status"], "ok")
                self.assertEqual(reply["content"]["payload"], [{"source": "ask_exit", "keepkernel": False}])
            reply, msgs = k.execute("40 + 2")
            self.assertEqual(result_text(msgs), "42")
        finally:
            k.close()
        self.assertNotIn(k.pid, taastest.taas_processes())

    def test_sigterm_ends_the_kernel_while_a_cell_sleeps(self):
        """SIGTERM (what a process manager sends) ends the kernel at once, a cell running or
        not; a kernel whose loop could not see it would be ended by its 10 s alarm."""
        k = taastest.Kernel()
        try:
            msg_id = k.send("shell", "execute_request", {"code": "sleep(%d)" % HELD, "silent": False})
            started = []
            self.assertTrue(taastest.wait_until(lambda: started.extend(k.iopub_now(msg_id, 0.05)) or any(
                m["msg_type"] == "execute_input" for m in started), PROMPT), "the cell did not start")
            os.kill(k.pid, signal.SIGTERM)
            code = k.km.provisioner.process.wait(PROMPT)  # not after the HELD sleep
            self.assertIn(code, (0, -signal.SIGTERM))
        finally:
            k.close()
        self.assertNotIn(k.pid, taastest.taas_processes())

    def test_shutdown_while_a_cell_sleeps(self):
        k = taastest.Kernel()
        try:
            k.send("shell", "execute_request", {"code": "sleep(%d)" % HELD, "silent": False})
            msg_id = k.send("control", "shutdown_request", {"restart": False})
            reply = k.reply(msg_id, "control", timeout=PROMPT)
            self.assertEqual(reply["content"]["status"], "ok")
            self.assertEqual(k.km.provisioner.process.wait(PROMPT), 0)  # not after the HELD sleep
        finally:
            k.close()
        self.assertNotIn(k.pid, taastest.taas_processes())


if __name__ == "__main__":
    unittest.main()
