"""Numbers for the fixtures that compare taas with PyTorch (tests/gen_resnet_ref.py,
tests/gen_gpt2_ref.py): a formula both sides fill tensors from, the summary a fixture keeps of a
tensor, and the batch moved by one ulp that probes how far float32 rounding can move each number."""
import math

import numpy as np
import torch

SAMPLES = 16
PERTURBED = 8  # float32 runs on the batch moved by one ulp, beside the one on the batch itself


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
