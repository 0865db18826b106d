"""What the training benchmarks against PyTorch share (bench/resnet_bench.py, bench/gpt_bench.py):
their common arguments, and a side's run as one JSON line."""
import json
import os
import subprocess


def add_step_args(ap):
    """The driver (taas-train-bench), the threads both sides use, the timed and untimed steps,
    the runs of each side (alternating; the median is reported)."""
    ap.add_argument("--driver", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--isa", choices=["best", "avx2"], default="best")


def env_for(isa):
    """Both sides at the CPU's best, or both at AVX2: TAAS_CPU for taas; for PyTorch
    ATEN_CPU_CAPABILITY (its own kernels) and ONEDNN_MAX_CPU_ISA (its convolutions, oneDNN's,
    which ATEN_CPU_CAPABILITY does not reach); OpenBLAS's core to Haswell for both."""
    env = dict(os.environ)
    if isa == "avx2":
        env.update(TAAS_CPU="avx2", ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", DNNL_MAX_CPU_ISA="AVX2",
                   OPENBLAS_CORETYPE="Haswell")
    return env


def run(cmd, env=None):
    """The last line of what cmd prints, as JSON."""
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
