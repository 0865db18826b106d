#!/usr/bin/python3
"""Writes the layer reference fixtures tests/data/layers/*.json with PyTorch (Debian's
python3-torch). Only needed to regenerate them; the C tests (tests/unit/test_layers.c)
read the committed files.

Inputs, parameters and the upstream gradient are random float32 values; torch runs the
layer in float64 on exactly those values, so the reference is the float32 input's exact
answer (the C code in float32 must come within 1e-4 relative of it). Every array is a
flat list in row-major (NCHW) order; its shape is given in "<name>_shape".

Usage: /usr/bin/python3 tests/gen_layer_ref.py
"""
import json
import os

import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "layers")
gen = torch.Generator().manual_seed(20261122)


def rnd(*shape):
    # float32 values, promoted to double for the computation
    return torch.randn(*shape, generator=gen, dtype=torch.float32).double()


def put(d, name, t):
    t = t.detach()
    d[name + "_shape"] = list(t.shape)
    d[name] = [float(v) for v in t.float().reshape(-1).tolist()]


def run(layer, x, d, params=()):
    """Forward, backward with a random upstream gradient; stores x, y, dy, dx, param grads."""
    x = x.clone().requires_grad_(True)
    y = layer(x)
    dy = rnd(*y.shape)
    y.backward(dy)
    put(d, "x", x)
    put(d, "y", y)
    put(d, "dy", dy)
    put(d, "dx", x.grad)
    for name, p in params:
        put(d, name, p)
        put(d, "d" + name, p.grad)
    return d


def randomize(layer):
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(rnd(*p.shape))
    return layer


def save(name, d):
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(d, f, separators=(",", ":"))
        f.write("\n")


def linear():
    m = randomize(nn.Linear(5, 4).double())
    save("linear", run(m, rnd(3, 5), {"in": 5, "out": 4},
                       [("weight", m.weight), ("bias", m.bias)]))


def conv(name, n, c, h, w, oc, k, s, p, groups=1, bias=True):
    """A convolution; "groups" is in the file when not 1, "bias" and "dbias" only with one."""
    m = randomize(nn.Conv2d(c, oc, k, stride=s, padding=p, groups=groups, bias=bias).double())
    cfg = {"n": n, "c": c, "h": h, "w": w, "oc": oc, "kh": k[0], "kw": k[1],
           "sh": s[0], "sw": s[1], "ph": p[0], "pw": p[1]}
    if groups != 1:
        cfg["groups"] = groups
    params = [("weight", m.weight)] + ([("bias", m.bias)] if bias else [])
    save(name, run(m, rnd(n, c, h, w), cfg, params))


def pool(name, cls, n, c, h, w, k, s, p):
    m = cls(k, stride=s, padding=p)
    cfg = {"n": n, "c": c, "h": h, "w": w, "kh": k[0], "kw": k[1],
           "sh": s[0], "sw": s[1], "ph": p[0], "pw": p[1]}
    save(name, run(m, rnd(n, c, h, w), cfg))


def adaptive_avgpool(name, n, c, h, w, oh, ow):
    m = nn.AdaptiveAvgPool2d((oh, ow))
    save(name, run(m, rnd(n, c, h, w), {"n": n, "c": c, "h": h, "w": w, "oh": oh, "ow": ow}))


def add(name, n):
    """A residual connection's sum y = a + b (its backward hands dy to both unchanged)."""
    a, b = rnd(n), rnd(n)
    d = {}
    put(d, "a", a)
    put(d, "b", b)
    put(d, "y", a + b)
    save(name, d)


def act(name, m, shape, **cfg):
    save(name, run(m, rnd(*shape), dict(cfg)))


def softmax(name, cls, shape):
    save(name, run(cls(dim=1), rnd(*shape), {}))


