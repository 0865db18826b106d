#!/usr/bin/python3
"""GPU training benchmark: taas's CUDA engine against PyTorch eager and torch.compile on the same
GPU, in the same run, on the docs/design.md §1 network (train_bench.py's: two convolutions, max
pooling, dropout, Linear, BatchNorm1d, Linear, LogSoftmax; NLLLoss; Adadelta(lr=1.0)) and the
Fashion-MNIST training split, Normalize((0.2860,), (0.3530,)).

1. Training images/s at batch 64 and at batch 512, FP32:
   taas: `taas-worker train --spec FILE` (its `start` line must name a cuda engine), the
     whole worker path: the data pipeline (gzip'd IDX decode, ToTensor, Normalize,
     batching on --workers decode threads), the batches' copies to the GPU (pinned,
     double-buffered), zero_grad, forward, NLLLoss, backward, Adadelta, the progress lines.
     --epochs (3) epochs with shuffle; the figure is the epochs after the first (their
     samples over their time_s), so process start, cuBLAS's set-up and the first epoch's
     warm-up are not in it.
   PyTorch eager: the same nn.Sequential on the GPU, the split normalized in one tensor
     already on the GPU (no loader: its best case), each batch gathered with a shuffled index
     on the GPU, zero_grad, forward, nll_loss, backward, step; --warmup (20) untimed steps,
     then the same number of epochs minus one, timed with torch.cuda.synchronize(). Its
     defaults stand (cuDNN convolutions, which may use TF32; matmul in FP32);
     --torch-fp32 turns TF32 off for cuDNN too. taas runs FP32 (TAAS_CUDA_TF32 unset);
     --tf32 adds rows for taas with TAAS_CUDA_TF32=1; --variants rows for taas's FP32 with every
     matrix product through cuBLASLt (TAAS_CUDA_LT=1), without CUDA Graphs (TAAS_CUDA_GRAPHS=0)
     and with the convolutions through cuDNN (TAAS_CUDA_CUDNN=1), measured once a batch size,
     right after the FP32 pairs (--variants cudnn: that one alone).
   torch.compile: the same, with the model torch.compile(mode="max-autotune") (Inductor,
     autotuned Triton kernels, CUDA graphs); its compilation and autotuning happen in the
     untimed warm-up steps (their time is reported apart). Left out with --no-compile.
   taas and PyTorch eager are measured --repeat (3) times, alternating, and the median is
   reported; torch.compile --compile-repeat (1) times.
2. BF16: PyTorch eager and torch.compile under torch.autocast(dtype=torch.bfloat16). taas
   when it has fit(precision="bf16") (docs/language.md says so): its job spec then gets
   "precision": "bf16"; until then its rows say 'not available'.
3. Peak GPU memory at batch 512: taas, the worker process's device memory as NVML (or
   nvidia-smi) sees it, sampled every 20 ms, the CUDA context included (where the driver does
   not report the process, the device's used memory less what was used before it started);
   PyTorch, torch.cuda.max_memory_allocated and max_memory_reserved over the timed steps less
   what was allocated before (the data set on the GPU), the CUDA context not included (its
   size, from NVML, is reported apart).
4. The share of the step time the GPU waited for data (taas): the rank's waits for a batch
   the GPU needed, over its whole training time, the first batch excepted: from the worker's
   `done` line (wait_s: the loop's waits for batches it had not taken ahead; step_s) and the
   engine's TAAS_CUDA_STATS=1 line (data_wait_s: waits for the next batch after the GPU had
   finished the step; gpu_busy_s). The goals (issue 25): ≥ 2× PyTorch eager and ≥ 1×
   torch.compile at batch 64, ≥ 1.2× eager at batch 512, and no wait for data.

Records the GPU's name, the driver, CUDA and PyTorch versions. Prints a markdown table; --json
and --markdown write the figures and the table to files, after every measurement, so that a
run stopped early keeps what it measured. --budget S: no measurement starts after S seconds
(torch.compile's, 90 s before), and the rows left out say so.

Without a GPU (taas-worker gpus or torch.cuda sees none) or without PyTorch it says so and
exits with 77 (skipped, as the CUDA tests), having measured nothing. Needs a build with the
CUDA plugin and a python3 with PyTorch (CUDA):

    python3 bench/gpu_bench.py --worker build/kernel/taas-worker
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402
from train_bench import LAYERS, fashion, flops, loader_spec, torch_model  # noqa: E402

BATCHES = (64, 512)
MEMORY_BATCH = 512
# issue 25's goals, FP32: (peer, batch, taas at least this many times the peer's img/s)
GOALS = (("eager", 64, 2.0), ("compile", 64, 1.0), ("eager", 512, 1.2))
SKIP = 77  # nothing measured: no GPU here (as the CUDA tests' exit status)
MiB = 2 ** 20


def gpus(worker):
    p = subprocess.run([worker, "gpus"], capture_output=True, text=True)
    try:
        return json.loads(p.stdout)
    except ValueError:
        raise SystemExit("taas-worker gpus failed (%d): %s %s" % (p.returncode, p.stdout, p.stderr))


def refuse_without_gpu(worker):
    if not os.path.exists(worker):
        raise SystemExit("gpu_bench.py: no taas-worker at %s (build it, or name it with --worker)" % worker)
    seen = gpus(worker)
    why = None
    try:
        import torch
        torch_ok = torch.cuda.is_available()
    except ImportError:
        torch_ok, why = False, "no PyTorch for %s" % sys.executable
    if seen["count"] == 0 or not torch_ok:
        print("gpu_bench.py: no GPU here (taas-worker gpus: %d, torch.cuda.is_available(): %s%s): nothing measured, "
              "skipped (exit status %d)." % (seen["count"], torch_ok, "; " + why if why else "", SKIP))
        print("Run it on a machine with an NVIDIA GPU, a taas build with the CUDA plugin (cmake -DTAAS_CUDA=ON) "
              "and PyTorch with CUDA.")
        sys.exit(SKIP)
    return seen


def taas_has_bf16():
    """fit(precision=...) in the generated language reference (docs/language.md)."""
    try:
        with open(os.path.join(os.path.dirname(HERE), "docs", "language.md")) as f:
            return re.search(r"^fit\(.*\bprecision\b", f.read(), re.M) is not None
    except OSError:
        return False


# ---- GPU memory, as the driver sees it ------------------------------------------------------

class NvmlMemory:
    """Samples, on a thread, a process's device memory (and the device's used memory) through
    NVML (pynvml), else nvidia-smi; peak() gives the largest seen, in bytes."""

    def __init__(self, interval=0.02):
        self.interval = interval
        self.nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.how = "NVML"
        except Exception:  # noqa: BLE001 - no pynvml, or it cannot reach the driver
            self.how = "nvidia-smi" if shutil.which("nvidia-smi") else None
            self.interval = max(interval, 0.2)

    def sample(self):
        """({pid: bytes}, device used bytes) now."""
        if self.nvml:
            procs = {}
            try:
                for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                    if p.usedGpuMemory is not None:
                        procs[p.pid] = p.usedGpuMemory
            except self.nvml.NVMLError:
                pass
            return procs, self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used
        if self.how == "nvidia-smi":
            procs = {}
            out = subprocess.run(["nvidia-smi", "-i", "0", "--query-compute-apps=pid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
            for line in out.splitlines():
                try:
                    pid, mem = (int(v) for v in line.split(","))
                    procs[pid] = mem * MiB
                except ValueError:
                    pass
            used = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True).stdout.strip()
            return procs, int(used) * MiB if used.isdigit() else 0
        return {}, 0

    def watch(self, pid):
        """Starts sampling for pid; returns a function that stops and gives {peak, how}."""
        if not self.how:
            return lambda: {"peak": None, "how": "no NVML and no nvidia-smi"}
        base = self.sample()[1]
        state = {"proc": 0, "device": 0, "stop": False}

        def loop():
            while not state["stop"]:
                procs, used = self.sample()
                state["proc"] = max(state["proc"], procs.get(pid, 0))
                state["device"] = max(state["device"], used)
                time.sleep(self.interval)

        t = threading.Thread(target=loop, daemon=True)
        t.start()

        def stop():
            state["stop"] = True
            t.join()
            if state["proc"]:
                return {"peak": state["proc"], "how": "%s, the process's memory" % self.how}
            return {"peak": max(0, state["device"] - base), "how": "%s, the device's used memory less what was used "
                    "before (the driver did not report the process)" % self.how}
        return stop

    def process(self, pid):
        return self.sample()[0].get(pid)


def versions():
    import torch
    v = {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
         "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
         "capability": "%d.%d" % torch.cuda.get_device_capability(0), "machine": machine()}
    try:
        import triton
        v["triton"] = triton.__version__
    except ImportError:
        v["triton"] = None
    try:
        import pynvml
        pynvml.nvmlInit()
        d = pynvml.nvmlSystemGetDriverVersion()
        v["driver"] = d.decode() if isinstance(d, bytes) else d
        c = pynvml.nvmlSystemGetCudaDriverVersion()
        v["driver_cuda"] = "%d.%d" % (c // 1000, c % 1000 // 10)
    except Exception:  # noqa: BLE001
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip() if shutil.which("nvidia-smi") else ""
        v["driver"], v["driver_cuda"] = out.splitlines()[0] if out else None, None
    return v


# ---- taas --------------------------------------------------------------------------------

# The model measured: the §1 network, or (--model resnet18) torchvision's resnet18 with a
# one-channel CIFAR stem (conv1 = Conv2d(1, 64, 3, padding=1, bias=False), maxpool =
# Identity) on the same Fashion-MNIST images; taas's spec is made from the torch model.
MODEL = {"name": "section1", "spec": {"type": "Sequential", "layers": LAYERS}, "torch": torch_model, "flops": flops}


def module_flops(model, shape=(1, 1, 28, 28)):
    """flops() for a torch model: (forward, forward + backward) MFLOP per image, counting its
    Conv2d and Linear layers; the first layer's input gradient is computed by neither side."""
    import torch
    import torch.nn as nn
    done = []

    def hook(mod, inp, out):
        if isinstance(mod, nn.Conv2d):
            k = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
            done.append(2 * k * out.numel())
        elif isinstance(mod, nn.Linear):
            done.append(2 * mod.in_features * out.numel())
    hooks = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.eval()(torch.zeros(shape))
    for h in hooks:
        h.remove()
    fwd = sum(done)
    return fwd / 1e6, (3 * fwd - done[0]) / 1e6


