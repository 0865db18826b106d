#!/usr/bin/python3
"""Writes tests/data/resnet/*.json for tests/unit/test_resnet.c: one training step of
torchvision's resnet18 and resnet50, of a small CIFAR-style Sequential of BasicBlocks and of
grouped convolutions (a ResNeXt Bottleneck, a depthwise Conv2d),
in train mode and in eval mode, against which taas's graph core is compared.

A ResNet's weights are too many to commit, so both sides fill every state_dict tensor from the
same formula (fill() here, fill() in the test), and the batch too: element j of tensor k is a value of splitmix64's hash
of j and k (unit()), computed exactly in float64 and rounded once to float32. The fixture keeps the spec, the state_dict keys and shapes in order (the names
must be torchvision's), the batch, the logits and loss, and of every gradient, every parameter
after one SGD step (momentum 0.9, weight decay 1e-4) and every running statistic: the sum, the
sum of magnitudes and 16 elements at fixed places, computed in float64, with how far
torch's float32 computations of each are from it at most: on the batch, and on the batch with
each element moved one ulp up or down (8 patterns; perturbed()), so that a number that
rounding can move far, through a ReLU input within rounding of zero, is allowed that. The
batch is the formula's tensor 100000 + i times 2, the first i whose ReLU inputs stay clear
of zero (kinks_clear) and on which no perturbed run moves a number far beyond rounding. Needs torch and torchvision; run
/usr/bin/python3 tests/gen_resnet_ref.py from the repository root."""
import json
import math

import os
import sys

import numpy as np
import torch
import torch.nn as nn
from torchvision.models import resnet18, resnet50
from torchvision.models.resnet import BasicBlock, Bottleneck

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from torch_spec import spec  # noqa: E402

SAMPLES = 16
PERTURBED = 8  # float32 runs on the batch moved by one ulp, beside the one on the batch itself
INPUT = 100000  # the batch is the formula's tensor INPUT + i, times 2 (kinks_clear picks i)


def unit(k, n):
    """v in [-1, 1): splitmix64 of (j + (k + 1) * golden) for element j of tensor k, its top 53
    bits over 2^53 (test_resnet.c's rt_unit). A plain multiplicative hash makes periodic
    images, whose near-constant channels leave BatchNorm ill-conditioned."""
    z = np.arange(n, dtype=np.uint64) + np.uint64(((k + 1) * 0x9E3779B97F4A7C15) % (1 << 64))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / 9007199254740992.0 * 2.0 - 1.0


def fill(model):
    sd = model.state_dict()
    for k, (key, t) in enumerate(sd.items()):
        if t.dtype == torch.int64:
            t.zero_()
            continue
        v = unit(k, t.numel())
        leaf = key.rsplit(".", 1)[1]
        if t.dim() > 1:
            fan_in = t[0].numel()
            v = v * math.sqrt(3.0 / fan_in)
        elif leaf == "running_var":
            v = 1.0 + 0.25 * (v + 1.0)
        elif leaf == "weight":
            v = 1.0 + 0.25 * v
        else:  # bias, running_mean
            v = 0.25 * v
        t.copy_(torch.from_numpy(v.astype(np.float32)).reshape(t.shape))


def summary(t, t32s):
    """t's sum, sum of magnitudes and 16 elements (float64), and how far torch's float32
    computations of the same (PERTURBED + 1 of them) are from them at most: the test allows a
    few times that; and whether the perturbed ones stayed within rounding of the first."""
    f = t.detach().reshape(-1).double()
    n = f.numel()
    idx = [(i * 7919 + 13) % n for i in range(SAMPLES)]
    err = serr = 0.0
    for k, t32 in enumerate(t32s):
        g = t32.detach().reshape(-1).double()
        err = max(err, max(float((f[i] - g[i]).abs()) for i in idx))
        serr = max(serr, float((f.sum() - g.sum()).abs()), float((f.abs().sum() - g.abs().sum()).abs()))
        if k == 0:
            err0 = err
    # rounding moves a number by a few times its own error; a flipped ReLU moves it far more
    stable = err <= 20 * err0 + 1e-5 * float(f.abs().mean())
    return {"sum": float(f.sum()), "abs": float(f.abs().sum()), "at": idx, "v": [float(f[i]) for i in idx],
            "err": err, "serr": serr}, stable


def perturbed(x, p):
    """x with each element moved by one unit in the last place, up or down (a fixed pattern
    for p): float32 runs on these probe how far rounding anywhere, in any order of sums, can
    move each number, a ReLU input that lies within rounding of zero included, which flips
    in some of them and widens the allowance of the numbers it moves."""
    sign = torch.from_numpy(np.where(unit(1000 + p, x.numel()) < 0, -1.0, 1.0).astype(np.float32)).reshape(x.shape)
    return torch.nextafter(x, x + sign * torch.finfo(torch.float32).max)


