#!/usr/bin/python3
"""GPT-2 on a GPU (issue 29): taas's CUDA engine against PyTorch eager and torch.compile with
Hugging Face's transformers.GPT2LMHeadModel on the same GPU, and the strict load of taas's
weights into that model.

1. Training tokens/s, FP32 (then BF16: taas's precision='bf16', eager under
   torch.autocast(bfloat16)), GPT2Config(n_layer=--layers, ...) (GPT-2 small by default), block
   --block (1024), batch --batch (4), dropout 0 on both sides; torch.compile last of the
   FP32 and BF16 sides (its compilation is the longest), then taas's attention through the
   matrix products; a side the budget leaves no time for is a row that says so:
   taas: `taas-worker train --spec FILE` on llm.c token shards of uniform random ids written
     here (TokenShards), CrossEntropyLoss over every position, AdamW(lr=6e-4, betas=(0.9,
     0.95), weight_decay=0.1, param_groups='nanogpt'), clip_grad_norm=1.0; two epochs of
     --steps steps, the figure the second epoch's tokens_per_s (the worker's epoch line).
   PyTorch eager: GPT2LMHeadModel on the GPU, the same batch shape, the same AdamW groups and
     clipping, --warmup untimed steps then --steps timed with torch.cuda.synchronize();
     torch.compile(model) likewise, its compilation in the untimed steps (left out with
     --no-compile or when the budget is short).
2. The strict load, right after taas's FP32 side: taas's saved weights (safetensors) into a
   fresh transformers GPT2LMHeadModel with load_state_dict(strict=True), lm_head tied to wte;
   then the logits of 64 tokens from it (on the GPU, FP32, TF32 off) against taas's own
   forward on the same file (taas-test-forward on the CPU, --forward): the largest difference.
0. First, the causal attention alone, forward and backward at GPT-2 small's shape (batch
   --batch, 12 heads of 64, T = --block): taas's tiled, plain and gemm kernels in FP32, and the
   gemm kernels with BF16 products (taas-cuda-attention-bench, --attention-driver) against
   PyTorch's
   scaled_dot_product_attention(is_causal=True) in FP32 (the backend PyTorch picks), and in
   BF16 through its flash and cuDNN backends (cuDNN 9's fused attention, which takes FP16/BF16
   only), each where this PyTorch has it. Milliseconds a step, CUDA events.

Records the GPU, the driver, CUDA, PyTorch and transformers versions. Prints a markdown
table; --json and --markdown write the figures to files. Without a GPU, PyTorch or transformers
it says so and exits 77 (skipped), having measured nothing.

    python3 bench/gpu_gpt_bench.py --worker build/kernel/taas-worker [--layers 12 --batch 4]
"""
import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_bench import SKIP, refuse_without_gpu, versions  # noqa: E402

VOCAB = 50257
# FP32 first (the strict load reads taas's FP32 weights), then BF16: taas's precision='bf16'
# (its matrix products in BF16, FP32 in memory) against eager under torch.autocast(bfloat16)
# Last, budget allowing: taas with its attention through the matrix products
# (TAAS_CUDA_ATTENTION=gemm), FP32 and BF16, against the default tiled kernels.
SIDES = ("taas", "eager", "taas bf16", "eager bf16", "compile", "taas attention gemm", "taas attention gemm bf16")
NEED = {"compile": 70}  # seconds a side needs of the budget (compilation); the others 30
GEMM_SIDES = {"taas attention gemm", "taas attention gemm bf16"}


def config(layers):
    return {"vocab_size": VOCAB, "n_positions": 1024, "n_embd": 768, "n_layer": layers, "n_head": 12,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}


def write_shard(path, tokens, seed):
    """An llm.c shard of `tokens` uniform random ids (numpy's generator with seed)."""
    import numpy as np
    ids = np.random.default_rng(seed).integers(0, VOCAB, size=tokens, dtype=np.uint16)
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", 20240520, 1, tokens) + b"\0" * (1024 - 12))
        f.write(ids.tobytes())


