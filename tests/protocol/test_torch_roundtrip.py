"""Weights saved by taas load into PyTorch. A model with every kind of layer that has
tensors (Conv2d, BatchNorm2d, a LazyLinear, BatchNorm1d, Linear) and most that have none is
trained in a notebook cell for a few batches, so its BatchNorm statistics and
num_batches_tracked have moved, and saved with save(); the file loads into the equivalent
torch.nn.Sequential with load_state_dict(strict=True), and PyTorch's eval-mode logits equal
the training core's (tests/tools/forward.c) within 1e-4. Needs Debian's python3-torch,
which scripts/deps.sh installs; torch 1.13 has no safetensors module, so the file is read
with struct and json as the format's specification describes.

And the other way: a PyTorch state_dict saved with torch.save (.pth) goes through
scripts/pth_to_safetensors.py into a file that taas's load() takes as it is, and save() gives
the same tensors back, byte for byte; what the script refuses it names."""

import json
import os
import struct
import subprocess
import unittest

import numpy as np
import torch
import torch.nn as nn

import taastest

FASHION = "/usr/share/datasets/fashion-mnist"

CELL = """\
net = Sequential(
    Conv2d(1, 8, 3, padding=1), BatchNorm2d(8), ReLU(), MaxPool2d(2),
    Conv2d(8, 16, 3, stride=2), LeakyReLU(0.1), AvgPool2d(2), Dropout2d(0.1), Flatten(),
    LazyLinear(32), BatchNorm1d(32), GELU(), Dropout(0.2), Linear(32, 16), Tanh(),
    Linear(16, 10), LogSoftmax(dim=1))
train = DataLoader(FashionMNIST(root='%s', train=True, transform=Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])),
                   batch_size=32, shuffle=True)
fit(net, train, loss=NLLLoss(), optimizer=Adam(lr=0.01), units=640, seed=3)
save(net, 'net.safetensors')
""" % FASHION


def torch_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2), nn.LeakyReLU(0.1), nn.AvgPool2d(2), nn.Dropout2d(0.1), nn.Flatten(),
        nn.Linear(16 * 3 * 3, 32), nn.BatchNorm1d(32), nn.GELU(), nn.Dropout(0.2), nn.Linear(32, 16), nn.Tanh(),
        nn.Linear(16, 10), nn.LogSoftmax(dim=1))


def read_safetensors(path):
    """The file's tensors by name, from the 8-byte header size, the JSON header and the data."""
    dtypes = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        n, = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {}
    for key, e in header.items():
        begin, end = e["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=dtypes[e["dtype"]]).reshape(e["shape"])
        tensors[key] = torch.from_numpy(a.copy())
    return tensors, meta


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class TorchRoundTrip(taastest.KernelCase):
    tmp_prefix = "taas-torch-"

    def test_saved_weights_load_into_torch_with_the_same_logits(self):
        self.ok(CELL, timeout=120)
        path = os.path.join(self.tmp.name, "net.safetensors")
        state, meta = read_safetensors(path)
        self.assertEqual(meta, {"format": "pt"})
        model = torch_model()
        model.load_state_dict(state, strict=True)  # every key, no extra: raises otherwise
        self.assertEqual(list(state), sorted(model.state_dict()))
        for key, t in model.state_dict().items():
            self.assertEqual(t.dtype, state[key].dtype, key)
        self.assertEqual(int(state["1.num_batches_tracked"]), 20)  # 640 samples, batches of 32
        self.assertEqual(state["1.num_batches_tracked"].shape, torch.Size([]))
        self.assertFalse(torch.allclose(state["10.running_var"], torch.ones(32)))  # the statistics moved

        x = torch.from_numpy(np.random.default_rng(5).standard_normal((16, 1, 28, 28)).astype(np.float32))
        model.eval()
        with torch.no_grad():
            want = model(x).numpy()
        spec = os.path.join(self.tmp.name, "model.json")
        with open(spec, "w") as f:
            json.dump(self.model_spec(), f)
        inp, out = os.path.join(self.tmp.name, "x.f32"), os.path.join(self.tmp.name, "y.f32")
        x.numpy().tofile(inp)
        subprocess.run([os.environ["TAAS_FORWARD"], spec, path, inp, "16", "1", "28", "28", out], check=True,
                       timeout=60)
        got = np.fromfile(out, dtype=np.float32).reshape(16, 10)
        scale = max(1.0, float(np.abs(want).max()))
        self.assertLess(float(np.abs(got - want).max()) / scale, 1e-4)
        self.assertTrue((got.argmax(1) == want.argmax(1)).all())

    def model_spec(self):
        """CELL's model as a Sequential spec (docs/jobspec.md), for taas-test-forward."""
        L = lambda t, **kw: dict(type=t, **kw)
        return L("Sequential", layers=[
            L("Conv2d", in_channels=1, out_channels=8, kernel_size=3, padding=1),
            L("BatchNorm2d", num_features=8), L("ReLU"), L("MaxPool2d", kernel_size=2),
            L("Conv2d", in_channels=8, out_channels=16, kernel_size=3, stride=2),
            L("LeakyReLU", negative_slope=0.1), L("AvgPool2d", kernel_size=2), L("Dropout2d", p=0.1), L("Flatten"),
            L("LazyLinear", out_features=32), L("BatchNorm1d", num_features=32), L("GELU"), L("Dropout", p=0.2),
            L("Linear", in_features=32, out_features=16), L("Tanh"), L("Linear", in_features=16, out_features=10),
            L("LogSoftmax", dim=1)])


CONVERT = os.path.join(os.environ.get("TAAS_SOURCE_DIR", "../.."), "scripts", "pth_to_safetensors.py")

SMALL = """\
net = Sequential(Conv2d(1, 8, 3, padding=1), BatchNorm2d(8), ReLU(), MaxPool2d(2), Flatten(), Linear(1568, 10))
load('%s', into=net)
save(net, 'back.safetensors')
"""


def small_torch_model():
    torch.manual_seed(7)
    m = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(1568, 10))
    m.train()
    with torch.no_grad():  # statistics that moved, so that they are not the defaults
        m(torch.randn(4, 1, 28, 28))
    return m


