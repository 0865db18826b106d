#!/usr/bin/python3
"""A loader pool that sizes itself against the best fixed one, and the estimate of a job's
length (issue 18).

The docs/design.md §1 network trained in a `#pragma taas --gpus 2 --cpus C` cell on this
machine (two CPU ranks under mpirun) from a slow source: Fashion-MNIST's training images as
an NpyDataset served by tests/lib/faultserver.py with --latency before every answer, each
sample one range request (TAAS_NPY_MEMORY_LIMIT below the file, the fetch cache off), so a
loader worker makes about num_workers / latency samples a second. For C = 1, 2, 4, 8 and auto
it reports the job's time, its samples/s while training, the ranks' wait for data, and the
loader workers the job held (for auto: the pool over time, and the loader-worker-seconds it
used against a fixed pool's); then, for every job, the estimate of its whole length the
display gave when 10 % of its steps were done, against its real length.

Runs a real taas-kernel through jupyter_client; prints a markdown table with the command and
the machine. On an otherwise idle machine:

    /usr/bin/python3 bench/pool_bench.py --kernel build/kernel/taas-kernel
"""

import argparse
import datetime
import gzip
import os
import re
import sys
import tempfile

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402  (one description of the machine for RESULTS.md)
from offload_bench import FASHION, run_fit, start_server  # noqa: E402  (the §1 job and the slow server)

def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return numpy.frombuffer(data, numpy.uint8, offset=4 + 4 * dims).reshape(shape)


def seconds(text):
    """'1 min 5 s', '12 s', '1 h 2 min', '5.2 s' -> seconds"""
    total = 0.0
    for num, unit in re.findall(r"([0-9.]+) (h|min|s)\b", text):
        total += float(num) * {"h": 3600, "min": 60, "s": 1}[unit]
    return total


def run_job(k, cpus, units):
    text, msgs, wall, m = run_fit(k, cpus, units)
    line = text[m.end():].split("\n", 1)[0]  # the rest of the summary line
    hours = re.search(r"([0-9.]+) machine-hours of the ranks' machines, ([0-9.]+) of loader machines", line)
    if not hours:
        raise SystemExit("no machine-hours in the summary line:\n" + text)
    secs = seconds(m.group(1))
    displays = [d["content"]["data"]["text/plain"] for d in msgs if d["msg_type"] == "update_display_data"]
    estimate = None
    for d in displays:
        pct = re.search(r" (\d+)%  epoch", d)
        est = re.search(r"est\. (.+?) in all", d)
        if pct and est and int(pct.group(1)) >= 10:
            estimate = seconds(est.group(1))
            break
    speed = re.search(r"done after .*?, ([0-9,]+) samples/s while training", displays[-1])
    changes = re.findall(r"^loaders (\d+ → \d+): .*$", text, re.M)
    return {"cpus": cpus, "secs": secs, "wall": wall, "wait": float(m.group(3)),
            "loader_s": float(hours.group(2)) * 3600, "rate": int(speed.group(1).replace(",", "")) if speed else 0,
            "estimate": estimate, "changes": changes}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default=os.path.join(SOURCE, "build", "kernel", "taas-kernel"))
    ap.add_argument("--latency", type=float, default=0.01, help="seconds added to each HTTP request")
    ap.add_argument("--threads", type=int, default=2, help="the DataLoader's num_workers (a loader's fetches at once)")
    ap.add_argument("--units", type=int, default=25600, help="samples each job trains")
    ap.add_argument("--cpus", default="1,2,4,8,auto")
    args = ap.parse_args()
    os.environ["TAAS_KERNEL"] = os.path.abspath(args.kernel)
    import taastest

    with tempfile.TemporaryDirectory(prefix="taas-pool-bench-") as tmp:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        numpy.save(os.path.join(data, "images.npy"), idx(os.path.join(FASHION, "train-images-idx3-ubyte.gz")))
        numpy.save(os.path.join(data, "labels.npy"),
                   idx(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")).astype(numpy.int64))
        server, port = start_server(args.latency, 0.0, tmp, root=data)
        env = dict(os.environ, TAAS_CACHE_DIR="", TAAS_NPY_MEMORY_LIMIT="1K", TAAS_JOBS_DIR=os.path.join(tmp, "jobs"))
        k = taastest.Kernel(cwd=tmp, env=env)
        try:
            reply, msgs = k.execute(
                "transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
                "train = DataLoader(NpyDataset('http://127.0.0.1:%d/images.npy', 'http://127.0.0.1:%d/labels.npy', "
                "transform=transform), batch_size=64, shuffle=True, num_workers=%d)\nregister(train)"
                % (port, port, args.threads), timeout=300)
            assert reply["content"]["status"] == "ok", msgs
            rows = [run_job(k, c, args.units) for c in args.cpus.split(",")]
        finally:
            k.close()
            server.terminate()
    fixed = [r for r in rows if r["cpus"] != "auto"]
    best = max(fixed, key=lambda r: r["rate"]) if fixed else None
    print("### A pool that sizes itself: the §1 job from a slow source (%.0f ms a request, %d fetches at once a "
          "loader)\n" % (args.latency * 1000, args.threads))
    print("| --cpus | job time (s) | samples/s while training | ranks waited, after the first batch | loader-worker-s "
          "| pool changes | estimate at 10 % (s) | its error |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        err = "%+.1f %%" % (100 * (r["estimate"] - r["secs"]) / r["secs"]) if r["estimate"] else "-"
        print("| %s | %.1f | %s | %.1f %% | %.0f | %s | %s | %s |"
              % (r["cpus"], r["secs"], "{:,}".format(r["rate"]), r["wait"], r["loader_s"],
                 ", ".join(r["changes"]) or "-", "%.0f" % r["estimate"] if r["estimate"] else "-", err))
    auto = [r for r in rows if r["cpus"] == "auto"]
    if best and auto:
        a = auto[0]
        print("\n- best fixed: --cpus %s at %s samples/s; auto: %s samples/s = %.1f %% of it, with %.0f "
              "loader-worker-seconds against its %.0f (%.2fx)"
              % (best["cpus"], "{:,}".format(best["rate"]), "{:,}".format(a["rate"]), 100.0 * a["rate"] / best["rate"],
                 a["loader_s"], best["loader_s"], a["loader_s"] / best["loader_s"]))
    print("- command: `/usr/bin/python3 bench/pool_bench.py --kernel %s --latency %g --threads %d --units %d --cpus %s`"
          % (args.kernel, args.latency, args.threads, args.units, args.cpus))
    print("- job: `#pragma taas --gpus 2 --cpus C --units %d`, the docs/design.md §1 network, Adadelta, batch 64 per "
          "rank, two CPU ranks; the registered loader reads Fashion-MNIST's training set as .npy over HTTP, one "
          "request a sample (fetch cache off)" % args.units)
    print("- machine: %s; measured %s" % (machine(), datetime.date.today().isoformat()))


if __name__ == "__main__":
    main()