def resnet18_stem1():
    import torch.nn as nn
    from torchvision.models import resnet18
    m = resnet18(num_classes=10)
    m.conv1 = nn.Conv2d(1, 64, 3, padding=1, bias=False)
    m.maxpool = nn.Identity()
    return m


def use_resnet18():
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
    from torch_spec import spec
    m = resnet18_stem1()
    both = module_flops(m)
    MODEL.update(name="resnet18", spec=spec(m), torch=resnet18_stem1, flops=lambda: both)


def job_spec(out, batch, epochs, workers, bf16=False):
    train = loader_spec(True, batch, True)
    train["num_workers"] = workers
    spec = {"version": 1, "job": "fit", "weights": None, "epochs": epochs, "units": 0, "seed": 1, "threads": 1,
            "out": out, "loss": {"type": "NLLLoss"}, "optimizer": {"type": "Adadelta", "lr": 1.0},
            "scheduler": None, "train": train, "validate": None,
            "model": MODEL["spec"]}
    if bf16:
        spec["precision"] = "bf16"
    return spec


# taas's FP32 variants (--variants): the environment each runs with
VARIANTS = {"lt": {"TAAS_CUDA_LT": "1"}, "nographs": {"TAAS_CUDA_GRAPHS": "0"}, "cudnn": {"TAAS_CUDA_CUDNN": "1"}}


