#!/usr/bin/python3
"""Writes tests/data/gpt2/*.json for tests/unit/test_gpt2.c: one training step of a small GPT-2
and the fused causal attention alone, against which taas is compared.

Transformers is not among Debian 12's packages, so the reference GPT-2 is tests/lib/ref_gpt2.py,
written under Hugging Face's names and layout. Both sides fill every state_dict tensor from the same formula
(ref_numbers.fill), and the fixture keeps the config, the state_dict keys and shapes in order,
the token ids and targets, the logits and loss, a summary of every gradient, the gradients'
global norm, and what clip_grad_norm_(max_norm=1.0) and one step of AdamW (betas (0.9, 0.95),
weight decay 0.1 on the matmuls' weights only) change in every parameter (ref_numbers:
float64's numbers with float32's distance from them, on the batch and on the model's weights
moved by one ulp, since token ids cannot move).

The attention fixtures compare the fused op with PyTorch's scaled_dot_product_attention
(is_causal=True; torch 1.13's private one) at T = 1, 7, 64 and 256, forward and
backward, q, k and v from the formula. Needs torch; run /usr/bin/python3 tests/gen_gpt2_ref.py
from the repository root."""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ref_gpt2 import GPT2LMHeadModel, sdpa  # noqa: E402
from ref_numbers import PERTURBED, fill, perturbed, summary, unit  # noqa: E402


def moved(state, p):
    """The weights with each element one ulp up or down (ref_numbers.perturbed's pattern p),
    the tie kept: token ids cannot move, so the weights do."""
    out = {key: perturbed(t, p + 17 * k) for k, (key, t) in enumerate(state.items())}
    out["lm_head.weight"] = out["transformer.wte.weight"]
    return out


def groups(m):
    """nanoGPT's two AdamW groups with the issue's rule: weight decay on the matmuls' weights,
    none on biases, LayerNorm weights and the embeddings (wte, which is lm_head, and wpe)."""
    decay, rest = [], []
    for key, p in m.named_parameters():
        (decay if p.dim() >= 2 and not key.startswith(("transformer.wte.", "transformer.wpe.")) else rest).append(p)
    return [{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}]


def run(cfg, state, ids, y, dtype):
    m = GPT2LMHeadModel(cfg)
    m.load_state_dict(state)
    m = m.to(dtype)
    m.train()
    logits = m(ids)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    loss.backward()
    grads = {key: p.grad.clone() for key, p in m.named_parameters()}
    norm = torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
    opt = torch.optim.AdamW(groups(m), lr=LR, betas=(0.9, 0.95), eps=1e-8)
    before = {key: p.detach().clone() for key, p in m.named_parameters()}
    opt.step()
    update = {key: p.detach() - before[key] for key, p in m.named_parameters()}
    return logits.detach(), loss.detach(), grads, norm.detach(), update


def step(cfg, n, t, seed):
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(cfg)
    fill(model)
    state = model.state_dict()
    ids = torch.randint(0, cfg["vocab_size"], (n, t))
    y = torch.randint(0, cfg["vocab_size"], (n, t))
    l64, s64, g64, n64, a64 = run(cfg, state, ids, y, torch.float64)
    r32 = [run(cfg, s, ids, y, torch.float32) for s in [state] + [moved(state, p) for p in range(PERTURBED)]]
    out = {"config": cfg, "n": n, "t": t, "ids": ids.reshape(-1).tolist(), "y": y.reshape(-1).tolist(),
           "keys": [[key, list(v.shape)] for key, v in state.items()],
           "logits": summary(l64, [r[0] for r in r32])[0],
           "loss": float(s64), "loss_err": max(abs(float(s64) - float(r[1])) for r in r32), "grads": {}}
    # named_parameters() lists the tied weight once, as transformer.wte.weight
    for key, g in g64.items():
        out["grads"][key] = summary(g, [r[2][key] for r in r32])[0]
    # clip_grad_norm_(max_norm=1.0), then one step of AdamW with two groups
    out.update({"max_norm": MAX_NORM, "lr": LR, "weight_decay": WD, "grad_norm": float(n64),
                "grad_norm_err": max(abs(float(n64) - float(r[3])) for r in r32), "update": {}})
    for key, a in a64.items():
        out["update"][key] = summary(a, [r[4][key] for r in r32])[0]
    return out


