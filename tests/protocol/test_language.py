"""The cell language seen from a Jupyter client: error outputs with a caret under the
right column and a hint, PyTorch's reprs, session variables, and pragma cells (plan line,
then TaasOffloadError; TaasPragmaError for a bad header, with nothing run)."""

import os
import tempfile
import unittest

import taastest
from taastest import caret_column, error_of, result_text, stream_text, traceback_text

DATA_CELL = """\
transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])
train = DataLoader(FashionMNIST(train=True, transform=transform), batch_size=64, shuffle=True)
test  = DataLoader(FashionMNIST(train=False, transform=transform), batch_size=1000)
register(train)                    # taas.register(train) is accepted too
"""

MODEL_CELL = """\
net = Sequential(
    Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(),
    MaxPool2d(2), Dropout(0.25), Flatten(),
    Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5),
    Linear(128, 10), LogSoftmax(dim=1))
net"""

# What PyTorch 2.x prints for the same model (torch.nn.Sequential.__repr__).
MODEL_REPR = """\
Sequential(
  (0): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))
  (1): ReLU()
  (2): Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1))
  (3): ReLU()
  (4): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (5): Dropout(p=0.25, inplace=False)
  (6): Flatten(start_dim=1, end_dim=-1)
  (7): Linear(in_features=9216, out_features=128, bias=True)
  (8): BatchNorm1d(128, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
  (9): ReLU()
  (10): Dropout(p=0.5, inplace=False)
  (11): Linear(in_features=128, out_features=10, bias=True)
  (12): LogSoftmax(dim=1)
)"""

FIT_CELL = """\
fit(net, train, epochs=9, loss=NLLLoss(), optimizer=Adadelta(lr=1.0),
    scheduler=StepLR(step_size=1, gamma=0.7), validate=test)
save(net, "fashion_cnn.safetensors")
"""


