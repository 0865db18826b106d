"""A reference GPT-2 in PyTorch under Hugging Face's names and layout
(transformers/models/gpt2/modeling_gpt2.py), for the fixtures (tests/gen_gpt2_ref.py) and the
benchmark (bench/gpt_bench.py): transformers is not among Debian 12's packages. Conv1D keeps
its weight (in, out), lm_head.weight is transformer.wte.weight, and the causal mask is no
state_dict entry. The config is a dict of GPT2Config's keys."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def sdpa(q, k, v):
    """PyTorch's scaled_dot_product_attention(q, k, v, is_causal=True): torch 2's, or 1.13's
    (then private) one."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        y = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return y.view(*x.shape[:-1], self.nf)


def causal_attention(q, k, v, dropout):
    """(N, H, T, D) each: softmax(q k^T / sqrt(D)) over keys <= the query, dropped out, times v
    (GPT2Attention._attn)."""
    t = q.size(-2)
    w = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    w = w.masked_fill(~mask, torch.finfo(w.dtype).min)
    return dropout(F.softmax(w, dim=-1)) @ v


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["n_embd"]
        self.heads = cfg["n_head"]
        self.c_attn = Conv1D(3 * c, c)
        self.attn_p = cfg["attn_pdrop"]
        self.c_proj = Conv1D(c, c)
        self.attn_dropout = nn.Dropout(cfg["attn_pdrop"])
        self.resid_dropout = nn.Dropout(cfg["resid_pdrop"])

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        split = lambda z: z.view(n, t, self.heads, c // self.heads).transpose(1, 2)  # noqa: E731
        if self.attn_p == 0.0 or not self.training:
            y = sdpa(split(q), split(k), split(v))
        else:
            y = causal_attention(split(q), split(k), split(v), self.attn_dropout)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(n, t, c)))


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["n_embd"]
        self.c_fc = Conv1D(4 * c, c)
        self.c_proj = Conv1D(c, 4 * c)
        self.act = nn.GELU(approximate="tanh")
        self.dropout = nn.Dropout(cfg["resid_pdrop"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["n_embd"]
        self.ln_1 = nn.LayerNorm(c, eps=cfg["layer_norm_epsilon"])
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(c, eps=cfg["layer_norm_epsilon"])
        self.mlp = GPT2MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
        self.drop = nn.Dropout(cfg["embd_pdrop"])
        self.h = nn.ModuleList([GPT2Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])

    def forward(self, ids):
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(ids.size(1))))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids):
        return self.lm_head(self.transformer(ids))
