"""examples/fashion_mnist.ipynb — the docs/design.md §1 network on Debian's Fashion-MNIST, its
training cell a `#pragma taas --gpus 1 --cpus 1` job (one rank under mpirun, one loader
worker) — executed by nbclient against this build's kernel, with a sample budget that fits
CI's time on two cores: the fit cell's `epochs=9` becomes `epochs=1, units=32000` (500
batches of 64). The model must reach at least 85 % accuracy on the 10,000 test images, and
every cell must show what a user expects: the loader, the model summary, the job's plan and
cost, the training display (with the rank's wait for data) and History, the weights file
with PyTorch's state_dict names, and the Evaluation; nbconvert's HTML export of the executed
notebook keeps the training display's final state."""

import json
import os
import re
import struct
import tempfile
import unittest

import nbformat

import taastest
from taastest import text

NOTEBOOK = os.path.join(taastest.SOURCE_DIR, "examples", "fashion_mnist.ipynb")
FASHION = "/usr/share/datasets/fashion-mnist"
BUDGET = "epochs=1, units=32000"
PRAGMA = "#pragma taas --gpus 1 --cpus 1"
STATE_DICT = ["0.bias", "0.weight", "11.bias", "11.weight", "2.bias", "2.weight", "7.bias", "7.weight", "8.bias",
              "8.num_batches_tracked", "8.running_mean", "8.running_var", "8.weight"]


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class FashionMnistNotebook(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        taastest.install_test_kernelspec()

    def test_committed_notebook(self):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nbformat.validate(nb)
        self.assertEqual(nb.metadata["kernelspec"]["name"], "taas")
        for cell in nb.cells:
            if cell.cell_type == "code":
                self.assertEqual(cell.outputs, [], "commit the notebook without outputs")
                if cell["id"] == "train":  # the main job shows what taas is for
                    self.assertTrue(cell.source.startswith(PRAGMA + "\n"), cell.source)
                else:
                    self.assertNotIn("#pragma", cell.source)

    def test_trains_to_85_percent(self):
        from nbclient import NotebookClient

        nb = nbformat.read(NOTEBOOK, as_version=4)
        cells = {c["id"]: c for c in nb.cells if c.cell_type == "code"}
        self.assertIn("epochs=9", cells["train"].source)
        cells["train"].source = cells["train"].source.replace("epochs=9", BUDGET)
        with tempfile.TemporaryDirectory(prefix="taas-fmnist-") as d:
            NotebookClient(nb, kernel_name="taas", timeout=900, resources={"metadata": {"path": d}}).execute()
            with open(os.path.join(d, "fashion_cnn.safetensors"), "rb") as f:
                n, = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
        for c in cells.values():
            kinds = [o["output_type"] for o in c.outputs]
            self.assertNotIn("error", kinds, (c["id"], c.outputs))

        loader = text(cells["data"].outputs[-1]["data"]["text/plain"])
        self.assertIn("938", loader)  # batches per epoch
        summary = text(cells["model"].outputs[-1]["data"]["text/html"])
        self.assertIn("1,200,138", summary)  # torch: sum(p.numel() for p in net.parameters())

        train = cells["train"]
        stdout = taastest.stream_of(train)
        # the job's plan, what it will cost, where the rank trains, its kernel set, its summary
        self.assertIn("plan: 1 machine × 1 GPU, 1 loader worker for 'train', no sample limit\ncost: ", stdout)
        self.assertIn(taastest.rank_line(1), stdout)
        self.assertIn("\nkernels: %s on every rank (%s)\n" % (taastest.best_kernels(), taastest.kernels_why(
            "the best every rank's host runs")), stdout)
        self.assertRegex(stdout, r"\ndone: 1 epoch, 500 steps on 1 rank in .*; samples trained and their checksum: "
                                 r"epoch 1 32,000 0x[0-9a-f]{16}\n$")
        self.assertEqual(taastest.stream_of(train, "stderr"), "")
        # the training display, as the notebook keeps it: its last state, with the rank's wait
        # for the loader worker's batches
        shown = [o for o in train.outputs if o["output_type"] == "display_data"]
        self.assertEqual(len(shown), 1)
        view = shown[0]["data"]
        self.assertRegex(text(view["text/plain"]), r"^█{24} 100%  epoch 1/1 done  [0-9,]+ samples/s  ranks 1/1  "
                                                   r"loaders \d/1  waiting for data \d+%")
        self.assertRegex(text(view["text/plain"]), r"\ndone after .*: 1 epoch, 500 steps, [0-9,]+ samples/s while training; best val "
                                                   r"accuracy 0\.[0-9]{4} \(epoch 1\); the trained weights are in net$")
        self.assertIn('<svg class="taas-chart"', taastest.chart_svg(text(view["text/html"])) or "")

        # nbconvert's HTML export keeps the display's final state: the bar full, table, chart, summary
        from nbconvert import HTMLExporter
        html, _ = HTMLExporter().from_notebook_node(nb)
        self.assertIn('<div class="taas-training" data-state="done">', html)
        self.assertIn('<progress class="taas-progress" value="500" max="500"', html)
        self.assertRegex(taastest.chart_svg(html) or "", r'<path class="taas-train-loss" d="M[0-9.]+ [0-9.]+"')
        self.assertIn('<table class="taas-epochs">', html)
        self.assertIn('<div class="taas-summary">done after', html)
        self.assertIn('<table class="taas-model">', html)
        history = [o for o in train.outputs if o["output_type"] == "execute_result"]
        self.assertEqual(len(history), 1)
        self.assertTrue(text(history[0]["data"]["text/plain"]).startswith("History (1 epoch)"))

        header.pop("__metadata__")
        self.assertEqual(sorted(header), STATE_DICT)
        self.assertEqual(header["8.num_batches_tracked"], {"dtype": "I64", "shape": [], "data_offsets":
                                                           header["8.num_batches_tracked"]["data_offsets"]})

        result = text(cells["evaluate"].outputs[-1]["data"]["text/plain"])
        m = re.fullmatch(r"Evaluation\(loss=([0-9.]+), accuracy=([0-9.]+), samples=10000\)", result)
        self.assertIsNotNone(m, result)
        print("test accuracy after %s: %s" % (BUDGET, m.group(2)))
        self.assertGreaterEqual(float(m.group(2)), 0.85)


if __name__ == "__main__":
    unittest.main()