def batchnorm(name, cls, shape):
    c = shape[1]
    m = randomize(cls(c).double())
    with torch.no_grad():
        m.running_mean.copy_(rnd(c))
        m.running_var.copy_(rnd(c).abs() + 0.5)
    d = {"momentum": 0.1, "eps": 1e-5}
    put(d, "running_mean0", m.running_mean)
    put(d, "running_var0", m.running_var)
    m.train()
    run(m, rnd(*shape), d, [("gamma", m.weight), ("beta", m.bias)])
    put(d, "running_mean1", m.running_mean)
    put(d, "running_var1", m.running_var)
    # eval mode with the updated running stats: forward and backward on a fresh input
    m.eval()
    m.zero_grad()
    e = run(m, rnd(*shape), {}, [("gamma", m.weight), ("beta", m.bias)])
    for k in ("x", "y", "dy", "dx", "dgamma", "dbeta"):
        d["eval_" + k] = e[k]
    save(name, d)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_default_dtype(torch.float64)
    linear()
    conv("conv2d_basic", 3, 2, 7, 6, 4, (3, 3), (1, 1), (0, 0))
    conv("conv2d_strided", 3, 3, 8, 7, 5, (3, 2), (2, 1), (1, 2))
    pool("maxpool2d_k2", nn.MaxPool2d, 3, 2, 6, 7, (2, 2), (2, 2), (0, 0))
    pool("maxpool2d_k3p1", nn.MaxPool2d, 3, 2, 7, 6, (3, 3), (2, 2), (1, 1))
    pool("avgpool2d_k2", nn.AvgPool2d, 3, 2, 6, 7, (2, 2), (2, 2), (0, 0))
    pool("avgpool2d_k3p1", nn.AvgPool2d, 3, 2, 7, 6, (3, 3), (2, 2), (1, 1))
    act("relu", nn.ReLU(), (3, 4, 5))
    act("leaky_relu", nn.LeakyReLU(0.1), (3, 4, 5), slope=0.1)
    act("tanh", nn.Tanh(), (3, 4, 5))
    act("sigmoid", nn.Sigmoid(), (3, 4, 5))
    act("gelu", nn.GELU(), (3, 4, 5))
    softmax("softmax_2d", nn.Softmax, (3, 6))
    softmax("softmax_4d", nn.Softmax, (3, 4, 2, 3))
    softmax("log_softmax_2d", nn.LogSoftmax, (3, 6))
    softmax("log_softmax_4d", nn.LogSoftmax, (3, 4, 2, 3))
    batchnorm("batchnorm1d", nn.BatchNorm1d, (4, 5))
    batchnorm("batchnorm2d", nn.BatchNorm2d, (3, 4, 5, 5))
    # the training core's fast paths (appended last, so the files above keep their numbers):
    # contiguous im2col rows with zero padding, a 1x1 convolution that multiplies the image
    # itself, and 2x2 max pooling over rows of at least 8 outputs (odd sizes leave a row and
    # a column out)
    conv("conv2d_padded", 2, 3, 9, 20, 6, (3, 3), (1, 1), (1, 1))
    conv("conv2d_1x1", 2, 5, 4, 6, 3, (1, 1), (1, 1), (0, 0))
    pool("maxpool2d_k2_wide", nn.MaxPool2d, 2, 3, 5, 21, (2, 2), (2, 2), (0, 0))
    # the direct kernels' wide tiles: output channels past one tile (64 at AVX-512) and
    # whole 16 x 16 transposed blocks with a partial one beside; padding on one side only
    conv("conv2d_wide", 2, 5, 7, 9, 70, (3, 3), (1, 1), (1, 0))
    # what ResNets add: grouped convolutions (stride 1, where the direct kernels would run
    # without groups; strided; 1x1; depthwise, groups = C, with one and two outputs per
    # channel), with and without bias; AdaptiveAvgPool2d with bins that divide the input, do
    # not (overlapping), and repeat rows (output larger than the input); a residual sum
    conv("conv2d_groups2", 3, 4, 6, 7, 6, (3, 3), (1, 1), (1, 1), groups=2)
    conv("conv2d_groups2_strided_nobias", 2, 6, 8, 7, 4, (3, 2), (2, 1), (1, 0), groups=2, bias=False)
    conv("conv2d_groups2_1x1", 2, 4, 5, 6, 6, (1, 1), (1, 1), (0, 0), groups=2)
    conv("conv2d_depthwise", 2, 5, 9, 8, 5, (3, 3), (2, 2), (1, 1), groups=5)
    conv("conv2d_depthwise_x2_nobias", 2, 3, 6, 6, 6, (3, 3), (1, 1), (1, 1), groups=3, bias=False)
    adaptive_avgpool("adaptive_avgpool2d_7x5_3x2", 2, 3, 7, 5, 3, 2)
    adaptive_avgpool("adaptive_avgpool2d_6x6_3x3", 2, 3, 6, 6, 3, 3)
    adaptive_avgpool("adaptive_avgpool2d_4x4_1x1", 3, 4, 4, 4, 1, 1)
    adaptive_avgpool("adaptive_avgpool2d_5x5_7x7", 2, 2, 5, 5, 7, 7)
    add("add", 1000)


if __name__ == "__main__":
    main()
