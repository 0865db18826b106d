#!/usr/bin/python3
"""Reference values for tests/unit/test_{loss,optim,sched}.c, from real PyTorch 1.13.

Writes tests/data/optim/{loss,optim,sched}.json. Run it with Debian's python3-torch:

    /usr/bin/python3 tests/gen_optim_ref.py

The fixtures are committed; the C tests do not need torch.
- loss.json: NLLLoss, CrossEntropyLoss (label_smoothing) and MSELoss, mean reduction:
  inputs, targets, the loss and the gradient w.r.t. the input; the NLLLoss and
  CrossEntropyLoss cases with an "ignore_index" (absent: torch's -100, which no target
  there is) have targets equal to it, some out of [0, C); where every target is ignored,
  torch's loss is nan, written as null (JSON has no nan).
- optim.json: each optimizer configuration runs 20 steps on a linear least-squares model
  loss = mean((X @ w + b - y)^2) with fixed X, y (parameters [w..., b] in one buffer);
  the loss before each step and the final parameters are recorded.
- sched.json: each scheduler's get_last_lr() after each scheduler.step().
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "optim")


def fl(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def gen_loss():
    g = torch.Generator().manual_seed(1)
    cases = []
    N, C = 5, 4
    logits = torch.randn(N, C, generator=g)
    target = torch.tensor([0, 3, 1, 2, 3])
    logp = torch.log_softmax(logits, 1).detach().requires_grad_(True)
    loss = torch.nn.NLLLoss()(logp, target)
    loss.backward()
    cases.append({"kind": "nll", "n": N, "c": C, "input": fl(logp), "target": target.tolist(),
                  "loss": float(loss), "grad": fl(logp.grad)})
    for ls in (0.0, 0.1, 0.35):
        x = logits.clone().requires_grad_(True)
        loss = torch.nn.CrossEntropyLoss(label_smoothing=ls)(x, target)
        loss.backward()
        cases.append({"kind": "cross_entropy", "n": N, "c": C, "label_smoothing": ls,
                      "input": fl(x), "target": target.tolist(), "loss": float(loss),
                      "grad": fl(x.grad)})
    # ignore_index: class 1 (two of the targets), with and without smoothing; -1 (a target
    # out of range that is not checked); every target ignored (loss nan, gradient 0)
    ignored = torch.tensor([1, 3, 1, 2, 0])
    for kind, ii, tgt, ls in (("nll", 1, ignored, 0.0), ("cross_entropy", 1, ignored, 0.0),
                              ("cross_entropy", 1, ignored, 0.1),
                              ("nll", -1, torch.tensor([0, -1, 1, -1, 3]), 0.0),
                              ("cross_entropy", -1, torch.tensor([-1, 2, 3, 0, -1]), 0.35),
                              ("nll", 2, torch.full((N,), 2), 0.0),
                              ("cross_entropy", 2, torch.full((N,), 2), 0.1)):
        if kind == "nll":
            x = torch.log_softmax(logits, 1).detach().requires_grad_(True)
            loss = torch.nn.NLLLoss(ignore_index=ii)(x, tgt)
        else:
            x = logits.clone().requires_grad_(True)
            loss = torch.nn.CrossEntropyLoss(ignore_index=ii, label_smoothing=ls)(x, tgt)
        loss.backward()
        case = {"kind": kind, "n": N, "c": C, "ignore_index": ii}
        if kind == "cross_entropy":
            case["label_smoothing"] = ls
        value = float(loss)
        assert (value != value) == bool((tgt == ii).all())  # nan exactly when all are ignored
        case.update({"input": fl(x), "target": tgt.tolist(), "loss": None if value != value else value,
                     "grad": fl(x.grad)})
        cases.append(case)
    a = torch.randn(3, 7, generator=g).requires_grad_(True)
    b = torch.randn(3, 7, generator=g)
    loss = torch.nn.MSELoss()(a, b)
    loss.backward()
    cases.append({"kind": "mse", "n": 21, "input": fl(a), "target_values": fl(b),
                  "loss": float(loss), "grad": fl(a.grad)})
    return cases


OPTIMS = [
    ("sgd", {"lr": 0.05}),
    ("sgd", {"lr": 0.05, "momentum": 0.9}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    ("sgd", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.05}),
    ("adam", {"lr": 0.05}),
    ("adam", {"lr": 0.03, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}),
    ("adam", {"lr": 0.05, "amsgrad": True, "weight_decay": 0.01}),
    ("adamw", {"lr": 0.05}),
    ("adamw", {"lr": 0.05, "betas": (0.85, 0.99), "weight_decay": 0.1, "amsgrad": True}),
    ("adadelta", {"lr": 1.0}),
    ("adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.05}),
    ("rmsprop", {"lr": 0.01}),
    ("rmsprop", {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.02}),
    ("rmsprop", {"lr": 0.005, "momentum": 0.7, "eps": 1e-6}),
]
CLS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
       "adadelta": torch.optim.Adadelta, "rmsprop": torch.optim.RMSprop}


def gen_optim():
    g = torch.Generator().manual_seed(2)
    N, D = 8, 3
    X = torch.randn(N, D, generator=g)
    y = torch.randn(N, generator=g)
    w0 = torch.randn(D, generator=g)
    b0 = torch.randn(1, generator=g)
    cases = []
    for name, opts in OPTIMS:
        w = w0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        opt = CLS[name]([w, b], **opts)
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = torch.mean((X @ w + b - y) ** 2)
            loss.backward()
            losses.append(float(loss))
            opt.step()
        o = {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()}
        cases.append({"optimizer": name, "options": o, "losses": losses,
                      "final": fl(w) + fl(b)})
    return {"n": N, "d": D, "X": fl(X), "y": fl(y), "init": fl(w0) + fl(b0), "cases": cases}


def momentum_of(group):
    return group["betas"][0] if "betas" in group else group.get("momentum", 0.0)


def run_sched(make, steps, opt_kw=None, want_momentum=False, adam=False):
    p = torch.zeros(1, requires_grad=True)
    opt = (torch.optim.Adam if adam else torch.optim.SGD)([p], **(opt_kw or {"lr": 0.1}))
    s = make(opt)
    lrs = [s.get_last_lr()[0]]
    moms = [momentum_of(opt.param_groups[0])]
    for _ in range(steps):
        opt.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
        moms.append(momentum_of(opt.param_groups[0]))
    return (lrs, moms) if want_momentum else lrs


def gen_sched():
    S = torch.optim.lr_scheduler
    cases = []
    cases.append({"kind": "step", "lr": 0.1, "step_size": 3, "gamma": 0.5,
                  "lrs": run_sched(lambda o: S.StepLR(o, 3, 0.5), 20)})
    cases.append({"kind": "multistep", "lr": 0.1, "milestones": [2, 5, 5, 11], "gamma": 0.3,
                  "lrs": run_sched(lambda o: S.MultiStepLR(o, [2, 5, 5, 11], 0.3), 20)})
    cases.append({"kind": "exponential", "lr": 0.1, "gamma": 0.9,
                  "lrs": run_sched(lambda o: S.ExponentialLR(o, 0.9), 30)})
    for T, eta in ((10, 0.0), (7, 0.01)):
        cases.append({"kind": "cosine", "lr": 0.1, "t_max": T, "eta_min": eta,
                      "lrs": run_sched(lambda o: S.CosineAnnealingLR(o, T, eta), 40)})
    for total, pct, mx in ((100, 0.3, 0.1), (37, 0.25, 0.5)):
        # SGD with momentum, so that the cycled momentum (0.95 -> 0.85 -> 0.95) is recorded too
        lrs, moms = run_sched(lambda o: S.OneCycleLR(o, mx, total_steps=total, pct_start=pct),
                              total - 1, {"lr": 0.1, "momentum": 0.9}, True)
        cases.append({"kind": "onecycle", "max_lr": mx, "total_steps": total, "pct_start": pct,
                      "lrs": lrs, "momentums": moms})
    # Adam: the cycled momentum is beta1; non-default div factors and momentum range
    lrs, moms = run_sched(lambda o: S.OneCycleLR(o, 0.01, total_steps=50, pct_start=0.4,
                                                 div_factor=10.0, final_div_factor=100.0,
                                                 base_momentum=0.8, max_momentum=0.9),
                          49, {"lr": 0.001}, True, adam=True)
    cases.append({"kind": "onecycle", "max_lr": 0.01, "total_steps": 50, "pct_start": 0.4,
                  "div_factor": 10.0, "final_div_factor": 100.0, "base_momentum": 0.8,
                  "max_momentum": 0.9, "lrs": lrs, "momentums": moms})
    for start, end, total in ((0.25, 1.0, 6), (1.0, 0.1, 8)):
        cases.append({"kind": "linear", "lr": 0.1, "start_factor": start, "end_factor": end,
                      "total_iters": total,
                      "lrs": run_sched(lambda o: S.LinearLR(o, start, end, total), 20)})
    # warmup then cosine (nanoGPT's recipe, per step), and three in a row
    warm = {"kind": "linear", "lr": 0.1, "start_factor": 0.01, "end_factor": 1.0, "total_iters": 5}
    cos = {"kind": "cosine", "lr": 0.1, "t_max": 15, "eta_min": 0.001}
    cases.append({"kind": "sequential", "lr": 0.1, "parts": [warm, cos], "milestones": [5],
                  "lrs": run_sched(lambda o: S.SequentialLR(
                      o, [S.LinearLR(o, 0.01, 1.0, 5), S.CosineAnnealingLR(o, 15, 0.001)], [5]), 30)})
    parts = [{"kind": "linear", "lr": 0.1, "start_factor": 0.1, "end_factor": 1.0, "total_iters": 3},
             {"kind": "step", "lr": 0.1, "step_size": 4, "gamma": 0.5},
             {"kind": "exponential", "lr": 0.1, "gamma": 0.9}]
    cases.append({"kind": "sequential", "lr": 0.1, "parts": parts, "milestones": [3, 10],
                  "lrs": run_sched(lambda o: S.SequentialLR(
                      o, [S.LinearLR(o, 0.1, 1.0, 3), S.StepLR(o, 4, 0.5), S.ExponentialLR(o, 0.9)],
                      [3, 10]), 25)})
    return cases


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in (("loss", gen_loss()), ("optim", gen_optim()), ("sched", gen_sched())):
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
