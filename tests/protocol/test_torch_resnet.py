"""ResNets trained in a notebook cell against PyTorch doing the same (issue 28 §3 and §5), on a
small folder of JPEGs that examples/prepare_data.py makes from Debian's Fashion-MNIST (the
photo folder, here 28x28 pictures of its ten classes, cut to 16x16: small enough for the
sanitizer build). Both sides see the same pixels (taas decodes and resizes as PIL does,
docs/data.md), in the same order (taas's shuffled order, made again here as docs/data.md
"Sampling" describes it), start from the same weights (PyTorch's, written to safetensors with
scripts/pth_to_safetensors.py's encoder and given to taas with load()), with the same
optimizer, BatchNorm in train mode. The learning rates are small enough that SGD does not
amplify float rounding (docs/models.md, "Example").

- SameAccuracy: two epochs of a small CIFAR-style ResNet of BasicBlocks; the test accuracy
  of taas's evaluate() is within 0.5 points of PyTorch's.
- FineTuneResnet18: a seeded torchvision resnet18 goes through safetensors into taas's
  resnet18(); the backbone frozen, a new head (PyTorch's initial head, loaded with
  strict=False), one epoch, save(). torchvision loads the result with strict=True; every
  frozen tensor is byte for byte what was loaded, except BatchNorm's running statistics
  and num_batches_tracked, which train mode updates in PyTorch too (they must equal
  PyTorch's); and the accuracy is within 0.5 points of PyTorch's.

Needs Debian's python3-torch, python3-torchvision and python3-pil (scripts/deps.sh)."""

import importlib.util
import os
import re
import subprocess
import sys
import unittest

import torch
import torch.nn as nn
import torchvision
from torchvision import transforms as T
from torchvision.models.resnet import BasicBlock

import taastest
from test_torch_roundtrip import read_safetensors

FASHION = "/usr/share/datasets/fashion-mnist"
PREPARE = os.path.join(taastest.SOURCE_DIR, "examples", "prepare_data.py")
CONVERT = os.path.join(taastest.SOURCE_DIR, "scripts", "pth_to_safetensors.py")
MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
TRANSFORM = "Compose([Resize(18), CenterCrop(16), ToTensor(), Normalize(%r, %r)])" % (MEAN, STD)
BATCH = 32
TRAIN = 2000
TEST = 1000


