"""Values that are too large, too widely shared, or that memory cannot hold, seen from a
Jupyter client: v1 = [v0, v0] up to v40 (2^40 items as a tree, 41 values in memory) is
checked, shown and measured in bounded work; a walk past its budget ends its cell with a
TaasValueError; an allocation that fails under an address-space limit ends its cell with a
TaasMemoryError; each time the kernel lives on and runs the next cell. Every cell is bounded
by its reply (the test's event), never by a timing guess."""

import json
import os
import shutil
import signal
import tempfile
import unittest

import taastest
from taastest import error_of, result_text, stream_text

CUT_NOTE = "... (repr cut at 1 MiB; the value is bigger)"
REPLY_S = 120  # a cell that does not end by then hangs: before the walks were bounded, it never did


def dag_cells(name, levels):
    cells = ["%s0 = [1]" % name]
    cells += ["%s%d = [%s%d, %s%d]" % (name, i, name, i - 1, name, i - 1) for i in range(1, levels + 1)]
    return cells


class SharedValues(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="taas-limits-")
        env = dict(os.environ, TAAS_CONFIG=os.path.join(cls.tmp.name, "no-config.json"))
        cls.k = taastest.Kernel(cwd=cls.tmp.name, env=env)
        for cell in dag_cells("v", 40) + dag_cells("w", 40):
            reply, _ = cls.k.execute(cell)
            assert reply["content"]["status"] == "ok", cell

    @classmethod
    def tearDownClass(cls):
        cls.k.close()
        cls.tmp.cleanup()

    def run_cell(self, code):
        return self.k.execute(code, timeout=REPLY_S)

    def test_len(self):
        self.assertEqual(result_text(self.run_cell("len(v40)")[1]), "2")
        self.assertEqual(result_text(self.run_cell("len(v40 + w40)")[1]), "4")

    def test_print_and_result(self):
        text = stream_text(self.run_cell("print(v40)")[1])
        self.assertTrue(text.startswith("[[[[") and text.endswith(CUT_NOTE + "\n"), text[-200:])
        self.assertTrue(result_text(self.run_cell("w40")[1]).endswith(CUT_NOTE))

    def test_builtins_that_take_lists(self):
        err = error_of(self.run_cell("Compose(v40)")[1])
        self.assertEqual(err["ename"], "TaasTypeError")
        self.assertIn("must be a list of transforms", err["evalue"])
        err = error_of(self.run_cell("len([v40, w40, 1e400])")[1])
        self.assertEqual(err["ename"], "TaasValueError")
        self.assertIn("must be a finite number", err["evalue"])
        self.assertEqual(result_text(self.run_cell("len(v3)")[1]), "2")


class WalkBudget(unittest.TestCase):
    """A kernel with a small walk budget (TAAS_WALK_STEPS): a check past it is a TaasValueError
    that says why and what to do; the next cell runs."""

    def test_budget(self):
        tmp = tempfile.TemporaryDirectory(prefix="taas-walk-")
        env = dict(os.environ, TAAS_CONFIG=os.path.join(tmp.name, "no-config.json"), TAAS_WALK_STEPS="1000")
        k = taastest.Kernel(cwd=tmp.name, env=env)
        try:
            self.assertEqual(k.execute("a = [0.5] * 5000")[0]["content"]["status"], "ok")
            err = error_of(k.execute("len(a)", timeout=REPLY_S)[1])
            self.assertEqual(err["ename"], "TaasValueError")
            self.assertEqual(err["evalue"], "checking len() argument 'obj' takes more than 1000 steps: "
                                            "the value is too large or too widely shared")
            self.assertIn("hint: build a smaller value", "\n".join(err["traceback"]))
            self.assertEqual(result_text(k.execute("len([1, 2])")[1]), "2")
        finally:
            k.close()
            tmp.cleanup()


