#!/usr/bin/python3
"""Writes tests/data/model/ref.json for tests/unit/test_model.c: a small Sequential's spec
and weights, a batch, its logits, NLL loss and parameter gradients, then 20 steps of SGD
(momentum) and Adam on that batch with the losses and final state. The Linear before
BatchNorm has no bias: its gradient is zero up to rounding, which Adam would amplify. Needs torch; run
/usr/bin/python3 tests/gen_model_ref.py from the repository root."""
import json
import torch
import torch.nn as nn

torch.manual_seed(7)
N, C, H, W, K = 8, 1, 8, 8, 5


def make():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(64, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, K),
        nn.LogSoftmax(dim=1))


SPEC = {"type": "Sequential", "layers": [
    {"type": "Conv2d", "in_channels": 1, "out_channels": 4, "kernel_size": [3, 3], "stride": [1, 1],
     "padding": [1, 1], "dilation": [1, 1], "groups": 1, "bias": True, "padding_mode": "zeros"},
    {"type": "ReLU", "inplace": False},
    {"type": "MaxPool2d", "kernel_size": [2, 2], "stride": None, "padding": [0, 0], "dilation": [1, 1],
     "return_indices": False, "ceil_mode": False},
    {"type": "Flatten", "start_dim": 1, "end_dim": -1},
    {"type": "LazyLinear", "out_features": 16, "bias": False},
    {"type": "BatchNorm1d", "num_features": 16, "eps": 1e-05, "momentum": 0.1, "affine": True,
     "track_running_stats": True},
    {"type": "ReLU", "inplace": False},
    {"type": "Dropout", "p": 0.0, "inplace": False},
    {"type": "Linear", "in_features": 16, "out_features": K, "bias": True},
    {"type": "LogSoftmax", "dim": 1},
]}


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def state(model):
    return {k: ([int(v)] if v.dtype == torch.int64 else flat(v)) for k, v in model.state_dict().items()}


base = make()
init = {k: v.clone() for k, v in base.state_dict().items()}
x = torch.randn(N, C, H, W)
y = torch.randint(0, K, (N,))

m = make()
m.load_state_dict(init)
m.train()
out = m(x)
loss = nn.functional.nll_loss(out, y)
loss.backward()
ref = {
    "spec": SPEC, "input": [C, H, W], "n": N, "x": flat(x), "y": [int(v) for v in y],
    "init": state(base), "shapes": {k: list(v.shape) for k, v in base.state_dict().items()},
    "logits": flat(out), "loss": float(loss),
    "grads": {k: flat(p.grad) for k, p in m.named_parameters()},
}
m.eval()
ref["eval_logits"] = flat(m(x))

for name, ctor in (("sgd", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
                   ("adam", lambda p: torch.optim.Adam(p, lr=0.01))):
    m = make()
    m.load_state_dict(init)
    m.train()
    opt = ctor(m.parameters())
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = nn.functional.nll_loss(m(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    ref[name] = {"losses": losses, "final": state(m)}

with open("tests/data/model/ref.json", "w") as f:
    json.dump(ref, f)