def taas_run(worker, batch, epochs, workers, tf32, tmp, memory=None, bf16=False, variant=None):
    """{img_s, wait_share, busy_share, engine[, peak_bytes, memory_how]} of one taas-worker train run."""
    path = os.path.join(tmp, "spec.json")
    with open(path, "w") as f:
        json.dump(job_spec(os.path.join(tmp, "w.safetensors"), batch, epochs, workers, bf16), f)
    env = dict(os.environ, TAAS_CUDA_STATS="1")
    for v in ["TAAS_CUDA_TF32"] + [k for e in VARIANTS.values() for k in e]:
        env.pop(v, None)
    if tf32:
        env["TAAS_CUDA_TF32"] = "1"
    env.update(VARIANTS.get(variant, {}))
    p = subprocess.Popen([worker, "train", "--spec", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    # the worker may be a script that execs it: the pid stays the same
    stop = memory.watch(p.pid) if memory else None
    stdout, stderr = p.communicate()
    mem = stop() if stop else None
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines or lines[-1].get("event") != "done":
        raise RuntimeError("taas-worker train failed (%d): %s %s" % (p.returncode, stdout[-2000:], stderr[-2000:]))
    engine = lines[0].get("engine", "")
    if not engine.startswith("cuda:"):
        raise RuntimeError("taas-worker trained on %r, not a GPU: is libtaas_cuda.so beside it? %s" % (engine, stderr[-2000:]))
    stats = [json.loads(x) for x in stderr.splitlines() if x.startswith('{"event": "cuda_stats"')]
    if not stats:
        raise RuntimeError("no cuda_stats line from the engine: %s" % stderr[-2000:])
    later = [x for x in lines if x["event"] == "epoch" and x["epoch"] > 1]
    done, st = lines[-1], stats[-1]
    total = done["wait_s"] - done["first_wait_s"] + done["step_s"]
    r = {"img_s": sum(x["samples_per_s"] * x["time_s"] for x in later) / sum(x["time_s"] for x in later),
         "wait_share": (done["wait_s"] - done["first_wait_s"] + st["data_wait_s"]) / total,
         "busy_share": st["gpu_busy_s"] / total, "engine": engine}
    if mem:
        r["peak_bytes"], r["memory_how"] = mem["peak"], mem["how"]
    return r


# ---- PyTorch -----------------------------------------------------------------------------

def torch_rate(data, batch, warmup, epochs, compiled=False, bf16=False):
    """{img_s, warmup_s, peak_allocated, peak_reserved} of one PyTorch run: eager, or the model
    through torch.compile(mode="max-autotune"); FP32 or under BF16 autocast."""
    import gc
    import torch
    import torch.nn.functional as F
    x, y = data
    gc.collect()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()  # the data set: what the peak is counted above
    torch.manual_seed(1)
    model = MODEL["torch"]().cuda()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    model.train()
    if compiled:
        torch._dynamo.reset()
        run = torch.compile(model, mode="max-autotune")
    else:
        run = model
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None) if compiled else None
    n = len(y)
    steps = epochs * ((n + batch - 1) // batch)
    perm = torch.randperm(n, device="cuda")
    torch.cuda.synchronize()
    t_start = time.perf_counter()
    t0 = 0.0
    for s in range(warmup + steps):
        if s == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.cuda.reset_peak_memory_stats()
        at = (s * batch) % n
        if at + batch > n:
            perm = torch.randperm(n, device="cuda")
            at = 0
        idx = perm[at:at + batch]
        if mark:
            mark()
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.nll_loss(run(x[idx]), y[idx])
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    r = {"img_s": steps * batch / (t1 - t0), "warmup_s": t0 - t_start,
         "peak_allocated": torch.cuda.max_memory_allocated() - base,
         "peak_reserved": torch.cuda.max_memory_reserved()}
    del run, model, opt
    return r


# ---- the run -----------------------------------------------------------------------------

IMPLS = {"taas": "taas", "eager": "PyTorch eager", "compile": "torch.compile max-autotune"}
PRECISIONS = {"fp32": "FP32", "bf16": "BF16", "tf32": "TF32", "lt": "FP32, cuBLASLt",
              "nographs": "FP32, no CUDA Graphs", "cudnn": "FP32, cuDNN's convolutions"}


def fmt(v):
    return "{:,.0f}".format(v)


def mib(v):
    return "%s MiB" % fmt(v / MiB) if v is not None else "—"


class Bench:
    def __init__(self, args, seen):
        self.args, self.seen = args, seen
        self.t0 = time.monotonic()
        self.runs = []  # {impl, precision, batch, ...figures}
        self.left_out = []  # {impl, precision, batch, why}
        self.notes = []
        self.env = {}
        self.bf16 = taas_has_bf16()
        self.failed = False
        self.took = {}  # (impl, batch): seconds of its last measurement

    def time_left(self, need):
        return self.args.budget is None or time.monotonic() - self.t0 + need <= self.args.budget

    def measure(self, impl, precision, batch, fn, need=20):
        # a measurement takes what the last of its kind took (a ResNet's epochs: far more than 20 s)
        need = max(need, self.took.get((impl, batch), 0))
        if not self.time_left(need):
            self.left_out.append({"impl": impl, "precision": precision, "batch": batch,
                                  "why": "time budget (%d s) spent" % self.args.budget})
            print("left out (time budget): %s %s batch %d" % (impl, precision, batch), flush=True)
            return None
        t = time.monotonic()
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - one failed measurement must not lose the others
            why = " ".join(str(e).split())
            self.left_out.append({"impl": impl, "precision": precision, "batch": batch, "why": "failed: %s" % why})
            print("FAILED: %s %s batch %d: %s" % (impl, precision, batch, e), flush=True)
            self.failed = True
            self.write()
            return None
        r.update(impl=impl, precision=precision, batch=batch, seconds=time.monotonic() - t)
        self.took[(impl, batch)] = r["seconds"]
        self.runs.append(r)
        print("%-8s %-5s batch %3d: %s img/s  (%.0f s)%s" % (impl, precision, batch, fmt(r["img_s"]), r["seconds"],
              "  peak %s" % mib(r.get("peak_bytes", r.get("peak_allocated")))
              if batch == MEMORY_BATCH and ("peak_bytes" in r or "peak_allocated" in r) else ""), flush=True)
        self.write()
        return r

    def median(self, impl, precision, batch, key="img_s"):
        v = [r[key] for r in self.runs if (r["impl"], r["precision"], r["batch"]) == (impl, precision, batch)
             and r.get(key) is not None]
        return statistics.median(v) if v else None

    def why_missing(self, impl, precision, batch):
        if impl == "taas" and precision == "bf16" and not self.bf16:
            return "not available"
        for x in self.left_out:
            if (x["impl"], x["precision"], x["batch"]) == (impl, precision, batch):
                return "not measured: " + x["why"].split(":")[0]
        return "not measured"

    def table(self):
        a = self.args
        cols = ["batch %d" % b for b in BATCHES]
        what = ("resnet18 (one-channel CIFAR stem)" if a.model == "resnet18" else "the docs/design.md §1 network")
        out = ["### Training img/s, %s on Fashion-MNIST" % what, "",
               "| | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
        rows = [("taas", "fp32"), ("eager", "fp32"), ("compile", "fp32"), ("taas", "bf16"), ("eager", "bf16"),
                ("compile", "bf16")]
        if a.tf32:
            rows.insert(1, ("taas", "tf32"))
        if a.variants:
            rows[1:1] = [("taas", v) for v in a.variants]
        for impl, prec in rows:
            if impl == "compile" and a.no_compile:
                continue
            cells = []
            for b in BATCHES:
                v = self.median(impl, prec, b)
                cells.append(fmt(v) if v is not None else self.why_missing(impl, prec, b))
            label = "%s, %s%s" % (IMPLS[impl], PRECISIONS[prec], " autocast" if prec == "bf16" and impl != "taas" else "")
            out.append("| %s | %s |" % (label, " | ".join(cells)))
        for peer in ("eager", "compile"):
            for prec in ("fp32", "bf16"):
                cells = []
                for b in BATCHES:
                    t, p = self.median("taas", prec, b), self.median(peer, prec, b)
                    cells.append("%.2f×" % (t / p) if t and p else "—")
                if any(c != "—" for c in cells):
                    out.append("| taas ÷ %s, %s | %s |" % (IMPLS[peer], PRECISIONS[prec], " | ".join(cells)))
        for peer, batch, goal in GOALS:
            t, p = self.median("taas", "fp32", batch), self.median(peer, "fp32", batch)
            if t and p:
                cells = ["%s" % ("met" if t / p >= goal else "not met") if b == batch else "—" for b in BATCHES]
                out.append("| goal: taas ≥ %g× %s at batch %d, FP32 | %s |" % (goal, IMPLS[peer], batch, " | ".join(cells)))
        waits = [self.median("taas", "fp32", b, "wait_share") for b in BATCHES]
        if any(w is not None for w in waits):
            out.append("| share of the step time taas's GPU waited for data (goal: none) | %s |" % " | ".join(
                "%.2f %%: %s" % (100 * w, "met" if w < 0.005 else "not met") if w is not None else "—" for w in waits))

        out += ["", "### Peak GPU memory, batch %d" % MEMORY_BATCH, "", "| | FP32 | BF16 | what |", "|---|---:|---:|---|"]
        how = next((r["memory_how"] for r in self.runs if r["impl"] == "taas" and "memory_how" in r), "NVML")
        out.append("| taas | %s | %s | the worker process's device memory (%s), CUDA context included |"
                   % (mib(self.median("taas", "fp32", MEMORY_BATCH, "peak_bytes")),
                      mib(self.median("taas", "bf16", MEMORY_BATCH, "peak_bytes")), how))
        for impl in ("eager", "compile"):
            if impl == "compile" and a.no_compile:
                continue
            cells = []
            for prec in ("fp32", "bf16"):
                al = self.median(impl, prec, MEMORY_BATCH, "peak_allocated")
                rs = self.median(impl, prec, MEMORY_BATCH, "peak_reserved")
                cells.append("%s (reserved %s)" % (mib(al), mib(rs)) if al is not None else "—")
            out.append("| %s | %s | %s | torch.cuda.max_memory_allocated over the timed steps, less the data set "
                       "on the GPU (max_memory_reserved in brackets); CUDA context not included |"
                       % (IMPLS[impl], cells[0], cells[1]))
        if self.env.get("torch_context_bytes"):
            out.append("| (PyTorch's CUDA context) | %s | | NVML: this process's device memory before its first "
                       "allocation |" % mib(self.env["torch_context_bytes"]))

        e = self.env
        g = self.seen["gpus"][0]
        taas_engine = next((r["engine"] for r in self.runs if r["impl"] == "taas"), "—")
        comp = [r for r in self.runs if r["impl"] == "compile"]
        out += ["",
                "- GPU: %s (%.0f GiB, compute capability %s), %d on the machine; driver %s (CUDA %s); taas engine: %s"
                % (g["name"], g["memory_bytes"] / 2 ** 30, e.get("capability"), self.seen["count"], e.get("driver"),
                   e.get("driver_cuda"), taas_engine),
                "- PyTorch %s (CUDA %s, cuDNN %s, Triton %s), Python %s; cuDNN TF32 %s, matmul TF32 off"
                % (e.get("torch"), e.get("torch_cuda"), e.get("cudnn"), e.get("triton"), e.get("python"),
                   "on (default)" if e.get("cudnn_tf32") else "off"),
                "- machine: %s" % e.get("machine"),
                "- taas: %d decode threads, FP32%s; taas and PyTorch eager the median of %d runs, torch.compile of %d; "
                "taas the epochs after the first of %d, PyTorch %d epochs after %d warm-up steps"
                % (a.workers, " (and TF32 rows)" if a.tf32 else "", a.repeat, a.compile_repeat, a.epochs,
                   a.epochs - 1, a.warmup)]
        if comp:
            out.append("- torch.compile: compilation, autotuning and warm-up took %s s (batch %s)"
                       % (", ".join("%.0f" % r["warmup_s"] for r in comp),
                          ", ".join("%d %s" % (r["batch"], PRECISIONS[r["precision"]]) for r in comp)))
        for b in BATCHES:
            t = [r for r in self.runs if (r["impl"], r["precision"], r["batch"]) == ("taas", "fp32", b)]
            if t:
                _, both = MODEL["flops"]()
                out.append("- batch %d: taas %s img/s, PyTorch eager %s; the GPU was busy in taas's kernels %.0f %% of "
                           "the step time (median); at %.1f MFLOP per training image taas reached %s GFLOP/s"
                           % (b, ", ".join(fmt(r["img_s"]) for r in t),
                              ", ".join(fmt(r["img_s"]) for r in self.runs
                                        if (r["impl"], r["precision"], r["batch"]) == ("eager", "fp32", b)),
                              100 * statistics.median(r["busy_share"] for r in t), both,
                              fmt(statistics.median(r["img_s"] for r in t) * both / 1e3)))
        for x in self.left_out:
            out.append("- left out: %s %s batch %d: %s" % (IMPLS[x["impl"]], PRECISIONS[x["precision"]], x["batch"],
                                                          x["why"][:300]))
        out.append("- measured %s in %.0f s" % (datetime.date.today().isoformat(), time.monotonic() - self.t0))
        return "\n".join(out)

    def write(self):
        a = self.args
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"env": self.env, "gpus": self.seen, "taas_bf16": self.bf16, "runs": self.runs,
                           "left_out": self.left_out, "seconds": time.monotonic() - self.t0,
                           "args": vars(a)}, f, indent=1)
        if a.markdown:
            with open(a.markdown, "w") as f:
                f.write(self.table() + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", default=os.path.join(os.path.dirname(HERE), "build", "kernel", "taas-worker"))
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run; all but the first are timed (3)")
    ap.add_argument("--warmup", type=int, default=20, help="PyTorch's untimed steps (20)")
    ap.add_argument("--workers", type=int, default=2, help="taas's decode threads (num_workers, 2)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements of taas and PyTorch eager, median taken (3)")
    ap.add_argument("--compile-repeat", type=int, default=1, help="measurements of torch.compile (1)")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--tf32", action="store_true", help="also measure taas with TAAS_CUDA_TF32=1")
    ap.add_argument("--variants", nargs="?", const=",".join(VARIANTS), default="",
                    help="also measure taas with cuBLASLt (lt: TAAS_CUDA_LT=1), without CUDA Graphs (nographs) and "
                         "with cuDNN's convolutions (cudnn: TAAS_CUDA_CUDNN=1), once a batch size; all three, or "
                         "those named, comma-separated")
    ap.add_argument("--torch-fp32", action="store_true", help="turn off TF32 in PyTorch's cuDNN convolutions")
    ap.add_argument("--budget", type=float, help="seconds: no measurement starts after them (torch.compile's: 90 s before)")
    ap.add_argument("--model", choices=["section1", "resnet18"], default="section1",
                    help="the §1 network, or resnet18 with a one-channel CIFAR stem (section1)")
    ap.add_argument("--batches", default="64,512", help="the batch sizes, comma-separated (64,512)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--markdown", help="write the markdown table here")
    args = ap.parse_args()
    if args.epochs < 2:
        raise SystemExit("--epochs must be at least 2: the first is not timed")
    args.variants = [v for v in args.variants.split(",") if v]
    for v in args.variants:
        if v not in VARIANTS:
            raise SystemExit("--variants: %r is none of %s" % (v, ", ".join(VARIANTS)))
    global BATCHES
    try:
        BATCHES = tuple(int(b) for b in args.batches.split(","))
    except ValueError:
        raise SystemExit("--batches: %r is not a list of batch sizes such as 64,512" % args.batches)
    if not BATCHES or min(BATCHES) < 1:
        raise SystemExit("--batches: %r: batch sizes are 1 or more" % args.batches)
    seen = refuse_without_gpu(args.worker)
    if args.model == "resnet18":
        use_resnet18()

    import torch
    if args.torch_fp32:
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    bench = Bench(args, seen)
    memory = NvmlMemory()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    bench.env = versions()
    bench.env["cudnn_tf32"] = torch.backends.cudnn.allow_tf32
    bench.env["model"] = MODEL["name"]
    bench.env["torch_context_bytes"] = memory.process(os.getpid())
    x, y = fashion(True)
    data = (x.cuda(), y.cuda())
    ep, w = args.epochs, args.workers
    with tempfile.TemporaryDirectory() as tmp:
        # FP32, taas and PyTorch eager alternating; memory at batch 512
        for b in BATCHES:
            for _ in range(args.repeat):
                bench.measure("taas", "fp32", b, lambda: taas_run(args.worker, b, ep, w, False, tmp,
                                                                   memory if b == MEMORY_BATCH else None))
                bench.measure("eager", "fp32", b, lambda: torch_rate(data, b, args.warmup, ep - 1))
                if args.tf32:
                    bench.measure("taas", "tf32", b, lambda: taas_run(args.worker, b, ep, w, True, tmp))
            for v in args.variants:
                bench.measure("taas", v, b, lambda: taas_run(args.worker, b, ep, w, False, tmp, variant=v))
        # BF16
        for b in BATCHES:
            for _ in range(args.repeat):
                if bench.bf16:
                    bench.measure("taas", "bf16", b, lambda: taas_run(args.worker, b, ep, w, False, tmp,
                                                                       memory if b == MEMORY_BATCH else None, True))
                bench.measure("eager", "bf16", b, lambda: torch_rate(data, b, args.warmup, ep - 1, bf16=True))
        # torch.compile: FP32, then BF16
        if not args.no_compile:
            for prec in ("fp32", "bf16"):
                for b in BATCHES:
                    for _ in range(args.compile_repeat):
                        bench.measure("compile", prec, b, lambda: torch_rate(data, b, max(args.warmup, 30), ep - 1,
                                                                             compiled=True, bf16=prec == "bf16"),
                                      need=90)
    bench.write()
    print()
    print(bench.table())
    sys.exit(1 if bench.failed else 0)


if __name__ == "__main__":
    main()