class InterruptingAWalk(unittest.TestCase):
    """The stop button (SIGINT) and SIGTERM reach a walk over values: a cell of many checks
    of a list of a million items (each a walk of a million steps, the cell minutes of them)
    ends with KeyboardInterrupt named after the walk, and the kernel runs the next cell; a
    SIGTERM ends the kernel as it should (exit 0), not by its grace alarm."""

    CELL = "b = 1\n" + "len(a)\n" * 100000 + "b = 2"
    kernel_name = taastest.KERNEL_NAME

    def interrupt(self, k):
        k.km.interrupt_kernel()

    def start(self):
        tmp = tempfile.TemporaryDirectory(prefix="taas-intr-")
        self.addCleanup(tmp.cleanup)
        env = dict(os.environ, TAAS_CONFIG=os.path.join(tmp.name, "no-config.json"))
        k = taastest.Kernel(kernel_name=self.kernel_name, cwd=tmp.name, env=env)
        self.addCleanup(k.close)
        self.assertEqual(k.execute("a = [0.5] * 1048576")[0]["content"]["status"], "ok")
        msg_id = k.send("shell", "execute_request", taastest.execute_content(self.CELL))
        # the cell has started once its execute_input is out: the signal finds it running
        started = taastest.wait_until(
            lambda: any(m["msg_type"] == "execute_input" for m in k.iopub_now(msg_id, 0.05)), REPLY_S)
        self.assertTrue(started, "the cell never started")
        return k, msg_id

    def test_stop_button(self):
        k, msg_id = self.start()
        self.interrupt(k)
        reply = k.reply(msg_id, timeout=REPLY_S)
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assertEqual(reply["content"]["evalue"], "interrupted while checking len() argument 'obj'")
        self.assertEqual(result_text(k.execute("b")[1]), "1")
        self.assertEqual(result_text(k.execute("len(a)", timeout=REPLY_S)[1]), "1048576")

    def test_sigterm(self):
        k, msg_id = self.start()
        proc = k.km.provisioner.process
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(REPLY_S), 0)  # an orderly shutdown, not the alarm's SIGALRM


class InterruptingAWalkByMessage(InterruptingAWalk):
    """The same with interrupt_mode "message": the interrupt_request is answered, and obeyed,
    while the walk runs."""

    kernel_name = taastest.KERNEL_NAME_MSG_INTERRUPT

    def interrupt(self, k):
        reply = k.reply(k.send("control", "interrupt_request"), "control", REPLY_S)
        self.assertEqual(reply["content"]["status"], "ok")


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError("no %s in /proc/%d/status" % (field, pid))


BIG = "a = 'x' * 67108863"  # 64 MiB less one byte: the largest str a cell may make
MANY = "l = [%s]" % ", ".join("a + '%d'" % i for i in range(120))  # 120 of them: 7.5 GiB


class AddressSpaceLimit(unittest.TestCase):
    """The issue's cells under an address-space limit (prlimit --as): the strings fail to
    allocate, which is the cell's TaasMemoryError, not an abort. The limit is what a kernel
    here needs after the first cell (measured) and 1 GiB more, so that on any machine the
    list fails part way; the session's budget for values (TAAS_VALUE_MEMORY) is set far above
    it, so that the allocation itself fails, not the budget's check."""

    def test_allocation_failure(self):
        tmp = tempfile.TemporaryDirectory(prefix="taas-as-")
        env = dict(os.environ, TAAS_CONFIG=os.path.join(tmp.name, "no-config.json"),
                   TAAS_VALUE_MEMORY=str(1 << 50))
        k = taastest.Kernel(cwd=tmp.name, env=env)
        try:
            self.assertEqual(k.execute(BIG)[0]["content"]["status"], "ok")
            need = vm_kib(k.pid, "VmPeak") * 1024
        finally:
            k.close()
        limit = need + (1 << 30)
        root = taastest.install_test_kernelspec()
        spec_dir = os.path.join(root, "kernels", "taas-as-limit")
        os.makedirs(spec_dir, exist_ok=True)
        with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
            json.dump({"argv": [shutil.which("prlimit"), "--as=%d" % limit, taastest.kernel_binary(),
                                "-f", "{connection_file}"],
                       "display_name": "taas", "language": "taas", "interrupt_mode": "signal"}, f)
        # a sanitizer build's allocator gives NULL too, as the C library's does, rather than end the process
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "allocator_may_return_null=1"]))
        k = taastest.Kernel(kernel_name="taas-as-limit", cwd=tmp.name, env=env)
        try:
            self.assertEqual(vm_kib(k.pid, "VmSize") * 1024 < limit, True)  # prlimit ran the kernel itself
            self.assertEqual(k.execute(BIG)[0]["content"]["status"], "ok")
            err = error_of(k.execute(MANY, timeout=REPLY_S)[1])
            self.assertEqual(err["ename"], "TaasMemoryError")
            self.assertTrue(err["evalue"].startswith("out of memory while making a str"), err["evalue"])
            self.assertIn("hint: ", "\n".join(err["traceback"]))
            self.assertEqual(result_text(k.execute("len(a + '0')", timeout=REPLY_S)[1]), "67108864")
            self.assertTrue(taastest.pid_alive(k.pid))
        finally:
            k.close()
            tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
