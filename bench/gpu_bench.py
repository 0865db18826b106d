#!/usr/bin/python3
"""GPU training benchmark: taas's CUDA engine against PyTorch eager on the same GPU, in the
same run, on the DESIGN.md §1 network (train_bench.py's: two convolutions, max pooling,
dropout, Linear, BatchNorm1d, Linear, LogSoftmax; NLLLoss; Adadelta(lr=1.0)) and the
Fashion-MNIST training split, Normalize((0.2860,), (0.3530,)).

1. Training images/s at batch 64 and at batch 512:
   taas: `taas-worker train --spec FILE` (its `start` line must name a cuda engine), the
     whole worker path: the data pipeline (gzip'd IDX decode, ToTensor, Normalize,
     batching on --workers decode threads), the batches' copies to the GPU (pinned,
     double-buffered), zero_grad, forward, NLLLoss, backward, Adadelta, the progress lines.
     --epochs (3) epochs with shuffle; the figure is the epochs after the first (their
     samples over their time_s), so process start, cuBLAS's set-up and the first epoch's
     warm-up are not in it.
   PyTorch: the same nn.Sequential on the GPU, the split normalized in one tensor already
     on the GPU (no loader: its best case), each batch gathered with a shuffled index on
     the GPU, zero_grad, forward, nll_loss, backward, step; --warmup (20) untimed steps,
     then the same number of epochs minus one, timed with torch.cuda.synchronize(). Its
     defaults stand (cuDNN convolutions, which may use TF32; matmul in FP32);
     --torch-fp32 turns TF32 off for cuDNN too. taas runs FP32 (TAAS_CUDA_TF32 unset);
     --tf32 adds rows for taas with TAAS_CUDA_TF32=1.
   Each measured --repeat (3) times, taas and PyTorch alternating; the median is reported.
2. The share of the step time the GPU waited for data (taas): the rank's waits for a batch
   the GPU needed, over its whole training time, the first batch excepted: from the worker's
   `done` line (wait_s: the loop's waits for batches it had not taken ahead; step_s) and the
   engine's TAAS_CUDA_STATS=1 line (data_wait_s: waits for the next batch after the GPU had
   finished the step; gpu_busy_s). The issue's goals: ≥ 1.5× PyTorch eager at batch 64, and
   no wait for data.

Refuses to run without a GPU (taas-worker gpus and torch.cuda both must see one). Needs a
build with the CUDA plugin and PyTorch with CUDA for /usr/bin/python3:

    /usr/bin/python3 bench/gpu_bench.py --worker build/kernel/taas-worker
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402
from train_bench import LAYERS, fashion, flops, loader_spec, torch_model  # noqa: E402

BATCHES = (64, 512)
GOAL = 1.5  # issue 6: at batch 64, taas at least 1.5x PyTorch eager


def gpus(worker):
    p = subprocess.run([worker, "gpus"], capture_output=True, text=True)
    try:
        return json.loads(p.stdout)
    except ValueError:
        raise SystemExit("taas-worker gpus failed (%d): %s %s" % (p.returncode, p.stdout, p.stderr))


def refuse_without_gpu(worker):
    seen = gpus(worker)
    try:
        import torch
        torch_ok = torch.cuda.is_available()
    except ImportError:
        torch_ok = False
    if seen["count"] == 0 or not torch_ok:
        print("gpu_bench.py: no GPU here (taas-worker gpus: %d, torch.cuda.is_available(): %s): nothing measured."
              % (seen["count"], torch_ok), file=sys.stderr)
        print("Run it on a machine with an NVIDIA GPU, a taas build with the CUDA plugin (cmake -DTAAS_CUDA=ON) "
              "and PyTorch with CUDA.", file=sys.stderr)
        raise SystemExit(2)
    return seen


# ---- taas --------------------------------------------------------------------------------

def job_spec(out, batch, epochs, workers):
    train = loader_spec(True, batch, True)
    train["num_workers"] = workers
    return {"version": 1, "job": "fit", "weights": None, "epochs": epochs, "units": 0, "seed": 1, "threads": 1,
            "out": out, "loss": {"type": "NLLLoss"}, "optimizer": {"type": "Adadelta", "lr": 1.0},
            "scheduler": None, "train": train, "validate": None,
            "model": {"type": "Sequential", "layers": LAYERS}}


def taas_run(worker, batch, epochs, workers, tf32, tmp):
    """{img_s, wait_share, busy_share, engine} of one taas-worker train run."""
    path = os.path.join(tmp, "spec.json")
    with open(path, "w") as f:
        json.dump(job_spec(os.path.join(tmp, "w.safetensors"), batch, epochs, workers), f)
    env = dict(os.environ, TAAS_CUDA_STATS="1")
    env.pop("TAAS_CUDA_TF32", None)
    if tf32:
        env["TAAS_CUDA_TF32"] = "1"
    p = subprocess.run([worker, "train", "--spec", path], capture_output=True, text=True, env=env)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines or lines[-1].get("event") != "done":
        raise SystemExit("taas-worker train failed (%d): %s %s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    engine = lines[0].get("engine", "")
    if not engine.startswith("cuda:"):
        raise SystemExit("taas-worker trained on %r, not a GPU: is libtaas_cuda.so beside it? %s" % (engine, p.stderr[-2000:]))
    stats = [json.loads(x) for x in p.stderr.splitlines() if x.startswith('{"event": "cuda_stats"')]
    if not stats:
        raise SystemExit("no cuda_stats line from the engine: %s" % p.stderr[-2000:])
    later = [x for x in lines if x["event"] == "epoch" and x["epoch"] > 1]
    done, st = lines[-1], stats[-1]
    total = done["wait_s"] - done["first_wait_s"] + done["step_s"]
    return {"img_s": sum(x["samples_per_s"] * x["time_s"] for x in later) / sum(x["time_s"] for x in later),
            "wait_share": (done["wait_s"] - done["first_wait_s"] + st["data_wait_s"]) / total,
            "busy_share": st["gpu_busy_s"] / total, "engine": engine}


# ---- PyTorch -----------------------------------------------------------------------------

def torch_rate(data, batch, warmup, epochs):
    import torch
    import torch.nn.functional as F
    x, y = data
    torch.manual_seed(1)
    model = torch_model().cuda()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    model.train()
    n = len(y)
    steps = epochs * ((n + batch - 1) // batch)
    perm = torch.randperm(n, device="cuda")
    t0 = 0.0
    for s in range(warmup + steps):
        if s == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        at = (s * batch) % n
        if at + batch > n:
            perm = torch.randperm(n, device="cuda")
            at = 0
        idx = perm[at:at + batch]
        opt.zero_grad()
        F.nll_loss(model(x[idx]), y[idx]).backward()
        opt.step()
    torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - t0)


# ---- report ------------------------------------------------------------------------------

def fmt(v):
    return "{:,.0f}".format(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", default=os.path.join(os.path.dirname(HERE), "build", "kernel", "taas-worker"))
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run; all but the first are timed (3)")
    ap.add_argument("--warmup", type=int, default=20, help="PyTorch's untimed steps (20)")
    ap.add_argument("--workers", type=int, default=2, help="taas's decode threads (num_workers, 2)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each, median taken (3)")
    ap.add_argument("--tf32", action="store_true", help="also measure taas with TAAS_CUDA_TF32=1")
    ap.add_argument("--torch-fp32", action="store_true", help="turn off TF32 in PyTorch's cuDNN convolutions")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    if args.epochs < 2:
        raise SystemExit("--epochs must be at least 2: the first is not timed")
    seen = refuse_without_gpu(args.worker)

    import torch
    if args.torch_fp32:
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    started = time.monotonic()
    x, y = fashion(True)
    data = (x.cuda(), y.cuda())
    raw = {}
    with tempfile.TemporaryDirectory() as tmp:
        for b in BATCHES:
            runs = {"taas": [], "torch": [], "taas_tf32": []}
            for _ in range(args.repeat):
                runs["taas"].append(taas_run(args.worker, b, args.epochs, args.workers, False, tmp))
                runs["torch"].append(torch_rate(data, b, args.warmup, args.epochs - 1))
                if args.tf32:
                    runs["taas_tf32"].append(taas_run(args.worker, b, args.epochs, args.workers, True, tmp))
            raw[b] = runs
    _, both = flops()
    out = ["| metric | taas | PyTorch eager | taas / PyTorch | goal |", "|---|---:|---:|---:|---|"]
    notes = []
    for b in BATCHES:
        r = raw[b]
        taas = statistics.median(x["img_s"] for x in r["taas"])
        peer = statistics.median(r["torch"])
        goal = "≥ %g×: %s" % (GOAL, "met" if taas / peer >= GOAL else "not met") if b == 64 else "—"
        out.append("| training img/s, batch %d | %s | %s | %.2f× | %s |" % (b, fmt(taas), fmt(peer), taas / peer, goal))
        if args.tf32:
            t32 = statistics.median(x["img_s"] for x in r["taas_tf32"])
            out.append("| training img/s, batch %d, taas with TF32 | %s | %s | %.2f× | — |" % (b, fmt(t32), fmt(peer), t32 / peer))
        wait = statistics.median(x["wait_share"] for x in r["taas"])
        out.append("| share of step time the GPU waited for data, batch %d | %.2f %% | — | — | none: %s |"
                   % (b, 100 * wait, "met" if wait < 0.005 else "not met"))
        notes.append("- batch %d: taas runs %s img/s, PyTorch %s; the GPU was busy in taas's kernels %.0f %% of the "
                     "step time (median); at %.1f MFLOP per training image taas reached %.0f GFLOP/s"
                     % (b, ", ".join(fmt(x["img_s"]) for x in r["taas"]), ", ".join(fmt(v) for v in r["torch"]),
                        100 * statistics.median(x["busy_share"] for x in r["taas"]), both, taas * both / 1e3))
    g = seen["gpus"][0]
    out += [""] + notes + [
        "- GPU: %s (%.0f GiB), %d on the machine; taas engine: %s" % (g["name"], g["memory_bytes"] / 2 ** 30,
                                                                     seen["count"], raw[64]["taas"][0]["engine"]),
        "- machine: %s" % machine(),
        "- PyTorch %s, CUDA %s, cuDNN %s; cuDNN TF32 %s, matmul TF32 off; Python %s"
        % (torch.__version__, torch.version.cuda, torch.backends.cudnn.version(),
           "on (default)" if torch.backends.cudnn.allow_tf32 else "off", platform.python_version()),
        "- taas: %d decode threads, FP32%s; each figure the median of %d runs, the epochs after the first of %d"
        % (args.workers, " (and TF32 rows)" if args.tf32 else "", args.repeat, args.epochs),
        "- measured %s in %.0f s" % (datetime.date.today().isoformat(), time.monotonic() - started)]
    print("\n".join(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(k): v for k, v in raw.items()}, f, indent=1)


if __name__ == "__main__":
    main()
