"""The docs/design.md §1 notebook with its pragma lines, executed by nbclient: the training cell
of examples/fashion_mnist.ipynb gets `#!g2.8` and `#pragma taas --gpus 2 --cpus 2 --units 6400`
in place of its own pragma,
so it runs as an offloaded job — two trainer ranks on this machine's CPU under mpirun, two
loader workers for the registered training loader — and the notebook goes on with the
trained model: History shown, weights saved with PyTorch's names, the evaluation cell."""

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
HEADER = "#!g2.8\n#pragma taas --gpus 2 --cpus 2 --units 6400\n"


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class OffloadNotebook(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        taastest.install_test_kernelspec()

    def test_pragma_cell_in_a_notebook(self):
        from nbclient import NotebookClient

        nb = nbformat.read(NOTEBOOK, as_version=4)
        cells = {c["id"]: c for c in nb.cells if c.cell_type == "code"}
        cells["train"].source = taastest.set_pragma(cells["train"].source, HEADER)
        with tempfile.TemporaryDirectory(prefix="taas-offload-nb-") as d:
            NotebookClient(nb, kernel_name="taas", timeout=600, resources={"metadata": {"path": d}}).execute()
            with open(os.path.join(d, "fashion_cnn.safetensors"), "rb") as f:
                n, = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
        for c in cells.values():
            self.assertNotIn("error", [o["output_type"] for o in c.outputs], (c["id"], c.outputs))
        train = cells["train"]
        stdout = taastest.stream_of(train)
        self.assertIn("plan: 1 machine × 2 GPUs (g2.8), 2 loader workers for 'train', up to 6,400 samples\n",
                      stdout)
        self.assertIn(taastest.rank_line(2), stdout)
        self.assertRegex(stdout, r"done: 1 epoch, 50 steps on 2 ranks in [0-9.]+ (s|min)")
        # nbclient keeps the display's last state, in place of the first
        shown = [o for o in train.outputs if o["output_type"] == "display_data"]
        self.assertEqual(len(shown), 1)
        self.assertRegex(text(shown[0]["data"]["text/plain"]), r"^█{24} 100%  epoch 1/9 done  [0-9,]+ samples/s  "
                                                                r"ranks 2/2  loaders \d/2")
        history = [o for o in train.outputs if o["output_type"] == "execute_result"]
        self.assertEqual(len(history), 1)
        self.assertTrue(text(history[0]["data"]["text/plain"]).startswith("History (1 epoch)"))
        self.assertIn("8.num_batches_tracked", header)
        result = text(cells["evaluate"].outputs[-1]["data"]["text/plain"])
        self.assertIsNotNone(re.fullmatch(r"Evaluation\(loss=[0-9.]+, accuracy=[0-9.]+, samples=10000\)", result))


if __name__ == "__main__":
    unittest.main()