def run(make, state, x, y, train, dtype):
    m = make()
    m.load_state_dict(state)
    m = m.to(dtype)
    m.train(train)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    logits = m(x.to(dtype))
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    grads = {key: p.grad.clone() for key, p in m.named_parameters()}
    opt.step()
    return logits.detach(), loss.detach(), grads, m.state_dict()


def kinks_clear(make, state, x):
    """No ReLU input with at most 32 values a channel (the deep layers, where BatchNorm over
    few values amplifies rounding) lies within 3e-6 of its RMS of zero in float64: there
    float32's rounding, torch's or taas's, could flip the ReLU and send that element's gradient
    elsewhere, a difference no tolerance on rounding covers."""
    seen = []
    m = make()
    m.load_state_dict(state)
    m = m.double()
    for mod in m.modules():
        if isinstance(mod, nn.ReLU):
            mod.register_forward_pre_hook(lambda mod, inp: seen.append(inp[0].detach().clone()))
    m.train()
    with torch.no_grad():
        m(x.double())
    for t in seen:
        if t.numel() // t.shape[1] <= 32 and float(t.abs().min()) < 3e-6 * float(t.pow(2).mean().sqrt()):
            return False
    return True


def step(make, c, h, w, n, k, seed):
    """The reference is float64; float32's distance from it (torch's own rounding, which a
    train-mode BatchNorm over few values amplifies, on the batch and on the batch moved by
    one ulp) is kept beside each number. The batch is the first whose ReLU inputs stay clear
    of zero (kinks_clear) and whose perturbed runs move no number far beyond rounding: a
    ReLU input within rounding of zero flips in some order of sums, and a number that one
    flip moves tests nothing but that order."""
    torch.manual_seed(seed)
    model = make()
    fill(model)
    state = model.state_dict()
    y = torch.randint(0, k, (n,))
    for index in range(INPUT, INPUT + 100):
        x = torch.from_numpy((2.0 * unit(index, n * c * h * w)).astype(np.float32)).reshape(n, c, h, w)
        if not kinks_clear(make, state, x):
            continue
        out = {"spec": spec(model), "input": [c, h, w], "input_index": index, "n": n, "y": [int(v) for v in y],
               "keys": [[key, list(t.shape)] for key, t in state.items()]}
        stable = True
        for mode in ["train", "eval"]:
            l64, s64, g64, a64 = run(make, state, x, y, mode == "train", torch.float64)
            r32 = [run(make, state, xp, y, mode == "train", torch.float32)
                   for xp in [x] + [perturbed(x, p) for p in range(PERTURBED)]]
            out[mode] = {"logits": [float(v) for v in l64.reshape(-1)],
                         "logits_err": max(float((l64 - r[0].double()).abs().max()) for r in r32),
                         "loss": float(s64), "loss_err": max(float(abs(float(s64) - float(r[1]))) for r in r32),
                         "grads": {}, "after": {}}
            for part, want, got in (("grads", g64, 2), ("after", a64, 3)):
                for key, t in want.items():
                    if t.dtype != torch.int64:
                        out[mode][part][key], ok = summary(t, [r[got][key] for r in r32])
                        stable = stable and ok
        if stable:
            return out
    raise RuntimeError("no batch keeps the ReLUs clear of zero")


def cifar():
    down = nn.Sequential(nn.Conv2d(16, 32, 1, stride=2, bias=False), nn.BatchNorm2d(32))
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                         BasicBlock(16, 16), BasicBlock(16, 32, stride=2, downsample=down),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def grouped():
    """A ResNeXt-style Bottleneck (groups 4, width 8) and a depthwise convolution."""
    down = nn.Sequential(nn.Conv2d(16, 32, 1, stride=2, bias=False), nn.BatchNorm2d(32))
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                         Bottleneck(16, 8, stride=2, downsample=down, groups=4, base_width=16),
                         nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def write(name, ref):
    with open(f"tests/data/resnet/{name}.json", "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


torch.set_num_threads(1)
write("cifar", step(cifar, 3, 16, 16, 8, 10, 1))
write("grouped", step(grouped, 3, 16, 16, 8, 10, 4))
write("resnet18", step(lambda: resnet18(num_classes=10), 3, 32, 32, 8, 10, 2))
write("resnet50", step(lambda: resnet50(num_classes=10), 3, 64, 64, 8, 10, 3))
