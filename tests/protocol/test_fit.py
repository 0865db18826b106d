"""fit(), evaluate(), save() and load() through a real kernel: a small MLP on Debian's
Fashion-MNIST with a units limit trains and returns its History, evaluates well above
chance, saves a safetensors file that loads into a fresh model; shape errors and too few
outputs for the classes are found before any job is launched; load() checks the file's
tensors against the model; the stop button ends a fit within about 1.5 s with no
taas-worker left; a nan loss names its step; fit() inside an expression and save() of an
untrained model are rejected with their messages."""

import glob
import os
import re
import struct
import tempfile
import unittest

import taastest
from taastest import only, result_text

FASHION = "/usr/share/datasets/fashion-mnist"
MLP = "Sequential(Flatten(), Linear(784, 64), ReLU(), Linear(64, 10), LogSoftmax(dim=1))"

SETUP = """\
net = %s
train = DataLoader(FashionMNIST(root='%s', train=True, transform=ToTensor()), batch_size=64, shuffle=True)
test = DataLoader(FashionMNIST(root='%s', train=False, transform=ToTensor()), batch_size=256)
""" % (MLP, FASHION, FASHION)


def stdout_of(msgs):
    return taastest.stream_text(msgs, "stdout")


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class FitInTheNotebook(taastest.KernelCase):
    tmp_prefix = "taas-fit-"
    kernel_env = staticmethod(taastest.job_tmp)
    setup_code = SETUP

    def job_folders(self):
        return glob.glob(os.path.join(self.tmp.name, "tmp", "taas-job-*"))

    def evaluation(self, code):
        text = self.result(code)["text/plain"]
        m = re.fullmatch(r"Evaluation\(loss=([0-9.]+), accuracy=([0-9.]+), samples=(\d+)\)", text)
        self.assertIsNotNone(m, text)
        return float(m.group(1)), float(m.group(2)), int(m.group(3))

    def test_1_fit_evaluate_save_load(self):
        msgs = self.ok("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=4000, seed=1)")
        # one display, updated in place: the bar at 100 %, the epoch's row, the summary
        shown = only(msgs, "display_data")
        self.assertEqual(len(shown), 1)
        self.assertTrue(all(u["content"]["transient"]["display_id"] == shown[0]["content"]["transient"]["display_id"]
                            for u in only(msgs, "update_display_data")))
        view = taastest.last_display(msgs)
        self.assertRegex(view["text/plain"], r"^█{24} 100%  epoch 1/1 done  [0-9,]+ samples/s  [0-9.]+ s\n"
                                             r"epoch  train loss  val loss  val accuracy")
        self.assertRegex(view["text/plain"], r"\ndone after [0-9.]+ s: 1 epoch, 63 steps, [0-9,]+ samples/s while training; the "
                                             r"trained weights are in net$")
        self.assertIn('data-state="done"', view["text/html"])
        self.assertIn('<progress class="taas-progress" value="63" max="63"', view["text/html"])
        self.assertRegex(taastest.chart_svg(view["text/html"]) or "", r'<path class="taas-train-loss" d="M[0-9.]+ [0-9.]+"')
        self.assertEqual(stdout_of(msgs), "")
        # fit() returns the History: the cell's result, a table
        res = only(msgs, "execute_result")
        self.assertEqual(len(res), 1, msgs)
        data = res[0]["content"]["data"]
        self.assertRegex(data["text/plain"], r"^History \(1 epoch\)\nepoch  train loss  val loss  val accuracy")
        self.assertRegex(data["text/plain"], r"\n    1      [0-9.]+         -             -")
        self.assertIn("<th>train loss</th>", data["text/html"])

        loss, acc, n = self.evaluation("evaluate(net, test, units=2000)")
        self.assertEqual(n, 2000)
        self.assertGreater(acc, 0.55)

        self.ok("save(net, 'mlp.safetensors')")
        with open(os.path.join(self.tmp.name, "mlp.safetensors"), "rb") as f:
            n, = struct.unpack("<Q", f.read(8))
            self.assertTrue(f.read(n).startswith(b"{"))

        self.ok("fresh = %s\nload('mlp.safetensors', into=fresh)" % MLP)
        loss2, acc2, _ = self.evaluation("evaluate(fresh, test, units=2000)")
        self.assertAlmostEqual(acc2, acc, places=4)

    def test_2_history_is_a_value(self):
        # two epochs over the 10,000 test images; units limits the samples of all epochs together
        msgs = self.ok("small = DataLoader(FashionMNIST(root='%s', train=False, transform=ToTensor()), batch_size=100, "
                       "shuffle=True)\nh = fit(net, small, epochs=2, loss=NLLLoss(), optimizer=SGD(lr=0.05), "
                       "validate=test)\nr = evaluate(net, test, units=512)" % FASHION, timeout=60)
        self.assertEqual(only(msgs, "execute_result"), [])
        text = result_text(self.ok("h"))
        rows = text.splitlines()
        self.assertEqual(rows[0], "History (2 epochs)")
        self.assertEqual(len(rows), 4, text)
        self.assertRegex(rows[3], r"^    2      [0-9.]+    [0-9.]+        0\.[0-9]{4}  +[0-9.]+ s  +[0-9,]+$")
        self.assertRegex(result_text(self.ok("print(r)\nr")), r"^Evaluation\(loss=[0-9.]+, accuracy=[0-9.]+, "
                                                              r"samples=512\)$")

    def test_3_untrained_model(self):
        self.ok("other = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))")
        for code in ("save(other, 'x.safetensors')", "evaluate(other, test)"):
            e = self.error(code, "TaasValueError")
            self.assertIn("other has no trained weights yet: fit it first, or load weights", e["evalue"])

    def test_4_load_checks_the_file(self):
        with open(os.path.join(self.tmp.name, "junk.bin"), "wb") as f:
            f.write(b"\x05\x00\x00\x00\x00\x00\x00\x00hello")
        e = self.error("load('junk.bin', into=net)", "TaasDataError")
        self.assertIn("junk.bin is not a safetensors file: the header does not start with '{'", e["evalue"])
        e = self.error("load('missing.safetensors', into=net)", "TaasIOError")
        self.assertIn("cannot open missing.safetensors", e["evalue"])
        # a FIFO would block a reader for ever: refused at once, nothing waits on it
        os.mkfifo(os.path.join(self.tmp.name, "pipe.safetensors"))
        e = self.error("load('pipe.safetensors', into=net)", "TaasIOError")
        self.assertIn("pipe.safetensors is not a regular file (a FIFO)", e["evalue"])
        e = self.error("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), resume='pipe.safetensors')",
                       "TaasIOError")
        self.assertIn("pipe.safetensors is not a regular file (a FIFO)", e["evalue"])
        e = self.error("load('.', into=net)", "TaasIOError")
        self.assertIn("is not a regular file (a folder)", e["evalue"])
        self.ok("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=640)\nsave(net, 'net.safetensors')")
        e = self.error("narrow = Sequential(Flatten(), Linear(784, 32), ReLU(), Linear(32, 10), LogSoftmax(dim=1))\n"
                       "load('net.safetensors', into=narrow)", "TaasValueError")
        self.assertIn("net.safetensors: 1.weight has shape [64, 784], the model expects [32, 784]", e["evalue"])
        e = self.error("deeper = Sequential(Flatten(), Linear(784, 64), ReLU(), Linear(64, 10), ReLU(), "
                       "Linear(10, 10), LogSoftmax(dim=1))\nload('net.safetensors', into=deeper)", "TaasValueError")
        self.assertIn("net.safetensors does not fit the model: missing keys '5.weight', '5.bias'", e["evalue"])

    def test_5_shape_errors_before_anything_starts(self):
        before = self.job_folders()
        e = self.error("wrong = Sequential(Flatten(), Linear(700, 64), ReLU(), Linear(64, 10), LogSoftmax(dim=1))\n"
                       "fit(wrong, train, loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasValueError")
        self.assertEqual(e["evalue"], "layer 1: Linear(in_features=700) gets 784 features from layer 0 (Flatten)")
        tb = taastest.traceback_text(e)
        self.assertIn("write Linear(784, 64), or LazyLinear(64) to infer it", tb)
        e = self.error("few = Sequential(Flatten(), Linear(784, 5), LogSoftmax(dim=1))\n"
                       "fit(few, train, loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasValueError")
        self.assertEqual(e["evalue"], "the model gives 5 outputs per sample, but FashionMNIST has 10 classes")
        e = self.error("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), validate=DataLoader("
                       "FashionMNIST(root='%s', train=False, transform=Compose([Resize(14), ToTensor()])), "
                       "batch_size=100))" % FASHION, "TaasValueError")
        self.assertEqual(e["evalue"], "with the samples of validate: layer 1: Linear(in_features=784) gets 196 "
                                      "features from layer 0 (Flatten)")
        # nothing was launched: no job folder was made for them
        self.assertEqual(self.job_folders(), before)

    def test_6_fit_must_be_a_statement(self):
        e = self.error("print(fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1)))", "TaasSyntaxError")
        self.assertIn("must be a whole statement", e["evalue"])
        e = self.error("fit(train, train, loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasTypeError")
        self.assertIn("must be a model (Sequential, ResNet, BasicBlock, Bottleneck or a layer), not DataLoader",
                      e["evalue"])

    def test_7_nan_loss_names_the_step(self):
        e = self.error("bad = %s\nfit(bad, train, loss=NLLLoss(), optimizer=SGD(lr=1e30), units=4000)" % MLP,
                       "TaasValueError")
        self.assertRegex(e["evalue"], r"the loss is (nan|inf) at epoch 1 step \d+")

    def test_8_interrupt(self):
        self.ok("stopped = %s" % MLP)
        msg_id = self.k.send("shell", "execute_request",
                             {"code": "h8 = fit(stopped, train, epochs=50, loss=NLLLoss(), optimizer=SGD(lr=0.01))",
                              "silent": False, "store_history": True, "user_expressions": {},
                              "allow_stdin": False, "stop_on_error": True})
        seen = []

        def training():  # past the start: a step line is out
            seen.extend(self.k.iopub_now(msg_id, 0.05))
            view = taastest.last_display(seen)
            return view is not None and "step" in view["text/plain"]
        self.assertTrue(taastest.wait_until(training, 30))
        # 50 epochs take minutes: an end within 30 s is the interrupt's
        self.k.request("control", "interrupt_request")
        reply = self.k.reply(msg_id, timeout=30)
        self.assertEqual(reply["content"]["status"], "error")
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assertTrue(taastest.wait_until(lambda: not taastest.worker_pids(self.k.pid), 30))
        msgs = seen + self.k.iopub(msg_id)
        view = taastest.last_display(msgs)
        self.assertIn('data-state="stopped"', view["text/html"])
        # how far it got depends on the machine's speed: any number of epochs
        self.assertRegex(view["text/plain"], r"\nstopped after [0-9.]+ s: \d+ epochs?, [0-9,]+ steps?[^\n]*; the "
                                             r"trained weights are in stopped$")
        # the model keeps the weights of its last completed step; h was never bound
        self.ok("save(stopped, 'after_stop.safetensors')")
        self.assertGreater(os.path.getsize(os.path.join(self.tmp.name, "after_stop.safetensors")), 200000)
        self.error("h8", "TaasNameError")

    def test_91_sizes_past_the_limits_are_refused_at_the_cell(self):
        """Limits the worker has are the table's, named at the cell (issue 16, item 14), and a
        model bigger than the machine's memory is a TaasMemoryError before anything is
        allocated (item 3); the session goes on."""
        e = self.error("fit(net, train, epochs=10**7, loss=NLLLoss(), optimizer=SGD(lr=0.1))", "TaasValueError")
        self.assertIn("fit() argument 'epochs' must be between 1 and 1000000, got 10000000", e["evalue"])
        e = self.error("DataLoader(FashionMNIST(), batch_size=10**8)", "TaasValueError")
        self.assertIn("DataLoader() argument 'batch_size' must be between 1 and 16777216", e["evalue"])
        e = self.error("Linear(784, 3 * 10**9)", "TaasValueError")
        self.assertIn("Linear() argument 'out_features' must be between 1 and 2147483647", e["evalue"])
        e = self.error("summary(net, input_size=(1, 4 * 10**9, 4 * 10**9))", "TaasValueError")
        self.assertIn("summary() argument 'input_size' must be between 1 and 2147483647", e["evalue"])
        e = self.error("huge = Sequential(Flatten(), Linear(784, 10**9), LogSoftmax(dim=1))\n"
                       "fit(huge, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=64)", "TaasMemoryError")
        self.assertRegex(e["evalue"], r"the model needs [0-9.]+ GiB for its parameters and their gradients, more "
                                      r"than this machine's memory \([0-9.]+ GiB\)")
        self.assertIn("1.weight, holds 784000000000 numbers", taastest.traceback_text(e))
        self.assertFalse(taastest.worker_pids(self.k.pid))
        self.assertEqual(result_text(self.ok("1 + 1")), "2")

    def test_9_save_and_load_never_lose_a_file(self):
        """save() onto the file the model was loaded from keeps its bytes (issue 16, defect
        10); load() takes a copy, so the user's file may change or go; a fit never deletes a
        file it did not write, whatever its path looks like (defect 11); save() into a FIFO or
        a folder is refused at once; a failed save leaves the old file as it was."""
        self.ok("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=640)\nsave(net, 'w.safetensors')")
        w = os.path.join(self.tmp.name, "w.safetensors")
        with open(w, "rb") as f:
            original = f.read()
        self.ok("w2 = %s\nload('w.safetensors', into=w2)\nsave(w2, 'w.safetensors')" % MLP)
        with open(w, "rb") as f:
            self.assertEqual(f.read(), original)
        os.unlink(w)  # the model has its own copy
        self.ok("save(w2, 'again.safetensors')")
        with open(os.path.join(self.tmp.name, "again.safetensors"), "rb") as f:
            self.assertEqual(f.read(), original)
        # a user's file in a folder named like a job folder is the user's
        lookalike = os.path.join(self.tmp.name, "taas-job-mine")
        os.mkdir(lookalike)
        with open(os.path.join(lookalike, "weights.safetensors"), "wb") as f:
            f.write(original)
        self.ok("w3 = %s\nload('taas-job-mine/weights.safetensors', into=w3)\n"
                "fit(w3, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=640)\nw3 = None" % MLP)
        with open(os.path.join(lookalike, "weights.safetensors"), "rb") as f:
            self.assertEqual(f.read(), original)
        os.mkfifo(os.path.join(self.tmp.name, "out.fifo"))
        e = self.error("save(w2, 'out.fifo')", "TaasIOError")
        self.assertIn("save() writes a file, and out.fifo is a FIFO", e["evalue"])
        e = self.error("save(w2, '.')", "TaasIOError")
        self.assertIn("is a folder", e["evalue"])
        e = self.error("save(w2, 'no/such/folder/x.safetensors')", "TaasIOError")
        self.assertIn("save() cannot write no/such/folder/x.safetensors: No such file or directory", e["evalue"])
        e = self.error("save(w2, '/proc/self/status')", "TaasIOError")
        self.assertRegex(e["evalue"], r"save\(\) cannot write /proc/self/status: \S")
        self.assertNotIn("disk", taastest.traceback_text(e))


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class JobFoldersGo(unittest.TestCase):
    """A fit's weights live in its job folder while a model holds them: a model that is
    replaced, or a kernel that shuts down, leaves nothing behind in TMPDIR; a file load()
    took from the user stays."""

    def test_nothing_is_left(self):
        with tempfile.TemporaryDirectory(prefix="taas-folders-") as cwd:
            env = dict(os.environ, **taastest.job_tmp(cwd))
            folders = lambda: sorted(os.listdir(os.path.join(cwd, "tmp")))
            k = taastest.Kernel(cwd=cwd, env=env)
            try:
                fit = "fit(net, train, epochs=1, loss=NLLLoss(), optimizer=SGD(lr=0.05), units=640)"
                reply, _ = k.execute(SETUP + fit, timeout=60)
                self.assertEqual(reply["content"]["status"], "ok")
                first = folders()
                self.assertEqual(len(first), 1, first)
                self.assertEqual(sorted(os.listdir(os.path.join(cwd, "tmp", first[0]))), ["weights.safetensors"])
                reply, _ = k.execute("save(net, 'mine.safetensors')\nnet = %s\n%s" % (MLP, fit), timeout=60)
                self.assertEqual(reply["content"]["status"], "ok")
                second = folders()
                self.assertEqual(len(second), 1)
                self.assertNotEqual(second, first)  # the replaced model's folder went with it
                reply, _ = k.execute("other = %s\nload('mine.safetensors', into=other)\nother = None" % MLP)
                self.assertEqual(reply["content"]["status"], "ok")
                self.assertTrue(os.path.isfile(os.path.join(cwd, "mine.safetensors")))
            finally:
                k.close()
            self.assertEqual(folders(), [])
            self.assertTrue(os.path.isfile(os.path.join(cwd, "mine.safetensors")))


if __name__ == "__main__":
    unittest.main()
