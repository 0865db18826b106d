#!/usr/bin/python3
"""Writes tests/data/models/modules_ref.json for tests/unit/test_modules.c: cells that build
and change models (torchvision's ResNets and their parts, attribute and item access and
assignment, requires_grad_), each with what PyTorch 1.13 and torchvision print for the value
of its last line and its parameter counts (sum of numel over parameters(), and over those
that require grad). The cells are written so that the same text runs in a taas cell and
here. Needs torch and torchvision; run /usr/bin/python3 tests/gen_modules_ref.py from the
repository root."""
import json

import torch.nn as nn
import torchvision
import torchvision.models as models
from torchvision.models.resnet import BasicBlock, Bottleneck

CELLS = [
    "nn.AdaptiveAvgPool2d(1)",
    "nn.AdaptiveAvgPool2d((1, 1))",
    "nn.AdaptiveAvgPool2d((7, 5))",
    "nn.Identity(54, unused_argument1=0.1)",
    "BasicBlock(64, 64)",
    "BasicBlock(64, 128, stride=2, downsample=nn.Sequential(nn.Conv2d(64, 128, 1, stride=2, bias=False), "
    "nn.BatchNorm2d(128)))",
    "Bottleneck(256, 64)",
    "Bottleneck(64, 64, stride=2, groups=32, base_width=4, dilation=2, "
    "downsample=nn.Sequential(nn.Conv2d(64, 256, 1, stride=2, bias=False), nn.BatchNorm2d(256)))",
    "torchvision.models.resnet18()",
    "models.resnet34(num_classes=10)",
    "models.resnet50()",
    "models.resnet50(groups=32, width_per_group=4, num_classes=100)",
    "models.resnet18(zero_init_residual=True).layer4",
    "net = models.resnet18()\nnet.layer1[0].conv1",
    "net = models.resnet18()\nnet.layer4[-1]",
    "net = models.resnet18()\nnet.fc.in_features",
    "net = models.resnet50()\nnet.layer2[0].downsample[1]",
    "net = models.resnet18()\nnet.fc = nn.Linear(net.fc.in_features, 10)\nnet",
    "net = models.resnet18()\nnet.requires_grad_(False)\nnet.fc = nn.Linear(512, 10)\nnet",
    "net = models.resnet18()\nnet.requires_grad_(False)\nnet.layer4.requires_grad_(True)\nnet",
    "net = models.resnet18()\nnet.layer4[1] = BasicBlock(512, 512)\nnet.layer4",
    "net = models.resnet18()\nnet.avgpool = nn.Identity()\nnet.fc = nn.Identity()\nnet",
    "net = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))\n"
    "net[-1] = nn.Linear(32, 3)\nnet[0].requires_grad_(False)\nnet[1].requires_grad_(False)\nnet",
    "net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), "
    "BasicBlock(64, 64), BasicBlock(64, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))\nnet",
]


def run(cell):
    env = {"nn": nn, "torchvision": torchvision, "models": models, "BasicBlock": BasicBlock,
           "Bottleneck": Bottleneck}
    *stmts, last = cell.split("\n")
    for s in stmts:
        exec(s, env)
    v = eval(last, env)
    out = {"cell": cell, "repr": repr(v)}
    if isinstance(v, nn.Module):
        ps = list(v.parameters())
        out["total"] = sum(p.numel() for p in ps)
        out["trainable"] = sum(p.numel() for p in ps if p.requires_grad)
    return out


with open("tests/data/models/modules_ref.json", "w") as f:
    json.dump({"torch": __import__("torch").__version__, "torchvision": torchvision.__version__,
               "cells": [run(c) for c in CELLS]}, f, indent=1)
    f.write("\n")