def attention(n, h, t, d, index):
    """q, k, v (N, H, T, D) from the formula's tensors index, +1, +2; the output's and each
    input gradient's summary for an output gradient from tensor index + 3."""
    def tensor(k, dtype):
        return torch.from_numpy(unit(k, n * h * t * d).astype(np.float32)).reshape(n, h, t, d).to(dtype)

    def grads(dtype, shift):
        qkv = [tensor(index + i, dtype).requires_grad_() for i in range(3)]
        if shift is not None:
            qkv = [perturbed(z.detach(), shift + i).requires_grad_() for i, z in enumerate(qkv)]
        out = sdpa(*qkv)
        out.backward(tensor(index + 3, dtype))
        return [out.detach()] + [z.grad for z in qkv]

    want = grads(torch.float64, None)
    got = [grads(torch.float32, None)] + [grads(torch.float32, 3 * p) for p in range(PERTURBED)]
    names = ["y", "dq", "dk", "dv"]
    return {"n": n, "heads": h, "t": t, "d": d, "index": index,
            **{name: summary(want[i], [g[i] for g in got])[0] for i, name in enumerate(names)}}


FORTUNES = "/usr/share/games/fortunes/fortunes"


def two_epochs(cfg, block, batch, seed):
    """A character model trained two epochs on Debian's fortunes as TextFile cuts it (the first
    90 % of the bytes in windows of block + 1 at a stride of block; validation the rest), the
    batches in order in epoch 1 and in reverse order in epoch 2, with AdamW's nanoGPT groups and
    clip_grad_norm(1.0); the validation loss per token after it, in float64 and float32."""
    data = open(FORTUNES, "rb").read()
    cut = int(len(data) * 0.9)

    def windows(part):
        n = (len(part) - 1) // block
        return torch.tensor([list(part[i * block:i * block + block + 1]) for i in range(n)])

    train, val = windows(data[:cut]), windows(data[cut:])
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(cfg)
    fill(model)
    state = model.state_dict()
    out = {"config": cfg, "block": block, "batch": batch, "bytes": len(data), "byte_sum": int(sum(data))}
    for dtype, name in ((torch.float64, "val_loss"), (torch.float32, "val_loss_f32")):
        m = GPT2LMHeadModel(cfg)
        m.load_state_dict(state)
        m = m.to(dtype)
        opt = torch.optim.AdamW(groups(m), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
        steps = (len(train) + batch - 1) // batch
        for epoch in range(2):
            m.train()
            for s in (range(steps) if epoch == 0 else reversed(range(steps))):
                w = train[s * batch:(s + 1) * batch]
                logits = m(w[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opt.step()
        m.eval()
        with torch.no_grad():
            logits = m(val[:, :-1])
            out[name] = float(F.cross_entropy(logits.reshape(-1, 256), val[:, 1:].reshape(-1)))
    return out


def write(name, ref):
    os.makedirs("tests/data/gpt2", exist_ok=True)
    with open(f"tests/data/gpt2/{name}.json", "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


MAX_NORM, LR, WD = 1.0, 1e-3, 0.1
torch.set_num_threads(1)
small = {"vocab_size": 96, "n_positions": 48, "n_embd": 64, "n_layer": 2, "n_head": 4, "resid_pdrop": 0.0,
         "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5}
write("step", step(small, 4, 32, 5))
write("attention", {"cases": [attention(2, 3, t, 16, 200000 + 10 * t) for t in (1, 7, 64, 256)]})
WD = 0.1
char = {"vocab_size": 256, "n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2, "resid_pdrop": 0.0,
        "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5}
write("fortunes", two_epochs(char, 32, 16, 7))