def encode(state):
    """The safetensors bytes of a state_dict, by scripts/pth_to_safetensors.py's own code."""
    spec = importlib.util.spec_from_file_location("pth_to_safetensors", CONVERT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.encode(state)[0]


M32 = 0xFFFFFFFF


def philox(ctr, key):
    """Philox4x32-10 (dataloader/rng.c)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return [c0, c1, c2, c3]


def taas_order(n, seed, epoch):
    """The sample order of a shuffled taas DataLoader in epoch (0 first), as docs/data.md
    "Sampling" has it: Fisher-Yates from the last position down, each partner drawn without
    modulo bias (Lemire's multiply-and-reject) from Philox stream 0 keyed by (seed, epoch)."""
    words, block = [], 0

    def u32():
        nonlocal block
        if not words:
            words.extend(reversed(philox([block, epoch & 0xFFFFFF, 0, 0], [seed & M32, seed >> 32])))
            block += 1
        return words.pop()

    def below(m):
        x = u32() * m
        if (x & M32) < m:
            while (x & M32) < (-m % (1 << 32)) % m:
                x = u32() * m
        return x >> 32

    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = below(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def folder(root, split):
    tf = T.Compose([T.Resize(18), T.CenterCrop(16), T.ToTensor(), T.Normalize(MEAN, STD)])
    return torchvision.datasets.ImageFolder(os.path.join(root, split), transform=tf)


def torch_fit(model, root, epochs, optimizer):
    """PyTorch's loop: train mode, taas's order with seed 0, mean cross-entropy; the test accuracy."""
    data = folder(root, "train")
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        train = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=taas_order(len(data), 0, epoch))
        model.train()
        for x, y in train:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    model.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in torch.utils.data.DataLoader(folder(root, "test"), batch_size=100):
            right += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return right / total, total


def evaluation(data):
    m = re.fullmatch(r"Evaluation\(loss=[0-9.]+, accuracy=([0-9.]+), samples=(\d+)\)",
                     taastest.text(data["text/plain"]))
    assert m, data
    return float(m.group(1)), int(m.group(2))


class PhotoCase(taastest.KernelCase):
    """A kernel whose working folder holds photos/ (train 2000, test 1000 pictures of 28x28)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        torch.set_num_threads(2)
        cls.root = os.path.join(cls.tmp.name, "photos")
        subprocess.run([sys.executable, PREPARE, "photos", cls.root, "--train", str(TRAIN), "--test", str(TEST),
                        "--size", "28x28"], check=True, capture_output=True, timeout=120)

    def write(self, name, state):
        with open(os.path.join(self.tmp.name, name), "wb") as f:
            f.write(encode(state))

    def loaders(self):
        return ("train = DataLoader(ImageFolder('%s/train', transform=%s), batch_size=%d, shuffle=True)\n"
                "test = DataLoader(ImageFolder('%s/test', transform=%s), batch_size=100)\n"
                % (self.root, TRANSFORM, BATCH, self.root, TRANSFORM))

    def assertSameAccuracy(self, got, want):
        self.assertEqual(got[1], want[1])
        self.assertLessEqual(abs(got[0] - want[0]), 0.005, "taas %.4f, PyTorch %.4f" % (got[0], want[0]))
        self.assertGreater(want[0], 0.16)  # learnt something: 10 classes, the largest 12 %
        print("\n%s: accuracy taas %.4f, PyTorch %.4f (%d test images)" % (self.id(), got[0], want[0], got[1]),
              file=sys.stderr)


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class SameAccuracy(PhotoCase):
    tmp_prefix = "taas-resnet-acc-"

    def test_two_epochs_of_a_small_resnet(self):
        torch.manual_seed(5)
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            BasicBlock(8, 8),
            BasicBlock(8, 16, stride=2, downsample=nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False),
                                                                nn.BatchNorm2d(16))),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
        self.write("init.safetensors", model.state_dict())
        cell = self.loaders() + (
            "net = Sequential(Conv2d(3, 8, 3, padding=1, bias=False), BatchNorm2d(8), ReLU(), BasicBlock(8, 8),\n"
            "    BasicBlock(8, 16, stride=2, downsample=Sequential(Conv2d(8, 16, 1, stride=2, bias=False),"
            " BatchNorm2d(16))),\n"
            "    AdaptiveAvgPool2d(1), Flatten(), Linear(16, 10))\n"
            "load('init.safetensors', into=net)\n"
            "h = fit(net, train, epochs=2, loss=CrossEntropyLoss(),"
            " optimizer=SGD(lr=0.005, momentum=0.9, weight_decay=5e-4))\n"
            "evaluate(net, test, loss=CrossEntropyLoss())")
        got = evaluation(self.result(cell, timeout=300))
        want = torch_fit(model, self.root, 2, torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9,
                                                              weight_decay=5e-4))
        self.assertSameAccuracy(got, want)


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class FineTuneResnet18(PhotoCase):
    tmp_prefix = "taas-resnet-tune-"

    def test_a_frozen_torchvision_backbone_with_a_new_head(self):
        torch.manual_seed(3)
        backbone = torchvision.models.resnet18()
        with torch.no_grad():  # "pretrained": running statistics that are not the defaults
            backbone.train()
            backbone(torch.randn(8, 3, 32, 32))
        self.write("resnet18.safetensors", backbone.state_dict())
        model = torchvision.models.resnet18()
        model.load_state_dict(backbone.state_dict())
        model.requires_grad_(False)
        model.fc = nn.Linear(512, 10)
        self.write("head.safetensors", {"fc." + k: v for k, v in model.fc.state_dict().items()})
        loaded = {k: v.clone() for k, v in model.state_dict().items()}

        cell = self.loaders() + (
            "net = resnet18()\n"
            "load('resnet18.safetensors', into=net)\n"
            "net.requires_grad_(False)\n"
            "net.fc = Linear(512, 10)\n"
            "load('head.safetensors', into=net, strict=False)\n"
            "fit(net, train, epochs=1, loss=CrossEntropyLoss(), optimizer=SGD(lr=0.02, momentum=0.9))\n"
            "save(net, 'tuned.safetensors')\n"
            "evaluate(net, test, loss=CrossEntropyLoss())")
        got = evaluation(self.result(cell, timeout=300))
        want = torch_fit(model, self.root, 1, torch.optim.SGD(model.fc.parameters(), lr=0.02, momentum=0.9))

        tuned, meta = read_safetensors(os.path.join(self.tmp.name, "tuned.safetensors"))
        self.assertEqual(meta, {"format": "pt"})
        check = torchvision.models.resnet18(num_classes=10)
        check.load_state_dict(tuned, strict=True)  # raises on a missing, extra or misshapen key
        stats = re.compile(r".*\.(running_mean|running_var|num_batches_tracked)$")
        theirs = model.state_dict()
        moved = 0
        for key, t in tuned.items():
            if key.startswith("fc."):
                self.assertNotEqual(t.numpy().tobytes(), loaded[key].numpy().tobytes(), key)
            elif stats.match(key):  # train mode updates them in PyTorch too: to the same values
                self.assertTrue(torch.allclose(t, theirs[key], rtol=1e-4, atol=1e-5), key)
                moved += t.numpy().tobytes() != loaded[key].numpy().tobytes()
            else:  # frozen: exactly what was loaded
                self.assertEqual(t.dtype, loaded[key].dtype, key)
                self.assertEqual(t.numpy().tobytes(), loaded[key].numpy().tobytes(), key)
        self.assertEqual(moved, 3 * 20)  # 20 BatchNorms: mean, var and the count of batches
        for k in ("fc.weight", "fc.bias"):  # the head trained as PyTorch's did
            self.assertLess(float((tuned[k] - theirs[k]).abs().max()), 1e-4, k)
        # the one batch before, and the epoch's
        self.assertEqual(int(tuned["bn1.num_batches_tracked"]), 1 + -(-TRAIN // BATCH))
        self.assertSameAccuracy(got, want)


if __name__ == "__main__":
    unittest.main()