class FromPth(taastest.KernelCase):
    tmp_prefix = "taas-pth-"

    def convert(self, pth, out, *extra):
        return subprocess.run(["/usr/bin/python3", CONVERT, pth, out, *extra], capture_output=True, text=True,
                              timeout=120)

    def test_a_state_dict_loads_into_taas_as_it_is(self):
        model = small_torch_model()
        want = model.state_dict()
        cases = {
            "plain": want,
            # a training checkpoint of a DataParallel model, in float64
            "ckpt": {"epoch": 3, "state_dict": {"module." + k: (v.double() if v.is_floating_point() else v)
                                                for k, v in want.items()}},
        }
        for name, obj in cases.items():
            with self.subTest(name):
                pth = os.path.join(self.tmp.name, name + ".pth")
                out = os.path.join(self.tmp.name, name + ".safetensors")
                torch.save(obj, pth)
                r = self.convert(pth, out)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("9 tensors", r.stdout)
                if name == "ckpt":
                    self.assertIn("under 'state_dict', without the prefix 'module.'; 8 floating tensors converted "
                                  "to float32", r.stdout)
                self.ok(SMALL % out, timeout=120)
                back, meta = read_safetensors(os.path.join(self.tmp.name, "back.safetensors"))
                self.assertEqual(sorted(back), sorted(want))
                for k, t in want.items():
                    self.assertEqual(back[k].dtype, t.dtype, k)
                    self.assertEqual(back[k].numpy().tobytes(), t.numpy().tobytes(), k)

    def test_what_it_refuses_it_names(self):
        model = small_torch_model()
        here = os.path.join(self.tmp.name, "refused")
        os.mkdir(here)
        whole = os.path.join(here, "whole.pth")
        torch.save(model, whole)  # a pickled module: code, not weights
        junk = os.path.join(here, "junk.pth")
        with open(junk, "w") as f:
            f.write("hello")
        nodict = os.path.join(here, "nodict.pth")
        torch.save({"epoch": 3, "weights": [1, 2]}, nodict)
        out = os.path.join(here, "out.safetensors")
        for pth, extra, says in [
                (whole, (), "Unsupported class torch.nn.modules.container.Sequential"),
                (junk, (), "is not a file torch.save wrote"),
                (nodict, (), "holds no state_dict"),
                (nodict, ("--key", "model"), "has no 'model'"),
                (os.path.join(here, "absent.pth"), (), "is not a file")]:
            with self.subTest(pth=os.path.basename(pth), extra=extra):
                r = self.convert(pth, out, *extra)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(says, r.stderr)
                self.assertIn("pth_to_safetensors: " + pth, r.stderr)
                self.assertFalse(os.path.exists(out))  # nothing written, not even in part
        self.assertEqual(sorted(os.listdir(here)), ["junk.pth", "nodict.pth", "whole.pth"])


# Fine-tuning (issue 28): a backbone trained in PyTorch, a new head in taas.
TUNED = "Sequential(Flatten(), Linear(784, 32), ReLU(), Dropout(0.1), Linear(32, 10), LogSoftmax(dim=1))"
TRAIN = ("train = DataLoader(FashionMNIST(root='%s', train=True, transform=ToTensor()), batch_size=32)\n" % FASHION)
STILL = "fit(%s, train, loss=NLLLoss(), optimizer=SGD(lr=0.0), units=64, seed=3)\nsave(%s, '%s')"


