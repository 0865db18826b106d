#!/usr/bin/python3
"""GPT training on the CPU: taas's graph core against PyTorch 1.13 eager, in the same run on the
same machine with the same threads, tokens/s and the step's memory; and the fused causal
attention alone against PyTorch's scaled_dot_product_attention.

The models (GPT2LMHeadModel under Hugging Face's names; PyTorch's side is tests/lib/ref_gpt2.py,
transformers not being among Debian 12's packages), dropout 0 on both sides:
  small: 6 layers, 6 heads, 384 wide, vocabulary 256 (bytes), block 256, batch 8;
  gpt2:  GPT-2 small (124M: 12 layers, 12 heads, 768 wide, vocabulary 50257), block 1024, batch 1.
A step, on one batch of token ids (j * 7919 + 13 mod the vocabulary, the targets the next ones)
on both sides: zero_grad, forward in train mode, cross-entropy over the (N*T, V) logits,
backward, AdamW(lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1). taas: taas-train-bench --mode
lm. PyTorch: the same in a child python. --warmup untimed steps, then --steps timed; the median
of --repeat runs, alternating.

attention: T = 1024, 12 heads of 64, batch 1; forward and backward of the fused op (taas-train-bench
--mode attention) against scaled_dot_product_attention(is_causal=True) and its backward
(torch 1.13's, then private: the math, with the (T x T) scores held whole).

Instruction sets: --isa best leaves both at the CPU's best; --isa avx2 holds both to AVX2
(bench_common.env_for).

Memory: each side's peak resident set during the steps minus its resident set just before the
first step, in MiB; taas also prints its planned arena (model_memory.h).

    /usr/bin/python3 bench/gpt_bench.py --driver build-release/bench/taas-train-bench [--models small,gpt2,attention]
"""
import argparse
import json
import os
import platform
import statistics
import tempfile

from bench_common import add_step_args, env_for, run

LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib")

TORCH_STEP = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch, torch.nn.functional as F
from ref_gpt2 import GPT2LMHeadModel, sdpa
cfg, batch, steps, warmup, threads = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(threads)
torch.manual_seed(1)
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field): return int(line.split()[1])
if "attention" in cfg:
    t, h, d = cfg["t"], cfg["heads"], cfg["d"]
    q, k, v = (torch.rand(batch, h, t, d) * 2 - 1 for _ in range(3))
    g = torch.rand(batch, h, t, d) * 2 - 1
    for z in (q, k, v): z.requires_grad_()
    rss0 = rss("VmRSS:")
    for s in range(warmup + steps):
        if s == warmup: t0 = time.perf_counter()
        for z in (q, k, v): z.grad = None
        sdpa(q, k, v).backward(g)
    secs = time.perf_counter() - t0
    print(json.dumps({"tokens_per_s": steps * batch * t / secs, "ms_per_step": 1e3 * secs / steps,
                      "rss_before_kb": rss0, "rss_peak_kb": rss("VmHWM:")}))
    sys.exit(0)
t, v = cfg.pop("block"), cfg["vocab_size"]
cfg.setdefault("layer_norm_epsilon", 1e-5)
m = GPT2LMHeadModel(cfg)
m.train()
opt = torch.optim.AdamW(m.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
j = torch.arange(batch * t)
x, y = ((j * 7919 + 13) % v).view(batch, t), (((j + 1) * 7919 + 13) % v).view(batch, t)
rss0 = rss("VmRSS:")
for s in range(warmup + steps):
    if s == warmup: t0 = time.perf_counter()
    opt.zero_grad()
    loss = F.cross_entropy(m(x).view(-1, v), y.view(-1))
    loss.backward()
    opt.step()
secs = time.perf_counter() - t0
print(json.dumps({"tokens_per_s": steps * batch * t / secs, "rss_before_kb": rss0, "rss_peak_kb": rss("VmHWM:")}))
"""

NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
MODELS = {
    "small": ({"vocab_size": 256, "n_positions": 256, "n_embd": 384, "n_layer": 6, "n_head": 6, **NO_DROPOUT}, 256, 8),
    "gpt2": ({"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, **NO_DROPOUT},
             1024, 1),
    "attention": ({"attention": True, "t": 1024, "heads": 12, "d": 64}, 1024, 1),
}


def main():
    ap = argparse.ArgumentParser()
    add_step_args(ap)
    ap.add_argument("--models", default="small,gpt2,attention")
    a = ap.parse_args()
    rows = []
    common = ["--steps", str(a.steps), "--warmup", str(a.warmup), "--threads", str(a.threads)]
    with tempfile.TemporaryDirectory() as d:
        for name in a.models.split(","):
            cfg, block, batch = MODELS[name]
            if name == "attention":
                cmd = [a.driver, "--mode", "attention", "--input", f"{cfg['t']},{cfg['heads']},{cfg['d']}",
                       "--batch", str(batch)] + common
            else:
                path = os.path.join(d, name + ".json")
                with open(path, "w") as f:
                    json.dump({"type": "GPT2LMHeadModel", "config": cfg}, f)
                cmd = [a.driver, "--model", path, "--input", f"{block},0,0", "--mode", "lm", "--batch", str(batch)] + common
            taas, torch_ = [], []
            env = env_for(a.isa)
            for _ in range(a.repeat):
                taas.append(run(cmd, env))
                torch_.append(run(["/usr/bin/python3", "-c", TORCH_STEP, LIB, json.dumps({**cfg, "block": block}),
                                   str(batch), str(a.steps), str(a.warmup), str(a.threads)], env))
            t = statistics.median(r["tokens_per_s"] for r in taas)
            p = statistics.median(r["tokens_per_s"] for r in torch_)
            mem = [statistics.median((r["rss_peak_kb"] - r["rss_before_kb"]) / 1024 for r in side)
                   if "rss_peak_kb" in side[0] else float("nan") for side in (taas, torch_)]
            rows.append((name, block, batch, t, p, mem[0], mem[1], taas[0].get("arena_bytes", 0) / 2**20))
    print(f"GPT training on the CPU, {a.threads} threads, isa {a.isa}, {platform.processor() or platform.machine()}, "
          f"median of {a.repeat}, {a.steps} steps after {a.warmup}")
    print("| model | block | batch | taas tokens/s | PyTorch tokens/s | ratio | taas step MiB | PyTorch step MiB "
          "| taas arena MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, block, batch, t, p, tm, pm, ar in rows:
        print(f"| {name} | {block} | {batch} | {t:.0f} | {p:.0f} | {t / p:.2f} | {tm:.0f} | {pm:.0f} | {ar:.0f} |")


if __name__ == "__main__":
    main()
