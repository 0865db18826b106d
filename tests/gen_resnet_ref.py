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

import os
import sys

import numpy as np
import torch
import torch.nn as nn
from torchvision.models import resnet18, resnet50
from torchvision.models.resnet import BasicBlock, Bottleneck

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ref_numbers import PERTURBED, fill, perturbed, summary, unit  # noqa: E402
from torch_spec import spec  # noqa: E402

INPUT = 100000  # the batch is the formula's tensor INPUT + i, times 2 (kinks_clear picks i)


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
