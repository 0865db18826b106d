"""examples/hello.ipynb executed against this build's kernel by nbclient and by
`jupyter nbconvert --to notebook --execute`, with the outputs of every code cell checked."""

import glob
import os
import subprocess
import sys
import tempfile
import unittest

import nbformat

import taastest
from taastest import text

NOTEBOOK = os.path.join(taastest.SOURCE_DIR, "examples", "hello.ipynb")

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


class CheckOutputs:
    """Checks shared by both ways of executing the notebook."""

    def cells(self, nb):
        return {c["id"]: c for c in nb.cells if c.cell_type == "code"}

    def stream(self, cell, name="stdout"):
        return "".join(text(o["text"]) for o in cell.outputs
                       if o["output_type"] == "stream" and o["name"] == name)

    def result(self, cell):
        res = [o for o in cell.outputs if o["output_type"] == "execute_result"]
        self.assertEqual(len(res), 1, cell.outputs)
        self.assertEqual(res[0]["execution_count"], cell.execution_count)
        return text(res[0]["data"]["text/plain"])

    def displays(self, cell):
        return [text(o["data"]["text/plain"]) for o in cell.outputs
                if o["output_type"] == "display_data"]

    def kinds(self, cell):
        return [o["output_type"] for o in cell.outputs]

    def check(self, nb):
        self.assertEqual(nb.metadata["kernelspec"]["name"], "taas")
        self.assertEqual(nb.metadata["language_info"]["name"], "taas")
        c = self.cells(nb)
        self.assertEqual(self.kinds(c["hello"]), ["stream"])
        self.assertEqual(self.stream(c["hello"]), "hello, world\n")

        self.assertEqual(self.result(c["arithmetic"]), "2.5")
        self.assertEqual(self.result(c["tuple"]), "(3, 1, 1024, -4)")
        self.assertEqual(self.result(c["variables"]), "938")
        self.assertEqual(self.stream(c["variables-later"]),
                         "one epoch is 938 steps of 64 images\n")

        self.assertNotIn("error", self.kinds(c["data"]))
        self.assertEqual(self.result(c["data-len"]), "(938, 10)")

        self.assertEqual(self.kinds(c["model"]), ["execute_result"])
        # a model shows its summary, each layer as PyTorch prints it (print(net) gives the repr)
        summary = self.result(c["model"])
        self.assertTrue(summary.startswith("Sequential: 13 layers, input not known yet\n"), summary)
        for layer in MODEL_REPR.splitlines()[1:-1]:
            self.assertIn(layer.split(": ", 1)[1], summary)
        self.assertIn("parameters: 1,200,138", summary)
        model = c["model"].outputs[0]["data"]
        self.assertIn("text/html", model, "the model should also be shown as a summary table")
        html = text(model["text/html"])
        # 1,200,138 = sum(p.numel() for p in net.parameters()) in PyTorch
        for needle in ("<table", "Conv2d", "LogSoftmax", "1,200,138"):
            self.assertIn(needle, html)

        # help() goes to the pager, which a notebook file does not keep
        self.assertEqual(self.kinds(c["help"]), [])

        self.assertEqual(self.displays(c["display"]),
                         ["ReLU()", "Linear(in_features=128, out_features=10, bias=True)"])
        # update_display_data replaced the earlier output in place
        self.assertEqual(self.displays(c["progress"]), ["'epoch 9 of 9: done'"])
        self.assertEqual(self.kinds(c["progress-update"]), [])

        self.assertIn("raises-exception", c["error"].metadata.get("tags", []))
        self.assertEqual(self.kinds(c["error"]), ["error"])
        err = c["error"].outputs[0]
        self.assertEqual(err["ename"], "TaasNameError")
        tb = [taastest.plain(t) for t in err["traceback"]]
        self.assertEqual(tb[0], "Cell line 1, column 24")
        self.assertEqual(tb[1], "    Linear(9216, 128, bias=Flase)")
        self.assertEqual(tb[2], "    " + " " * 23 + "^^^^^")
        self.assertEqual(tb[-1], "hint: did you mean 'False'?")

        self.assertEqual(self.result(c["after-error"]),
                         "Linear(in_features=9216, out_features=128, bias=False)")
        counts = [cell.execution_count for cell in c.values()]
        self.assertEqual(counts, list(range(1, len(counts) + 1)))


class HelloNotebook(CheckOutputs, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        taastest.install_test_kernelspec()

    def test_committed_notebook(self):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nbformat.validate(nb)
        self.assertEqual(nb.metadata["kernelspec"],
                         {"name": "taas", "display_name": "taas", "language": "taas"})
        self.assertEqual(nb.metadata["language_info"]["name"], "taas")
        for cell in nb.cells:
            if cell.cell_type == "code":
                self.assertEqual(cell.outputs, [], "commit the notebook without outputs")
                self.assertIsNone(cell.execution_count)

    def test_nbclient(self):
        from nbclient import NotebookClient

        nb = nbformat.read(NOTEBOOK, as_version=4)
        replies = {}

        def on_cell_executed(cell, cell_index, execute_reply):
            replies[cell["id"]] = execute_reply

        with tempfile.TemporaryDirectory() as d:
            client = NotebookClient(nb, kernel_name="taas", timeout=60,
                                    resources={"metadata": {"path": d}},
                                    on_cell_executed=on_cell_executed)
            client.execute()
        self.check(nb)
        pages = replies["help"]["content"]["payload"]
        self.assertEqual(len(pages), 1)
        self.assertEqual(pages[0]["source"], "page")
        self.assertIn("Conv2d(in_channels, out_channels, kernel_size",
                      pages[0]["data"]["text/plain"])
        self.assertEqual(replies["error"]["content"]["status"], "error")

    def test_nbconvert_execute(self):
        with tempfile.TemporaryDirectory() as d:
            cmd = ["/usr/bin/jupyter", "nbconvert", "--to", "notebook", "--execute",
                   "--ExecutePreprocessor.kernel_name=taas",
                   "--ExecutePreprocessor.timeout=60", "--output-dir", d, NOTEBOOK]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ))
            self.assertEqual(p.returncode, 0, p.stderr)
            out = glob.glob(os.path.join(d, "*.ipynb"))
            self.assertEqual(len(out), 1, (out, p.stderr))
            nb = nbformat.read(out[0], as_version=4)
        self.check(nb)


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