def tuned_torch_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10),
                         nn.LogSoftmax(dim=1))


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class FineTune(taastest.KernelCase):
    """load(path, into=net, strict=False) as torch's load_state_dict(sd, strict=False): the keys
    both have are loaded, the returned keys are torch's, the rest keep the model's weights or
    (none yet) the seed's initialisation."""
    tmp_prefix = "taas-tune-"

    def backbone(self):
        """A torch model whose head (3.*) is at another index than the tuned one's (4.*), as a
        safetensors file through scripts/pth_to_safetensors.py; its tensors."""
        torch.manual_seed(11)
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10), nn.LogSoftmax(dim=1))
        pth, out = os.path.join(self.tmp.name, "b.pth"), os.path.join(self.tmp.name, "backbone.safetensors")
        torch.save(m.state_dict(), pth)
        r = subprocess.run(["/usr/bin/python3", CONVERT, pth, out], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out, read_safetensors(out)[0]

    def tensors(self, name):
        return read_safetensors(os.path.join(self.tmp.name, name))

    def test_a_new_head_loads_as_in_torch(self):
        path, src = self.backbone()
        want = tuned_torch_model().load_state_dict(src, strict=False)
        self.assertEqual(want.missing_keys, ["4.weight", "4.bias"])
        got = taastest.result_text(self.ok(TRAIN + "net = %s\nload('%s', into=net, strict=False)" % (TUNED, path),
                                           timeout=60))
        self.assertEqual(got, repr(want))
        # partial weights: nothing whole to save yet
        e = self.error("save(net, 'early.safetensors')", "TaasValueError")
        self.assertIn("net has partial weights", e["evalue"])
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "early.safetensors")))
        # evaluate() takes them: the head initialised from its seed, as a fresh torch head is random
        self.assertTrue(taastest.result_text(self.ok("evaluate(net, train, units=64)", timeout=120))
                        .startswith("Evaluation(loss="))
        # with lr=0 the loaded tensors stay as they were read, the head as the seed made it
        self.ok(STILL % ("net", "net", "tuned.safetensors"), timeout=120)
        self.ok("fresh = %s\n" % TUNED + STILL % ("fresh", "fresh", "fresh.safetensors"), timeout=120)
        tuned, meta = self.tensors("tuned.safetensors")
        fresh, _ = self.tensors("fresh.safetensors")
        self.assertEqual(meta, {"format": "pt"})
        self.assertEqual(sorted(tuned), ["1.bias", "1.weight", "4.bias", "4.weight"])
        for k in ("1.weight", "1.bias"):
            self.assertEqual(tuned[k].numpy().tobytes(), src[k].numpy().tobytes(), k)
            self.assertNotEqual(fresh[k].numpy().tobytes(), src[k].numpy().tobytes(), k)
        for k in ("4.weight", "4.bias"):
            self.assertEqual(tuned[k].numpy().tobytes(), fresh[k].numpy().tobytes(), k)
        # a model with weights keeps its own for the keys the file lacks: a merged file
        got = taastest.result_text(self.ok("load('%s', into=fresh, strict=False)\nsave(fresh, 'merged.safetensors')\n"
                                           "load('merged.safetensors', into=fresh)" % path))
        self.assertEqual(got, "<All keys matched successfully>")
        merged, meta = self.tensors("merged.safetensors")
        self.assertEqual(meta, {"format": "pt"})
        for k in merged:
            self.assertEqual(merged[k].numpy().tobytes(), (src if k[0] == "1" else fresh)[k].numpy().tobytes(), k)
        # and training moves them
        self.ok("fit(net, train, loss=NLLLoss(), optimizer=SGD(lr=0.1), units=64, seed=3)\n"
                "save(net, 'moved.safetensors')", timeout=120)
        moved, _ = self.tensors("moved.safetensors")
        for k in moved:
            self.assertNotEqual(moved[k].numpy().tobytes(), tuned[k].numpy().tobytes(), k)

    def test_what_does_not_fit_is_named(self):
        path, _ = self.backbone()
        # strict (the default): every key that differs, each kind named
        e = self.error("net = %s\nload('%s', into=net)" % (TUNED, path), "TaasValueError")
        self.assertIn("missing keys '4.weight', '4.bias'; unexpected keys '3.bias', '3.weight'", e["evalue"])
        # not strict: the keys both have must still fit, as torch's "size mismatch for 1.weight"
        e = self.error("narrow = Sequential(Flatten(), Linear(784, 16), ReLU(), Linear(16, 5))\n"
                       "load('%s', into=narrow, strict=False)" % path, "TaasValueError")
        self.assertIn("1.weight has shape [32, 784], the model expects [16, 784]", e["evalue"])
        self.error("load('%s', into=narrow, strict=0)" % path, "TaasTypeError")
        # nothing was attached by the failed loads
        self.error("save(narrow, 'n.safetensors')", "TaasValueError")


if __name__ == "__main__":
    unittest.main()
