"""Datasets and DataLoaders in the notebook, through a real kernel and jupyter_client: their
displays (text/plain and a text/html table from taas-worker probe), len() for every dataset
kind, show() as a PNG grid with a text fallback, the worker's errors as the cell's error,
interrupting show() (by signal and by message) with no taas-worker left behind, and a
kernel that cannot find taas-worker. Data: Debian's Fashion-MNIST and .npy files written
here with a few lines of Python (no numpy)."""

import base64
import json
import math
import os
import shutil
import struct
import subprocess
import tempfile
import unittest
import zlib

import taastest
from taastest import error_of, only, result_text, traceback_text

FASHION = "/usr/share/datasets/fashion-mnist"
CLASSES = ("T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag, "
           "Ankle boot")


def write_npy(path, descr, shape, data):
    """numpy.save's format 1.0: magic, version, header length, a dict padded to 64 bytes."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pad = (64 - (10 + len(head) + 1) % 64) % 64
    head = head + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + data)


def write_npy_dataset(folder, stem, n, h=5, w=7):
    images = os.path.join(folder, stem + "-images.npy")
    labels = os.path.join(folder, stem + "-labels.npy")
    write_npy(images, "|u1", (n, h, w), bytes((i * 7) % 256 for i in range(n * h * w)))
    write_npy(labels, "<i8", (n,), b"".join(struct.pack("<q", i % 4) for i in range(n)))
    return images, labels


def png_file(width, height, grey):
    """A grey 8-bit PNG (zlib and struct are all it takes)."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = b"".join(b"\x00" + grey[r * width:(r + 1) * width] for r in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def write_shards(folder, counts, width=6, height=4):
    """WebDataset shards shard-0.tar, shard-1.tar, ...: NNNNNN.png and NNNNNN.cls members."""
    import io
    import tarfile
    i = 0
    for s, n in enumerate(counts):
        with tarfile.open(os.path.join(folder, "shard-%d.tar" % s), "w") as tar:
            for _ in range(n):
                png = png_file(width, height, bytes((i + p) % 256 for p in range(width * height)))
                for ext, data in (("png", png), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo("%06d.%s" % (i, ext))
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                i += 1
    return os.path.join(folder, "shard-{0..%d}.tar" % (len(counts) - 1))


def png_chunks(data):
    """(type, body) of every chunk of a PNG file, CRCs checked; asserts the signature."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    pos, chunks = 8, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc, = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, "bad CRC in chunk %r" % kind
        chunks.append((kind, body))
        pos += 12 + length
    return chunks


class DataInTheNotebook(taastest.KernelCase):
    tmp_prefix = "taas-data-"

    def test_fashion_mnist_display(self):
        data = self.result("FashionMNIST(train=False)")
        self.assertEqual(data["text/plain"], "\n".join([
            "Dataset FashionMNIST",
            "    Number of datapoints: 10000",
            "    Root location: " + FASHION,
            "    Split: Test",
            "    Sample shape: (1, 28, 28)",
            "    Classes: 10 (%s)" % CLASSES,
            "    Source: " + FASHION]))
        html = data["text/html"]
        for cell in ("FashionMNIST</th>", ">Samples</th><td style=\"text-align:left\">10,000<",
                     ">Sample shape</th><td style=\"text-align:left\">(1, 28, 28)<",
                     ">Classes</th><td style=\"text-align:left\">10: " + CLASSES + "<",
                     "<code>" + FASHION + "</code>", ">Split</th><td style=\"text-align:left\">Test<"):
            self.assertIn(cell, html)

    def test_loader_display_and_len(self):
        data = self.result(
            "tf = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
            "train = DataLoader(FashionMNIST(train=True, transform=tf), batch_size=64, shuffle=True)\n"
            "train")
        text = data["text/plain"]
        self.assertTrue(text.startswith("DataLoader(batch_size=64, shuffle=True, "), text)
        self.assertIn("\n        Number of datapoints: 60000\n", text)
        self.assertIn("\n        Sample shape: (1, 28, 28)\n", text)
        self.assertTrue(text.endswith("\n    Batches per epoch: 938"), text)
        self.assertIn(">Batches per epoch</th><td style=\"text-align:left\">938<", data["text/html"])
        self.assertIn(">Batch size</th><td style=\"text-align:left\">64<", data["text/html"])
        self.assertEqual(result_text(self.ok("len(train)")), "938")
        for bs, drop in ((1000, False), (1000, True), (64, True), (7, False), (7, True)):
            want = 10000 // bs if drop else math.ceil(10000 / bs)
            code = "len(DataLoader(FashionMNIST(train=False), batch_size=%d, drop_last=%s))" % (bs, drop)
            self.assertEqual(result_text(self.ok(code)), str(want), code)

    def test_npy_dataset(self):
        images, labels = write_npy_dataset(self.tmp.name, "npy", 23)
        data = self.result("ds = NpyDataset(%r, %r)\nds" % (images, labels))
        text = data["text/plain"]
        self.assertIn("\n    Number of datapoints: 23\n", text)
        self.assertIn("\n    Sample shape: (1, 5, 7)", text)
        self.assertIn(">Samples</th><td style=\"text-align:left\">23<", data["text/html"])
        self.assertEqual(result_text(self.ok("len(ds)")), "23")
        for bs in (1, 2, 5, 10, 23, 24):
            for drop in (False, True):
                code = "len(DataLoader(ds, batch_size=%d, drop_last=%s))" % (bs, drop)
                want = 23 // bs if drop else math.ceil(23 / bs)
                self.assertEqual(result_text(self.ok(code)), str(want), code)
        loader = self.result("DataLoader(ds, batch_size=10, drop_last=True)")["text/plain"]
        self.assertTrue(loader.endswith("\n    Batches per epoch: 2"), loader)
        # the files change: len() reads them again
        write_npy_dataset(self.tmp.name, "npy", 41)
        self.assertEqual(result_text(self.ok("len(ds)")), "41")

    def test_webdataset_without_length(self):
        urls = write_shards(self.tmp.name, (5, 4))
        data = self.result("wds = WebDataset(%r)\nwds" % urls)
        text = data["text/plain"]
        self.assertIn("\n    Number of datapoints: 9\n", text)
        self.assertIn("\n    Sample shape: (1, 4, 6) for sample 0; samples vary\n", text)
        self.assertEqual(result_text(self.ok("len(wds)")), "9")
        self.assertEqual(result_text(self.ok("len(DataLoader(wds, batch_size=4))")), "3")
        self.assertEqual(result_text(self.ok("len(DataLoader(wds, batch_size=4, drop_last=True))")), "2")
        # a transform that makes every size the same: the shape is the batch's
        text = self.result("WebDataset(%r, transform=Compose([Resize((8, 8)), ToTensor()]))" % urls)["text/plain"]
        self.assertIn("\n    Sample shape: (1, 8, 8)\n", text)
        # with length given, len() needs no worker and says what it was told
        self.assertEqual(result_text(self.ok("len(WebDataset(%r, length=100))" % urls)), "100")
        msgs = self.ok("show(wds, n=9)")
        self.assertIn("WebDataset: 9 of 9 samples", only(msgs, "display_data")[0]["content"]["data"]["text/plain"])

    def test_show_fashion_mnist(self):
        msgs = self.ok("show(FashionMNIST(train=False), n=16)")
        shown = only(msgs, "display_data")
        self.assertEqual(len(shown), 1, msgs)
        data = shown[0]["content"]["data"]
        self.assertEqual(set(data), {"image/png", "text/plain"})
        png = base64.b64decode(data["image/png"], validate=True)
        chunks = png_chunks(png)
        self.assertEqual(chunks[0][0], b"IHDR")
        self.assertEqual(chunks[-1][0], b"IEND")
        width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
        # 8 cells to a row, two rows of 28x28 images scaled 2x with a label under each
        self.assertEqual(depth, 8)
        self.assertEqual(colour, 0)  # grey
        self.assertTrue(8 * 56 < width < 8 * 90, width)
        self.assertTrue(2 * 56 < height < 2 * 90, height)
        raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
        self.assertEqual(len(raw), height * (width + 1))
        text = data["text/plain"]
        self.assertTrue(text.startswith("FashionMNIST: 16 of 10000 samples (the first 16), as decoded\n"),
                        text)
        self.assertIn("#0 Ankle boot | #1 Pullover | #2 Trouser", text)
        self.assertEqual(only(msgs, "execute_result"), [])

    def test_show_of_a_loader_with_a_seed(self):
        msgs = self.ok("show(DataLoader(FashionMNIST(train=False, transform=Compose([ToTensor(), "
                       "Normalize((0.5,), (0.5,))])), batch_size=4), n=3, seed=5)")
        text = only(msgs, "display_data")[0]["content"]["data"]["text/plain"]
        self.assertTrue(text.startswith("FashionMNIST: 3 of 10000 samples (seed 5), after the "
                                        "transform, Normalize undone"), text)

    def test_worker_errors_are_the_cells_errors(self):
        missing = os.path.join(self.tmp.name, "missing-images.npy")
        err = self.error("show(NpyDataset(%r, 'labels.npy'))" % missing, "TaasIOError")
        self.assertIn(missing, err["evalue"])
        self.assertIn("hint:", traceback_text(err))
        err = self.error("FashionMNIST(root='/nonexistent/fm')", "TaasIOError")
        self.assertIn("/nonexistent/fm", err["evalue"])
        err = self.error("len(NpyDataset(%r, 'labels.npy'))" % missing, "TaasIOError")
        self.assertIn(missing, err["evalue"])
        err = self.error("show(3)", "TaasTypeError")
        self.assertEqual(err["evalue"], "show() needs a dataset or a DataLoader, not int")
        self.assertEqual(taastest.worker_pids(self.k.pid), [])


class InterruptingShow(unittest.TestCase):
    """show() on storage that never answers (a FIFO: the worker blocks opening it) is
    interrupted; the worker, in its own process group, is killed and reaped."""

    kernel_name = taastest.KERNEL_NAME

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="taas-data-int-")
        cls.fifo = os.path.join(cls.tmp.name, "stalled.npy")
        os.mkfifo(cls.fifo)
        cls.k = taastest.Kernel(kernel_name=cls.kernel_name, cwd=cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.k.close()
        cls.tmp.cleanup()

    def interrupt(self):
        self.k.km.interrupt_kernel()

    def test_interrupt_show(self):
        msg_id = self.k.send("shell", "execute_request", {
            "code": "x = 1\nshow(NpyDataset(%r, %r))\nx = 2" % (self.fifo, self.fifo),
            "silent": False})
        workers = taastest.wait_until(lambda: taastest.worker_pids(self.k.pid), 10)
        self.assertEqual(len(workers), 1, "no taas-worker started")
        self.assertNotEqual(os.getpgid(workers[0]), os.getpgid(self.k.pid))
        # the kernel answers on control while the cell waits
        info = self.k.reply(self.k.send("control", "kernel_info_request"), "control", 5)
        self.assertEqual(info["content"]["status"], "ok")
        self.interrupt()
        reply = self.k.reply(msg_id, "shell", 30)  # the FIFO never gives data: only the interrupt ends it
        self.assertEqual(reply["content"]["status"], "error")
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.k.iopub(msg_id)
        self.assertFalse(taastest.pid_alive(workers[0]))
        self.assertEqual(taastest.worker_pids(self.k.pid), [])  # other tests may run workers meanwhile
        self.assertEqual(result_text(self.k.execute("x")[1]), "1")


class InterruptingShowByMessage(InterruptingShow):
    kernel_name = taastest.KERNEL_NAME_MSG_INTERRUPT

    def interrupt(self):
        reply = self.k.reply(self.k.send("control", "interrupt_request"), "control", 5)
        self.assertEqual(reply["content"]["status"], "ok")


class WithoutAWorker(unittest.TestCase):
    """A kernel with no taas-worker beside it or on PATH says so, and what to do."""

    def test_no_worker(self):
        tmp = tempfile.TemporaryDirectory(prefix="taas-noworker-")
        try:
            binary = os.path.join(tmp.name, "taas-kernel")
            shutil.copy(taastest.kernel_binary(), binary)
            root = taastest.install_test_kernelspec()
            spec_dir = os.path.join(root, "kernels", "taas-noworker")
            os.makedirs(spec_dir, exist_ok=True)
            with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
                json.dump({"argv": [binary, "-f", "{connection_file}"], "display_name": "taas",
                           "language": "taas", "interrupt_mode": "signal"}, f)
            env = dict(os.environ, PATH="/usr/bin:/bin")
            env.pop("TAAS_WORKER", None)
            k = taastest.Kernel(kernel_name="taas-noworker", cwd=tmp.name, env=env)
            try:
                reply, msgs = k.execute("show(FashionMNIST(train=False))")
                err = error_of(msgs)
                self.assertEqual(err["ename"], "TaasWorkerError")
                self.assertEqual(err["evalue"], "cannot find taas-worker: it is neither next to "
                                 "taas-kernel (in %s) nor on PATH" % tmp.name)
                self.assertIn("cmake --install", traceback_text(err))
                # what needs no data still works; a size is the files', which a worker reads
                self.assertEqual(result_text(k.execute(
                    "len(DataLoader(WebDataset('s.tar', length=60000), batch_size=100))")[1]), "600")
                self.assertEqual(error_of(k.execute("len(FashionMNIST())")[1])["ename"], "TaasWorkerError")
            finally:
                k.close()
        finally:
            tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