def taas_run(worker, a, shard, out, timeout, bf16=False, attention=None):
    spec = {"precision": "bf16" if bf16 else "fp32","version": 1, "job": "fit", "weights": None, "epochs": 2, "units": 0, "seed": 1, "threads": 1, "out": out,
            "model": {"type": "GPT2LMHeadModel", "config": config(a.layers)},
            "train": {"type": "DataLoader", "batch_size": a.batch, "shuffle": False, "drop_last": True,
                      "prefetch_factor": None,
                      "num_workers": 2, "dataset": {"type": "TokenShards", "urls": shard, "block_size": a.block,
                                                    "raw": False}},
            "validate": None, "loss": {"type": "CrossEntropyLoss"},
            "optimizer": {"type": "AdamW", "lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
                          "amsgrad": False, "param_groups": "nanogpt"},
            "clip_grad_norm": 1.0, "scheduler": None}
    path = os.path.join(os.path.dirname(out), "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, TAAS_CUDA_ATTENTION=attention) if attention else None
    p = subprocess.run([worker, "train", "--spec", path], capture_output=True, text=True, env=env, timeout=timeout)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines or lines[-1].get("event") != "done":
        raise RuntimeError("taas-worker train failed (%d): %s %s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    engine = lines[0].get("engine", "")
    if not engine.startswith("cuda:"):
        raise RuntimeError("taas-worker trained on %r, not a GPU" % engine)
    second = [x for x in lines if x.get("event") == "epoch" and x.get("epoch") == 2]
    return {"tokens_s": second[0]["tokens_per_s"], "engine": engine}


def torch_rate(a, compiled, bf16=False):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(1)
    m = GPT2LMHeadModel(GPT2Config(**config(a.layers))).cuda()
    m.train()
    decay = [p for n, p in m.named_parameters() if p.dim() >= 2 and not n.startswith(("transformer.wte", "transformer.wpe"))]
    rest = [p for n, p in m.named_parameters() if not (p.dim() >= 2 and not n.startswith(("transformer.wte",
                                                                                          "transformer.wpe")))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=6e-4,
                            betas=(0.9, 0.95), eps=1e-8)
    run = torch.compile(m) if compiled else m
    x = torch.randint(0, VOCAB, (a.batch, a.block), device="cuda")
    y = torch.randint(0, VOCAB, (a.batch, a.block), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = run(x).logits
            loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB).float(), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    warm = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return {"tokens_s": a.steps * a.batch * a.block / secs, "warmup_s": warm,
            "peak_bytes": torch.cuda.max_memory_allocated()}


def sdpa_rows(a):
    """PyTorch's SDPA forward and backward at the benchmark's shape: {name: ms a step}."""
    import torch
    import torch.nn.functional as F
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                    "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}
    except ImportError:
        sdpa_kernel, backends = None, {}
    import contextlib
    out = {}
    cases = [("PyTorch SDPA FP32", torch.float32, None), ("PyTorch SDPA BF16 flash", torch.bfloat16, "flash"),
             ("PyTorch SDPA BF16 cuDNN", torch.bfloat16, "cudnn")]
    for name, dtype, backend in cases:
        try:
            if backend and (not sdpa_kernel or backends.get(backend) is None):
                out[name] = {"error": "not in PyTorch %s" % torch.__version__}
                continue
            ctx = sdpa_kernel([backends[backend]]) if backend else contextlib.nullcontext()
            g = torch.Generator(device="cuda").manual_seed(7)
            q, k, v, dy = (torch.rand(a.batch, 12, a.block, 64, device="cuda", generator=g, dtype=torch.float32)
                           .mul(2).sub(1).to(dtype) for _ in range(4))
            for x in (q, k, v):
                x.requires_grad_(True)
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            with ctx:
                for i in range(a.warmup + 20):
                    if i == a.warmup:
                        ev[0].record()
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    # the gradients fresh each step, as taas's driver writes them (no .grad sums)
                    torch.autograd.grad(y, (q, k, v), dy)
                ev[1].record()
            torch.cuda.synchronize()
            out[name] = {"ms_per_step": ev[0].elapsed_time(ev[1]) / 20}
        except Exception as e:  # noqa: BLE001 (a row that says why)
            out[name] = {"error": "%s: %s" % (type(e).__name__, str(e)[:300])}
    return out


def attention_rows(a, left):
    """taas's three kernel sets (the C driver) and PyTorch's SDPA: {name: {"ms_per_step": ...}};
    left() is the budget's seconds left."""
    out = {}
    # only the gemm set has products: BF16 changes its row alone
    for math, kernels in (("fp32", "tiled,plain,gemm"), ("bf16", "gemm")):
        try:
            p = subprocess.run([a.attention_driver, "--batch", str(a.batch), "--t", str(a.block), "--heads", "12",
                                "--d", "64", "--steps", "20", "--warmup", str(a.warmup), "--math", math, "--kernels",
                                kernels], capture_output=True, text=True, timeout=max(10, min(60, left() - 120)))
        except (OSError, subprocess.TimeoutExpired) as e:
            out["taas %s" % math.upper()] = {"error": "taas-cuda-attention-bench: %s: %s" % (type(e).__name__, e)}
            continue
        lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        if p.returncode != 0 or len(lines) != len(kernels.split(",")):
            out["taas %s" % math.upper()] = {"error": "taas-cuda-attention-bench --math %s failed (%d): %s" % (
                math, p.returncode, p.stderr[-500:])}
        for x in lines:
            out["taas %s %s" % (math.upper(), x["kernels"])] = x
    out.update(sdpa_rows(a))
    return out


def strict_load(a, weights, forward):
    """taas's file into transformers' model with strict=True; then the logits of 64 tokens from
    it (GPU, FP32, TF32 off) against taas's CPU forward on the same file (the command
    `forward`, taas-test-forward, when given)."""
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.backends.cuda.matmul.allow_tf32 = False
    m = GPT2LMHeadModel(GPT2Config(**config(a.layers))).cuda().eval()
    sd = load_file(weights)
    try:
        m.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        return {"strict": False, "why": str(e)[:2000]}
    r = {"strict": True, "keys": len(sd),
         "tied": m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr()}
    x = torch.randint(0, VOCAB, (1, 64), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        hf = m(x.cuda()).logits.float().cpu()
    r["finite"] = bool(torch.isfinite(hf).all())
    r["logits_max_abs"] = float(hf.abs().max())
    if not forward:
        return r
    with tempfile.TemporaryDirectory(prefix="taas-gpt-forward-") as tmp:
        spec, inp, out = (os.path.join(tmp, f) for f in ("model.json", "x.f32", "y.f32"))
        with open(spec, "w") as f:
            json.dump({"type": "GPT2LMHeadModel", "config": config(a.layers)}, f)
        x.to(torch.float32).numpy().tofile(inp)
        p = subprocess.run(forward + [spec, weights, inp, "1", "64", "0", "0", out], capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            r["taas_forward"] = "failed (%d): %s" % (p.returncode, p.stderr[-500:])
            return r
        taas = torch.from_numpy(np.fromfile(out, dtype=np.float32))
        if taas.numel() != hf.numel():
            r["taas_forward"] = "%d logits, want %d" % (taas.numel(), hf.numel())
            return r
        diff = float((taas.view_as(hf) - hf).abs().max())
    # a layout or key mixed up moves logits by their own size; the two FP32 sums by 1e-5 of it
    r["logits_max_abs_diff"] = diff
    r["logits_match"] = diff <= 1e-3 * max(1.0, r["logits_max_abs"])
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=os.path.join(os.path.dirname(HERE), "build", "kernel", "taas-worker"))
    ap.add_argument("--attention-driver", default=os.path.join(os.path.dirname(HERE), "build", "bench",
                                                               "taas-cuda-attention-bench"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=170)
    ap.add_argument("--forward", help="taas's CPU forward (taas-test-forward), a command line, for the logits")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    t_start = time.time()
    refuse_without_gpu(a.worker)
    try:
        import transformers
    except ImportError:
        print("gpu_gpt_bench.py: no transformers for %s: nothing measured, skipped" % sys.executable)
        sys.exit(SKIP)
    v = versions()
    v["transformers"] = transformers.__version__
    res = {"versions": v, "config": config(a.layers), "batch": a.batch, "block": a.block}

    def save():
        rows = ["GPT-2 (%d layers) on %s, block %d, batch %d, tokens/s" % (a.layers, v["gpu"], a.block, a.batch),
                "", "| side | tokens/s | ratio to eager (FP32) | note |", "|---|---:|---:|---|"]
        eager = res.get("eager", {}).get("tokens_s")
        for side in SIDES:
            r = res.get(side)
            if not r:
                continue
            if "error" in r:
                rows.append("| %s | — | — | %s |" % (side, r["error"][:200]))
                continue
            ratio = r["tokens_s"] / eager if eager else float("nan")
            rows.append("| %s | %.0f | %.2f | %s |" % (side, r["tokens_s"], ratio, r.get("engine", "")))
        if "attention" in res:
            rows += ["", "The causal attention alone, forward and backward, batch %d, 12 heads of 64, T %d:" % (
                a.batch, a.block), "", "| side | ms a step | ratio to taas tiled |", "|---|---:|---:|"]
            att = res["attention"]
            tiled = att.get("taas FP32 tiled", {}).get("ms_per_step")
            for name, r in att.items():
                if "error" in r:
                    rows.append("| %s | — | %s |" % (name, r["error"][:200]))
                else:
                    rows.append("| %s | %.3f | %s |" % (name, r["ms_per_step"], "%.2f" % (r["ms_per_step"] / tiled)
                                                          if tiled else "—"))
        if "load" in res:
            rows += ["", "strict load into transformers.GPT2LMHeadModel: %s" % json.dumps(res["load"])[:2000]]
        text = "\n".join(rows)
        if a.markdown:
            with open(a.markdown, "w") as f:
                f.write(text + "\n")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
        return text

    def left():
        return a.budget - (time.time() - t_start)

    try:
        res["attention"] = attention_rows(a, left)
    except Exception as e:  # noqa: BLE001
        res["attention"] = {"taas": {"error": "%s: %s" % (type(e).__name__, e)}}
    save()
    with tempfile.TemporaryDirectory(prefix="taas-gpt-bench-") as tmp:
        shard = os.path.join(tmp, "shard_000001.bin")
        write_shard(shard, a.steps * a.batch * a.block + 1, 7)
        weights = os.path.join(tmp, "gpt2.safetensors")
        for side in SIDES:
            if "compile" in side and a.no_compile:
                continue
            if left() < NEED.get(side, 30):
                res[side] = {"error": "left out: %.0f s of the %.0f s budget left" % (max(left(), 0), a.budget)}
                save()
                continue
            bf16 = side.endswith("bf16")
            out = weights if side == "taas" else os.path.join(tmp, side.replace(" ", "-") + ".safetensors")
            try:
                res[side] = (taas_run(a.worker, a, shard, out, max(10, left()), bf16,
                                      "gemm" if side in GEMM_SIDES else None)
                             if side.startswith("taas") else torch_rate(a, "compile" in side, bf16))
            except Exception as e:  # noqa: BLE001 (a side that fails is a row that says why)
                res[side] = {"error": "%s: %s" % (type(e).__name__, e)}
            save()
            if side == "taas" and os.path.exists(weights):
                try:
                    res["load"] = strict_load(a, weights, shlex.split(a.forward) if a.forward else None)
                except Exception as e:  # noqa: BLE001
                    res["load"] = {"error": "%s: %s" % (type(e).__name__, e)}
                save()
    print(save())


if __name__ == "__main__":
    main()
