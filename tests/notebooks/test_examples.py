"""The example notebooks other than examples/fashion_mnist.ipynb (test_fashion_mnist.py runs
that one), executed by nbclient against this build's kernel with the data
examples/prepare_data.py makes, as a user would run them:

- examples/mlp_npy.ipynb: an MLP on Fashion-MNIST as .npy arrays in the notebook's data/ folder,
  five epochs as written;
- examples/webdataset_http.ipynb: WebDataset shards of PNG images served by a real HTTP server
  (nginx, tests/lib/nginx.py), a registered loader on two loader workers and two CPU ranks
  under a #pragma taas cell; a smaller set of shards (6,000 training and 1,000 test images)
  keeps it within CI's time, with the notebook's server address and shard ranges changed to
  them;
- examples/resnet_photos.ipynb: resnet18 on a folder of JPEG photos (prepare_data.py's, of
  their realistic 500x375 size, 256 training and 100 test pictures here) in a
  `#pragma taas --gpus 2 --cpus auto` cell (two CPU ranks without a GPU), one epoch instead
  of five, then fine-tuned with a frozen backbone and a new head for one epoch instead of
  two;
- examples/gpt_fortunes.ipynb: a character-level GPT2LMHeadModel on Debian's fortunes
  (`computers`) as TextFile windows in a `#pragma taas --gpus 1 --cpus 1` cell, two epochs
  instead of five."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import unittest.mock

import nbformat

import taastest
from taastest import text

EXAMPLES = os.path.join(taastest.SOURCE_DIR, "examples")
FASHION = "/usr/share/datasets/fashion-mnist"
FORTUNES = "/usr/share/games/fortunes/computers"
PREPARE = os.path.join(EXAMPLES, "prepare_data.py")


def run_notebook(name, cwd, edit=None, may_fail=()):
    """may_fail: the cells tagged raises-exception that this run expects to stop."""
    from nbclient import NotebookClient

    nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
    cells = {c["id"]: c for c in nb.cells if c.cell_type == "code"}
    if edit:
        edit(cells)
    NotebookClient(nb, kernel_name="taas", timeout=600, resources={"metadata": {"path": cwd}}).execute()
    for c in cells.values():
        errors = [o for o in c.outputs if o["output_type"] == "error"]
        if c["id"] in may_fail:
            assert "raises-exception" in c.metadata.get("tags", []), c["id"]
            continue
        if errors:
            raise AssertionError("cell %s failed: %s" % (c["id"], "\n".join(taastest.plain(l) for l in
                                                                            errors[0]["traceback"])))
    return cells


def result(cell):
    res = [o for o in cell.outputs if o["output_type"] == "execute_result"]
    assert len(res) == 1, cell.outputs
    return text(res[0]["data"]["text/plain"])


def accuracy(cell):
    m = re.fullmatch(r"Evaluation\(loss=[0-9.]+, accuracy=([0-9.]+), samples=(\d+)\)", result(cell))
    assert m, result(cell)
    return float(m.group(1)), int(m.group(2))


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class Examples(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        taastest.install_test_kernelspec()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="taas-examples-")
        self.addCleanup(self.tmp.cleanup)

    def prepare(self, *args):
        subprocess.run([sys.executable, PREPARE] + list(args), check=True, capture_output=True, timeout=300)

    def test_committed_notebooks(self):
        for name in ("mlp_npy.ipynb", "webdataset_http.ipynb", "resnet_photos.ipynb", "gpt_fortunes.ipynb"):
            nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
            nbformat.validate(nb)
            self.assertEqual(nb.metadata["kernelspec"]["name"], "taas")
            for cell in nb.cells:
                if cell.cell_type == "code":
                    self.assertEqual(cell.outputs, [], "%s: commit the notebook without outputs" % name)

    def test_mlp_on_npy_arrays(self):
        self.prepare("npy", os.path.join(self.tmp.name, "data"))
        cells = run_notebook("mlp_npy.ipynb", self.tmp.name)
        self.assertIn("NpyDataset", result(cells["data"]))
        summary = [o for o in cells["model"].outputs if o["output_type"] == "display_data"]
        self.assertIn("input (128, 1, 28, 28)", text(summary[0]["data"]["text/plain"]))
        history = result(cells["train"])
        self.assertTrue(history.startswith("History (5 epochs)"), history)
        acc, n = accuracy(cells["evaluate"])
        self.assertEqual(n, 10000)
        self.assertGreater(acc, 0.85)
        self.assertGreater(os.path.getsize(os.path.join(self.tmp.name, "mlp.safetensors")), 800000)

    def test_webdataset_over_http_with_loader_workers(self):
        shards = os.path.join(self.tmp.name, "shards")
        self.prepare("shards", shards, "--train", "6000", "--test", "1000")
        state = os.path.join(self.tmp.name, "nginx")
        os.makedirs(state)
        server = subprocess.Popen([sys.executable, os.path.join(taastest.SOURCE_DIR, "tests", "lib", "nginx.py"),
                                   "--root", shards, "--state", state])
        self.addCleanup(server.wait, 10)
        self.addCleanup(server.terminate)
        portfile = os.path.join(state, "port")
        self.assertTrue(taastest.wait_until(lambda: os.path.exists(portfile), 30), "nginx did not start")
        with open(portfile) as f:
            port = int(f.read())
        cache = os.path.join(self.tmp.name, "cache")
        old = os.environ.get("TAAS_CACHE_DIR")
        os.environ["TAAS_CACHE_DIR"] = cache  # the kernel and its workers: not the user's cache
        self.addCleanup(lambda: os.environ.pop("TAAS_CACHE_DIR") if old is None
                        else os.environ.__setitem__("TAAS_CACHE_DIR", old))

        def smaller(cells):
            src = cells["data"].source
            for old_text, new_text in (("http://127.0.0.1:8000", "http://127.0.0.1:%d" % port),
                                       ("{000000..000059}", "{000000..000005}"),
                                       ("{000000..000009}", "{000000..000000}")):
                self.assertIn(old_text, src)
                src = src.replace(old_text, new_text)
            cells["data"].source = src

        cells = run_notebook("webdataset_http.ipynb", self.tmp.name, smaller)
        self.assertIn("WebDataset", result(cells["data"]))
        self.assertIn("image/png", cells["show"].outputs[0]["data"])
        out = taastest.stream_of(cells["train"])
        self.assertIn("plan: 1 machine × 2 GPUs, 2 loader workers for 'train', no sample limit\n", out)
        self.assertRegex(out, r"done: 3 epochs, \d+ steps on 2 ranks in .*samples trained and their checksum: "
                              r"epoch 1 6,000 0x[0-9a-f]{16}")
        self.assertTrue(result(cells["train"]).startswith("History (3 epochs)"))
        acc, n = accuracy(cells["evaluate"])
        self.assertEqual(n, 1000)
        self.assertGreater(acc, 0.6)
        self.assertTrue(os.listdir(cache), "the shards were not cached")

    def test_resnet_on_photos_then_fine_tuned(self):
        self.prepare("photos", os.path.join(self.tmp.name, "photos"), "--train", "256", "--test", "100")

        def shorter(cells):
            for cell, old_text, new_text in (("train", "epochs=5", "epochs=1"), ("tune-train", "epochs=2", "epochs=1")):
                self.assertIn(old_text, cells[cell].source)
                cells[cell].source = cells[cell].source.replace(old_text, new_text)
            self.assertTrue(cells["train"].source.startswith("#pragma taas --gpus 2 --cpus auto\n"))

        cells = run_notebook("resnet_photos.ipynb", self.tmp.name, shorter)
        self.assertIn("ImageFolder", result(cells["data"]))
        self.assertIn("image/png", cells["show"].outputs[0]["data"])
        out = taastest.stream_of(cells["train"])
        self.assertIn("plan: 1 machine × 2 GPUs", out)
        self.assertRegex(out, r"done: 1 epoch, \d+ steps on 2 ranks")
        self.assertTrue(result(cells["train"]).startswith("History (1 epoch)"))
        self.assertEqual(accuracy(cells["evaluate"])[1], 100)
        self.assertGreater(os.path.getsize(os.path.join(self.tmp.name, "photos_resnet18.safetensors")), 44000000)
        self.assertIn("2,052", result(cells["tune"]))  # the parameters that train: the new head's
        self.assertTrue(result(cells["tune-train"]).startswith("History (1 epoch)"))
        self.assertEqual(accuracy(cells["tune-evaluate"])[1], 100)


    @unittest.skipUnless(os.path.isfile(FORTUNES), "Debian's fortunes is not installed")
    def test_gpt_on_fortunes(self):
        def shorter(cells):
            self.assertIn("epochs=5", cells["train"].source)
            cells["train"].source = cells["train"].source.replace("epochs=5", "epochs=2")
            self.assertTrue(cells["train"].source.startswith("#pragma taas --gpus 1 --cpus 1\n"))

        # no GPT-2 at hand, whatever this machine's own cache holds: the fine-tuning cell says so
        with unittest.mock.patch.dict(os.environ, {"HF_HUB_CACHE": os.path.join(self.tmp.name, "empty-hub")}):
            cells = run_notebook("gpt_fortunes.ipynb", self.tmp.name, shorter, may_fail=("finetune",))
        self.assertIn("Dataset TextFile", result(cells["data"]))
        summary = result(cells["model"])
        self.assertIn("GPT2LMHeadModel", summary)
        self.assertIn("GPT2Block", summary)
        out = taastest.stream_of(cells["train"])
        self.assertIn("plan: 1 machine × 1 GPU, 1 loader worker", out)  # the windows streamed to the rank
        self.assertRegex(out, r"done: 2 epochs, \d+ steps on 1 rank")
        hist = result(cells["train"])
        self.assertTrue(hist.startswith("History (2 epochs)"), hist)
        rows = re.findall(r"^ +(\d) +([0-9.]+) +([0-9.]+) +([0-9.]+) ", hist, re.M)
        self.assertEqual(len(rows), 2, hist)
        self.assertLess(float(rows[-1][2]), 3.0, hist)  # the bytes' uniform guess is ln 256 = 5.55
        m = re.fullmatch(r"Evaluation\(loss=([0-9.]+), accuracy=([0-9.]+), samples=(\d+)\)", result(cells["evaluate"]))
        self.assertTrue(m, result(cells["evaluate"]))
        self.assertLess(float(m.group(1)), 3.0)
        self.assertGreater(os.path.getsize(os.path.join(self.tmp.name, "fortunes_gpt.safetensors")), 3000000)
        printed = taastest.stream_of(cells["generate"])
        self.assertGreaterEqual(len(printed), 250, printed)  # 300 bytes of text, some of them multi-byte
        # the display's text after each validation
        shown = [o for o in cells["train"].outputs if o["output_type"] in ("display_data", "update_display_data")]
        self.assertIn("sample after epoch 2:", shown[-1]["data"]["text/plain"])
        err = [o for o in cells["finetune"].outputs if o["output_type"] == "error"]
        self.assertEqual(len(err), 1, cells["finetune"].outputs)
        self.assertEqual(err[0]["ename"], "TaasIOError")
        self.assertIn("no GPT-2 'gpt2' at hand", err[0]["evalue"])
        self.assertIn("taas downloads nothing", err[0]["evalue"])


if __name__ == "__main__":
    unittest.main()
