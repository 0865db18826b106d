#!/usr/bin/python3
"""ResNet training on the CPU: taas's graph core against PyTorch 1.13 eager, in the same run on
the same machine with the same threads, images/s and the step's memory.

The models (torchvision's, taas's spec made from them by tests/lib/torch_spec.py):
  cifar: resnet18(num_classes=10) with the CIFAR stem (conv1 = Conv2d(3, 64, 3, padding=1,
         bias=False), maxpool = Identity), 3x32x32, batch 64;
  r18:   resnet18(num_classes=1000), 3x224x224, batch 32;
  r50:   resnet50(num_classes=1000), 3x224x224, batch 16.
A step, on one in-memory batch of inputs uniform in [-1, 1) on both sides: zero_grad, forward
in train mode, NLLLoss on the output, backward, Adadelta(lr=1.0) (the §1 benchmark's step,
bench/train_bench.py). taas: build/bench/taas-train-bench --mode train. PyTorch: the same in
a child python. --warmup untimed steps, then --steps timed; the median of --repeat runs,
alternating.

Memory: each side's peak resident set during the steps minus its resident set just before
the first step (the weights and the libraries are in both before), in MiB; taas also prints
its planned arena (model_memory.h).

Instruction sets: --isa best leaves both at the CPU's best; --isa avx2 sets TAAS_CPU=avx2 for
taas, ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2 for PyTorch (its convolutions are
oneDNN's, which the first does not reach), and OpenBLAS's core to Haswell for both.

    /usr/bin/python3 bench/resnet_bench.py --driver build/bench/taas-train-bench [--isa avx2]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from bench_common import add_step_args, env_for, run  # noqa: E402

TORCH_STEP = r"""
import json, resource, sys, time
import torch, torch.nn as nn
from torchvision.models import resnet18, resnet50
name, batch, steps, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
torch.manual_seed(1)
if name == "cifar":
    m = resnet18(num_classes=10); m.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False); m.maxpool = nn.Identity(); hw = 32
elif name == "r18":
    m = resnet18(num_classes=1000); hw = 224
else:
    m = resnet50(num_classes=1000); hw = 224
m.train()
opt = torch.optim.Adadelta(m.parameters(), lr=1.0)
x = torch.rand(batch, 3, hw, hw) * 2 - 1
k = m.fc.out_features
y = torch.arange(batch) % k
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
rss0 = rss()
for s in range(warmup + steps):
    if s == warmup: t0 = time.perf_counter()
    opt.zero_grad()
    loss = nn.functional.nll_loss(m(x), y)
    loss.backward()
    opt.step()
secs = time.perf_counter() - t0
peak = int([l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1])
print(json.dumps({"samples_per_s": steps * batch / secs, "rss_before_kb": rss0, "rss_peak_kb": peak}))
"""

MODELS = {"cifar": (32, 64), "r18": (224, 32), "r50": (224, 16)}


def taas_spec(name):
    import torch.nn as nn
    from torchvision.models import resnet18, resnet50
    from torch_spec import spec
    if name == "cifar":
        m = resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False)
        m.maxpool = nn.Identity()
    elif name == "r18":
        m = resnet18(num_classes=1000)
    else:
        m = resnet50(num_classes=1000)
    return spec(m)


def main():
    ap = argparse.ArgumentParser()
    add_step_args(ap)
    ap.add_argument("--models", default="cifar,r18,r50")
    a = ap.parse_args()
    env = env_for(a.isa)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in a.models.split(","):
            hw, batch = MODELS[name]
            path = os.path.join(d, name + ".json")
            with open(path, "w") as f:
                json.dump(taas_spec(name), f)
            taas, torch_ = [], []
            for _ in range(a.repeat):
                taas.append(run([a.driver, "--model", path, "--input", f"3,{hw},{hw}", "--mode", "train", "--batch",
                                 str(batch), "--steps", str(a.steps), "--warmup", str(a.warmup), "--threads",
                                 str(a.threads)], env))
                torch_.append(run(["/usr/bin/python3", "-c", TORCH_STEP, name, str(batch), str(a.steps),
                                   str(a.warmup), str(a.threads)], env))
            t = statistics.median(r["samples_per_s"] for r in taas)
            p = statistics.median(r["samples_per_s"] for r in torch_)
            tm = statistics.median((r["rss_peak_kb"] - r["rss_before_kb"]) / 1024 for r in taas)
            pm = statistics.median((r["rss_peak_kb"] - r["rss_before_kb"]) / 1024 for r in torch_)
            rows.append((name, hw, batch, t, p, tm, pm, taas[0]["arena_bytes"] / 2**20))
    print(f"ResNet training, {a.threads} threads, isa {a.isa}, {platform.processor() or platform.machine()}, "
          f"median of {a.repeat}, {a.steps} steps after {a.warmup}")
    print("| model | input | batch | taas img/s | PyTorch img/s | ratio | taas step MiB | PyTorch step MiB "
          "| taas arena MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, hw, batch, t, p, tm, pm, ar in rows:
        print(f"| {name} | {hw}x{hw} | {batch} | {t:.1f} | {p:.1f} | {t / p:.2f} | {tm:.0f} | {pm:.0f} | {ar:.0f} |")


if __name__ == "__main__":
    main()