class Language(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cwd = tempfile.TemporaryDirectory(prefix="taas-lang-")
        # no user machine configurations: only the built-in ones
        env = dict(os.environ, TAAS_CONFIG=os.path.join(cls.cwd.name, "no-config.json"),
                   HOME=cls.cwd.name)
        cls.k = taastest.Kernel(cwd=cls.cwd.name, env=env)
        for cell in (DATA_CELL, MODEL_CELL):
            reply, msgs = cls.k.execute(cell)
            assert reply["content"]["status"] == "ok", (cell, msgs)

    @classmethod
    def tearDownClass(cls):
        cls.k.close()
        cls.cwd.cleanup()

    def run_error(self, code, ename):
        reply, msgs = self.k.execute(code)
        self.assertEqual(reply["content"]["status"], "error", code)
        err = error_of(msgs)
        self.assertEqual(err["ename"], ename, traceback_text(err))
        return err, msgs

    def assert_caret(self, err, line, col, source, width=None):
        tb = [taastest.plain(t) for t in err["traceback"]]
        self.assertEqual(tb[0], "Cell line %d, column %d" % (line, col), tb)
        self.assertEqual(caret_column(err["traceback"], source), col, tb)
        if width is not None:
            self.assertEqual(tb[2].count("^"), width, tb)
        self.assertIn("%s: %s" % (err["ename"], err["evalue"]), tb)

    def hint(self, err):
        lines = [line for line in map(taastest.plain, err["traceback"])
                 if line.startswith("hint: ")]
        self.assertEqual(len(lines), 1, err["traceback"])
        return lines[0][len("hint: "):]

    # -- syntax ----------------------------------------------------------------------

    def test_syntax_error_caret(self):
        err, _ = self.run_error("x = = 1", "TaasSyntaxError")
        self.assert_caret(err, 1, 5, "x = = 1")
        self.assertTrue(self.hint(err))

    def test_syntax_error_caret_counts_code_points(self):
        code = "a = 1\ns = 'é日' + * 2"
        err, _ = self.run_error(code, "TaasSyntaxError")
        self.assert_caret(err, 2, 12, "s = 'é日' + * 2")
        # the statement before the bad line did not run either: a cell is parsed first
        self.run_error("a", "TaasNameError")

    def test_non_ascii_outside_strings(self):
        err, _ = self.run_error("größe = 3", "TaasSyntaxError")
        self.assert_caret(err, 1, 3, "größe = 3")
        self.assertIn("ö", err["evalue"])
        self.assertTrue(self.hint(err))
        reply, msgs = self.k.execute("'größe'")
        self.assertEqual(result_text(msgs), "'größe'")

    def test_not_python(self):
        for code, col in (("import torch", 1), ("def f(x):\n    return x", 1),
                          ("x = [i for i in (1, 2)]", 8), ("x += 1", 3),
                          ("lambda x: x", 1)):
            with self.subTest(code=code):
                err, _ = self.run_error(code, "TaasSyntaxError")
                first = code.split("\n")[0]
                self.assertEqual(caret_column(err["traceback"], first), col,
                                 traceback_text(err))
                self.assertTrue(self.hint(err))

    def test_unclosed_bracket(self):
        err, _ = self.run_error("x = Linear(1,\n", "TaasSyntaxError")
        self.assertIn("(", err["evalue"] + self.hint(err))

    # -- names -----------------------------------------------------------------------

    def test_misspelt_name_did_you_mean(self):
        err, _ = self.run_error("layer = Conv2D(1, 32, 3)", "TaasNameError")
        self.assertIn("Conv2D", err["evalue"])
        self.assertEqual(self.hint(err), "did you mean 'Conv2d'?")
        self.assert_caret(err, 1, 9, "layer = Conv2D(1, 32, 3)", width=6)

    def test_misspelt_variable_did_you_mean(self):
        self.k.execute("learning_rate = 0.5")
        err, _ = self.run_error("Adadelta(lr=learnig_rate)", "TaasNameError")
        self.assertEqual(self.hint(err), "did you mean 'learning_rate'?")

    def test_misspelt_language_keyword(self):
        err, _ = self.run_error("net2 = Linear(9000, 128, bias=Flase)", "TaasNameError")
        self.assertEqual(self.hint(err), "did you mean 'False'?")
        self.assert_caret(err, 1, 31, "net2 = Linear(9000, 128, bias=Flase)", width=5)

    def test_misspelt_keyword_argument(self):
        for code, typo, meant, col in (("Linear(1, 2, biass=False)", "biass", "bias", 14),
                                       ("Conv2d(1, 2, kernal_size=3)", "kernal_size",
                                        "kernel_size", 14),
                                       ("Linear(1, out_feature=2)", "out_feature",
                                        "out_features", 11)):
            with self.subTest(code=code):
                err, _ = self.run_error(code, "TaasTypeError")
                self.assertIn("'%s'" % typo, err["evalue"])
                self.assertTrue(self.hint(err).startswith("did you mean '%s'?" % meant),
                                self.hint(err))
                self.assert_caret(err, 1, col, code)

    def test_module_prefixes(self):
        for code in ("nn.ReLU()", "torch.nn.ReLU()",
                     "taas.unregister(train)\ntaas.register(train)"):
            with self.subTest(code=code):
                reply, msgs = self.k.execute(code)
                self.assertEqual(reply["content"]["status"], "ok", msgs)
        reply, msgs = self.k.execute("optim.lr_scheduler.StepLR(step_size=2)")
        self.assertEqual(reply["content"]["status"], "ok")
        self.assertIn("StepLR", result_text(msgs))

    # -- types and values ------------------------------------------------------------

    def test_type_error_wrong_argument_type(self):
        err, _ = self.run_error('Linear("a", 2)', "TaasTypeError")
        self.assertIn("in_features", err["evalue"])
        self.assertIn("str", err["evalue"])
        self.assert_caret(err, 1, 8, 'Linear("a", 2)')

    def test_type_error_missing_and_extra_arguments(self):
        err, _ = self.run_error("Linear(4)", "TaasTypeError")
        self.assertIn("out_features", err["evalue"])
        err, _ = self.run_error("ReLU(True, 1)", "TaasTypeError")
        self.assertIn("ReLU", err["evalue"])
        err, _ = self.run_error("Linear(1, 2, in_features=3)", "TaasTypeError")
        self.assertIn("in_features", err["evalue"])

    def test_type_error_arithmetic_on_objects(self):
        err, _ = self.run_error("ReLU() + 1", "TaasTypeError")
        self.assertIn("ReLU", err["evalue"])

    def test_value_error_out_of_range(self):
        err, _ = self.run_error("Dropout(1.5)", "TaasValueError")
        self.assertIn("1.5", err["evalue"])
        self.assert_caret(err, 1, 9, "Dropout(1.5)")
        err, _ = self.run_error("sleep(-1)", "TaasValueError")
        self.assertIn("-1", err["evalue"])

    def test_division_by_zero(self):
        reply, msgs = self.k.execute("1 / 0")
        self.assertEqual(reply["content"]["status"], "error")
        err = error_of(msgs)
        self.assertTrue(err["ename"].startswith("Taas"), err["ename"])
        self.assertIn("zero", err["evalue"])

    def test_arithmetic_like_python(self):
        for code, out in (("7 // 2", "3"), ("-7 // 2", "-4"), ("7 % -3", "-2"),
                          ("2 ** 10", "1024"), ("2 ** -1", "0.5"), ("1 / 3", "0.3333333333333333"),
                          ("0.1 + 0.2", "0.30000000000000004"), ("64 * 12 * 12", "9216"),
                          ("-(3 - 5)", "2"), ("1e-05", "1e-05"), ("True", "True"),
                          ("None", None), ("[1, 'a', (2,)]", "[1, 'a', (2,)]"),
                          ("len([1, 2, 3])", "3")):
            with self.subTest(code=code):
                reply, msgs = self.k.execute(code)
                self.assertEqual(reply["content"]["status"], "ok", msgs)
                if out is None:
                    self.assertEqual(taastest.only(msgs, "execute_result"), [])
                else:
                    self.assertEqual(result_text(msgs), out)

    # -- reprs and variables ---------------------------------------------------------

    def test_sequential_repr_is_pytorchs(self):
        reply, msgs = self.k.execute("print(net)")
        self.assertEqual(stream_text(msgs), MODEL_REPR + "\n")
        # shown as a cell's value, a model is its summary (torchinfo's layout)
        reply, msgs = self.k.execute("net")
        self.assertRegex(result_text(msgs), r"^Sequential: 13 layers, input (not known yet|\(N, 1, 28, 28\))\n")

    def test_layer_reprs(self):
        for code, out in (
                ("Conv2d(1, 32, 3)", "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))"),
                ("Conv2d(3, 8, (3, 5), stride=2, padding=1)",
                 "Conv2d(3, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1))"),
                ("Linear(4, 2, bias=False)", "Linear(in_features=4, out_features=2, bias=False)"),
                ("LogSoftmax(dim=-1)", "LogSoftmax(dim=-1)"),
                ("Dropout()", "Dropout(p=0.5, inplace=False)")):
            with self.subTest(code=code):
                reply, msgs = self.k.execute(code)
                self.assertEqual(result_text(msgs), out)

    # -- models: parts, changing them, freezing (issue 28 §5) --------------------------

    def test_fine_tuning_a_resnet(self):
        reply, msgs = self.k.execute("backbone = models.resnet18()\nalias = backbone\n"
                                     "backbone.requires_grad_(False)\n"
                                     "backbone.fc = nn.Linear(backbone.fc.in_features, 10)\nalias")
        self.assertEqual(reply["content"]["status"], "ok", msgs)
        shown = result_text(msgs)
        # torchinfo's table of the tree: a row a module by depth
        self.assertTrue(shown.startswith("ResNet: input not known yet\nLayer (type:depth-idx)"), shown)
        self.assertIn("\n├─Conv2d: 1-1 ", shown)
        self.assertRegex(shown, r"\n├─Linear: 1-10 +\(N, 10\) +5,130\n")
        self.assertIn("Total params: 11,181,642\nTrainable params: 5,130\nNon-trainable params: 11,176,512", shown)
        reply, msgs = self.k.execute("print(backbone.layer1[0].conv1, backbone.layer4[-1].downsample)")
        self.assertEqual(stream_text(msgs), "Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), "
                                            "bias=False) None\n")
        reply = self.k.request("shell", "complete_request", {"code": "backbone.la", "cursor_pos": 11})[0]
        self.assertEqual(reply["content"]["matches"], ["backbone.layer1", "backbone.layer2", "backbone.layer3",
                                                       "backbone.layer4"])

    def test_model_part_errors(self):
        self.k.execute("small = Sequential(Linear(4, 2), ReLU())")
        err, _ = self.run_error("small[5]", "TaasValueError")
        self.assertEqual(err["evalue"], "index 5 is out of range: the Sequential has 2 layers")
        self.assert_caret(err, 1, 1, "small[5]", 8)
        err, _ = self.run_error("x = 1\nsmall[0] = 'relu'", "TaasTypeError")
        self.assertIn("cannot assign 'str' as layer 0 of a Sequential", err["evalue"])
        self.assert_caret(err, 2, 1, "small[0] = 'relu'", 8)
        err, _ = self.run_error("resnet18().head", "TaasTypeError")
        self.assertEqual(err["evalue"], "'ResNet' object has no attribute 'head'")
        self.assertIn("conv1, bn1, relu, maxpool, layer1", self.hint(err))

    def test_variables_persist_across_cells(self):
        self.k.execute("width = 12\nlayer = Linear(64 * width * width, 128)")
        reply, msgs = self.k.execute("layer")
        self.assertEqual(result_text(msgs),
                         "Linear(in_features=9216, out_features=128, bias=True)")
        self.k.execute("width = width + 1")
        reply, msgs = self.k.execute("width")
        self.assertEqual(result_text(msgs), "13")

    def test_print_sep_end(self):
        reply, msgs = self.k.execute('print(1, "a", ReLU(), sep="|", end="!\\n")\nprint()')
        self.assertEqual(stream_text(msgs), "1|a|ReLU()!\n\n")

    # -- pragma cells ----------------------------------------------------------------

    def pragma_cell(self, header):
        return header + "\n" + FIT_CELL

    def assert_ran_nothing(self, msgs):
        self.assertEqual(stream_text(msgs), "", "a rejected pragma cell printed something")
        self.assertFalse(os.path.exists(os.path.join(self.cwd.name, "fashion_cnn.safetensors")))

    def test_pragma_two_machines(self):
        # planned and refused before anything starts; jobs that run: test_offload.py
        err, msgs = self.run_error(self.pragma_cell("#!g2.8\n#pragma taas --gpus 16 --cpus 2 --units 20480000"),
                                   "TaasOffloadError")
        out = stream_text(msgs)
        self.assertTrue(out.startswith("plan: "), out)
        self.assertEqual(out.count("\n"), 2, out)  # the plan, and what it will cost
        self.assertIn("\ncost: ", out)
        self.assertIn("2 machines × 8 GPUs (g2.8)", out)
        self.assertIn("2 loader workers for 'train'", out)
        self.assertIn("20,480,000 samples", out)
        self.assertIn("needs 2 machines, but the local backend runs on this machine only", err["evalue"])
        self.assertIn("--gpus 8", self.hint(err))
        kinds = [m["msg_type"] for m in taastest.outputs(msgs)]
        self.assertEqual(kinds, ["stream", "error"])
        self.assertFalse(os.path.exists(os.path.join(self.cwd.name, "fashion_cnn.safetensors")))

    def test_pragma_errors_run_nothing(self):
        cases = [
            ("#pragma taas --gpu 8", "--gpu"),
            ("#pragma taas --gpus eight", "eight"),
            ("#pragma taas --gpus 0", "--gpus"),
            ("#pragma taas --gpus 4 --cpus 9", "--cpus"),
            ("#!g2.8\n#pragma taas --gpus 12", "8"),
            ("#!g9.9\n#pragma taas --gpus 8", "g9.9"),
            ("#!g2.8", "#pragma taas"),
        ]
        for header, mentioned in cases:
            with self.subTest(header=header):
                cell = header + '\nprint("RAN")\n' + FIT_CELL
                err, msgs = self.run_error(cell, "TaasPragmaError")
                self.assertIn(mentioned, err["evalue"] + " " + self.hint(err))
                self.assertTrue(self.hint(err))
                self.assert_ran_nothing(msgs)

    def test_pragma_after_code(self):
        cell = "marker = 1\n#pragma taas --gpus 8\n" + FIT_CELL
        err, msgs = self.run_error(cell, "TaasPragmaError")
        self.assert_caret(err, 2, 1, "#pragma taas --gpus 8")
        self.assert_ran_nothing(msgs)
        self.run_error("marker", "TaasNameError")

    def test_pragma_without_fit(self):
        cell = '#pragma taas --gpus 8\nprint("RAN")\nmarker2 = 1'
        err, msgs = self.run_error(cell, "TaasPragmaError")
        self.assertIn("fit", err["evalue"] + " " + self.hint(err))
        self.assert_ran_nothing(msgs)
        self.run_error("marker2", "TaasNameError")


if __name__ == "__main__":
    unittest.main()
