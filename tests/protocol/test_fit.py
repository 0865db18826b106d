"""fit(), evaluate(), save() and load() through a real kernel: a small MLP on Debian's
Fashion-MNIST with a units limit trains and shows its history, evaluates well above chance,
saves a safetensors file that loads into a fresh model; the stop button ends a fit within
about 1.5 s with no taas-worker left; a nan loss names its step; fit() inside an expression
and save() of an untrained model are rejected with their messages."""

import os
import re
import struct
import tempfile
import time
import unittest

import taastest
from taastest import error_of, traceback_text

FASHION = "/usr/share/datasets/fashion-mnist"

SETUP = """\
net = Sequential(Flatten(), Linear(784, 64), ReLU(), Linear(64, 10), LogSoftmax(dim=1))
train = DataLoader(FashionMNIST(root='%s', train=True, transform=ToTensor()), batch_size=64, shuffle=True)
test = DataLoader(FashionMNIST(root='%s', train=False, transform=ToTensor()), batch_size=256)
""" % (FASHION, FASHION)


def worker_binary():
    return os.path.join(os.path.dirname(taastest.kernel_binary()), "taas-worker")


def worker_pids():
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and args and args[0].decode(errors="replace") == worker_binary():
            pids.append(int(d))
    return pids


def displays(msgs):
    return [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"]


def stdout_of(msgs):
    return "".join(m["content"]["text"] for m in msgs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class FitInTheNotebook(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="taas-fit-")
        cls.k = taastest.Kernel(cwd=cls.tmp.name)
        cls.ok(cls, SETUP)

    @classmethod
    def tearDownClass(cls):
        cls.k.close()
        cls.tmp.cleanup()

    def ok(self, code, timeout=30):
        reply, msgs = self.k.execute(code, timeout=timeout)
        if reply["content"]["status"] != "ok":
            raise AssertionError("%s failed: %s" % (code, traceback_text(error_of(msgs))))
        return msgs

    def fails(self, code, timeout=30):
        reply, msgs = self.k.execute(code, timeout=timeout)
        self.assertEqual(reply["content"]["status"], "error", code)
        return error_of(msgs)

    def evaluation(self, msgs):
        shown = displays(msgs)
        self.assertEqual(len(shown), 1, msgs)
        m = re.search(r"loss ([0-9.]+)\s+accuracy ([0-9.]+)", shown[0]["text/plain"])
        self.assertIsNotNone(m, shown[0]["text/plain"])
        return float(m.group(1)), float(m.group(2))

    def test_1_fit_evaluate_save_load(self):
        msgs = self.ok("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=4000, seed=1)")
        self.assertRegex(stdout_of(msgs), r"epoch 1/1: train loss [0-9.]+, [0-9.]+ s, [0-9,]+ samples/s")
        history = displays(msgs)
        self.assertEqual(len(history), 1)
        self.assertIn("train loss", history[0]["text/plain"])
        self.assertIn("samples/s", history[0]["text/plain"])
        self.assertIn("<table>", history[0]["text/html"])

        loss, acc = self.evaluation(self.ok("evaluate(net, test, units=2000)"))
        self.assertGreater(acc, 0.55)

        self.ok("save(net, 'mlp.safetensors')")
        with open(os.path.join(self.tmp.name, "mlp.safetensors"), "rb") as f:
            n, = struct.unpack("<Q", f.read(8))
            self.assertTrue(f.read(n).startswith(b"{"))

        self.ok("fresh = Sequential(Flatten(), Linear(784, 64), ReLU(), Linear(64, 10), LogSoftmax(dim=1))\n"
                "load('mlp.safetensors', into=fresh)")
        loss2, acc2 = self.evaluation(self.ok("evaluate(fresh, test, units=2000)"))
        self.assertAlmostEqual(acc2, acc, places=4)

    def test_2_untrained_model(self):
        self.ok("other = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))")
        for code in ("save(other, 'x.safetensors')", "evaluate(other, test)"):
            e = self.fails(code)
            self.assertEqual(e["ename"], "TaasValueError")
            self.assertIn("other has no trained weights yet: fit it first, or load weights", e["evalue"])

    def test_3_load_not_safetensors(self):
        with open(os.path.join(self.tmp.name, "junk.bin"), "wb") as f:
            f.write(b"\x05\x00\x00\x00\x00\x00\x00\x00hello")
        e = self.fails("load('junk.bin', into=net)")
        self.assertEqual(e["ename"], "TaasValueError")
        self.assertIn("junk.bin is not a safetensors file: its header is not a JSON object", e["evalue"])
        e = self.fails("load('missing.safetensors', into=net)")
        self.assertEqual(e["ename"], "FileNotFoundError")

    def test_4_fit_must_be_a_statement(self):
        e = self.fails("print(fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1)))")
        self.assertIn("must be a whole statement", e["evalue"])
        e = self.fails("fit(Linear(3, 4), train, loss=NLLLoss(), optimizer=SGD(lr=0.1))")
        self.assertEqual(e["ename"], "TaasTypeError")
        self.assertIn("a Sequential, not Linear", e["evalue"])

    def test_5_nan_loss_names_the_step(self):
        e = self.fails("bad = Sequential(Flatten(), Linear(784, 64), ReLU(), Linear(64, 10), LogSoftmax(dim=1))\n"
                       "fit(bad, train, loss=NLLLoss(), optimizer=SGD(lr=1e30), units=4000)")
        self.assertEqual(e["ename"], "TaasValueError")
        self.assertRegex(e["evalue"], r"the loss is (nan|inf) at epoch 1 step \d+")

    def test_6_interrupt(self):
        self.ok("stopped = Sequential(Flatten(), Linear(784, 64), ReLU(), Linear(64, 10), LogSoftmax(dim=1))")
        msg_id = self.k.send("shell", "execute_request",
                             {"code": "fit(stopped, train, epochs=50, loss=NLLLoss(), optimizer=SGD(lr=0.01))",
                              "silent": False, "store_history": True, "user_expressions": {},
                              "allow_stdin": False, "stop_on_error": True})
        self.assertTrue(taastest.wait_until(lambda: worker_pids(), 10))
        time.sleep(1.0)  # past the start: it is training
        t0 = time.monotonic()
        self.k.request("control", "interrupt_request")
        reply = self.k.reply(msg_id, timeout=10)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual(reply["content"]["status"], "error")
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assertTrue(taastest.wait_until(lambda: not worker_pids(), 2))
        msgs = self.k.iopub(msg_id)
        self.assertRegex(stdout_of(msgs), r"epoch 1/50 step \d+/938 loss [0-9.]+ [0-9,]+ samples/s\n")
        # the model keeps the weights of its last completed step
        self.ok("save(stopped, 'after_stop.safetensors')")
        self.assertGreater(os.path.getsize(os.path.join(self.tmp.name, "after_stop.safetensors")), 200000)


if __name__ == "__main__":
    unittest.main()
