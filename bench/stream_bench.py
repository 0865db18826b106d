#!/usr/bin/python3
"""Data plane benchmark: batches from one loader worker to one rank over loopback TCP through
taas_stream_send / taas_stream_recv, against a bare ZeroMQ PUSH/PULL pair moving the same
bytes per message, in the same run on the same machine.

Each measurement is one run of the C driver (bench/stream_bench.c, built as
build/bench/taas-stream-bench): it forks, the child sends and the parent receives, each with
its own ZeroMQ context, as a loader worker and a rank are separate processes.
- taas: a DEALER per rank and the rank's ROUTER, credit-based flow control (--credit batches
  per connection), the rank's receive thread and reorder table; the taker gets each batch in
  place (the received message) and frees it.
- bare: PUSH -> PULL, one frame per message, zero-copy sends (zmq_msg_init_data); the
  receiver closes each message.
Both senders send from a pool of --credit batches filled once (images, labels and indices as
taas_batch lays them out): a batch goes back to the pool when ZeroMQ has written it, so both
have the same number in flight. The receiver times from the first batch after --warmup
seconds until --seconds and at least --min-batches batches have passed.

Cases: float32 batches of 64x1x28x28 (Fashion-MNIST, 0.2 MB) and 256x3x224x224 (ImageNet
sized, 154 MB), at each --credit given; with --pin, each also with the sending process
pinned to CPU 0 and the receiving one to CPU 1 (sched_setaffinity, their ZeroMQ I/O threads
included), as a loader and a rank on cores of their own would run. The two implementations alternate, --rounds times
per case; the table shows the median and the best of each (the best run is the one least
disturbed by whatever else the machine ran), and every round is listed under it.

Run it on an otherwise idle machine:

    /usr/bin/python3 bench/stream_bench.py --driver build/bench/taas-stream-bench
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402  (one description of the machine for RESULTS.md)
CASES = [("64×1×28×28", "64,1,28,28"), ("256×3×224×224", "256,3,224,224")]
GOAL = 0.80
ROLES = [("1/ZMQbg/IO/0", "loader: ZeroMQ I/O"), ("bench-sender", "loader: sending thread"),
         ("2/ZMQbg/IO/0", "rank: ZeroMQ I/O"), ("taas-recv", "rank: receive thread"),
         ("bench-taker", "rank: taking thread")]
ROLES_LOADER = ("1/ZMQbg/IO/0", "bench-sender")
ROLES_RANK = ("2/ZMQbg/IO/0", "taas-recv", "bench-taker")
MEMORY = 2e9  # a larger credit than the first is not run where its batches would take more


def run(driver, impl, shape, credit, pin, args):
    cmd = [driver, "--impl", impl, "--shape", shape, "--seconds", str(args.seconds),
           "--warmup", str(args.warmup), "--min-batches", str(args.min_batches), "--credit", str(credit)]
    if pin:
        cmd.append("--pin")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit("taas-stream-bench failed (%d): %s %s" % (p.returncode, p.stdout, p.stderr))


def compiler():
    try:
        out = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0]
    except (OSError, IndexError):
        return "?"


def fmt(x, digits=0):
    return "{:,.{}f}".format(x, digits)


def rate(x):
    return fmt(x, 1 if x < 100 else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--driver", default=os.path.join(SOURCE, "build", "bench", "taas-stream-bench"))
    ap.add_argument("--rounds", type=int, default=5, help="alternating runs of each implementation per case")
    ap.add_argument("--seconds", type=float, default=3, help="timed seconds per run")
    ap.add_argument("--warmup", type=float, default=1, help="untimed seconds before")
    ap.add_argument("--min-batches", type=int, default=10, help="timed batches per run at least")
    ap.add_argument("--credit", default="4", help="taas credit per connection = batches in flight on the "
                                                 "sending side for both; a list (4,32) runs each")
    ap.add_argument("--pin", action="store_true", help="also run each case with the sender pinned to CPU 0 and "
                                                        "the receiver to CPU 1")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    if not os.access(args.driver, os.X_OK):
        raise SystemExit("no taas-stream-bench at %s: build the project first (--driver PATH)" % args.driver)
    credits = [int(c) for c in args.credit.split(",")]

    started = time.monotonic()
    load = os.getloadavg()
    raw = {}
    rows, spread, cpu_rows = [], [], []
    libzmq = "?"
    for label, shape in CASES:
        n, c, h, w = (int(x) for x in shape.split(","))
        size = n * c * h * w * 4 + n * 16 + 256  # about; the driver reports it exactly
        for credit, pin in [(c, p) for c in credits for p in ((False, True) if args.pin else (False,))]:
            if credit > min(credits) and credit * size > MEMORY:
                if not pin:
                    spread.append("- %s, credit %d: not run (%.1f GB in flight on each side)" % (
                        label, credit, credit * size / 1e9))
                continue
            res = {"taas": [], "bare": []}
            for r in range(args.rounds):
                for impl in (("bare", "taas") if r % 2 == 0 else ("taas", "bare")):
                    out = run(args.driver, impl, shape, credit, pin, args)
                    res[impl].append(out)
                    libzmq = out["libzmq"]
            where = "pinned" if pin else "unpinned"
            raw["%s credit %d %s" % (label, credit, where)] = res
            med = {impl: statistics.median(x["batches_per_s"] for x in res[impl]) for impl in res}
            best = {impl: max(x["batches_per_s"] for x in res[impl]) for impl in res}
            size = res["taas"][0]["batch_bytes"]  # exact
            ratio = med["taas"] / med["bare"]
            rows.append("| %s | %s | %d | %s | %s (%s) | %s | %s (%s) | %s | %.0f %% | %.0f %% | ≥ %.0f %%: %s |" % (
                label, fmt(size / 1e6, 2), credit, where, rate(med["taas"]), rate(best["taas"]),
                fmt(med["taas"] * size / 1e9, 2), rate(med["bare"]), rate(best["bare"]),
                fmt(med["bare"] * size / 1e9, 2), 100 * ratio, 100 * best["taas"] / best["bare"], 100 * GOAL,
                "met" if ratio >= GOAL else "not met"))
            for impl in ("taas", "bare"):
                cpu = {role: statistics.median(x["cpu_us_per_batch"].get(role, 0) for x in res[impl])
                       for role, _ in ROLES}
                cpu_rows.append("| %s | %d | %s | %s | %s | %s | %s |" % (
                    label, credit, where, impl, " | ".join(fmt(cpu[role], 1) for role, _ in ROLES),
                    fmt(sum(cpu[r] for r in ROLES_LOADER), 1), fmt(sum(cpu[r] for r in ROLES_RANK), 1)))
            spread.append("- %s, credit %d, %s, batches/s of each round: taas %s; bare %s" % (
                label, credit, where, ", ".join(fmt(x["batches_per_s"], 1) for x in res["taas"]),
                ", ".join(fmt(x["batches_per_s"], 1) for x in res["bare"])))
    load_after = os.getloadavg()

    cmd = " ".join(["/usr/bin/python3", "bench/stream_bench.py"] + sys.argv[1:])
    out = ["## Data plane: loader-to-rank streaming against bare ZeroMQ (issue 5)", "",
           "Command: `%s` (%.0f s)" % (cmd, time.monotonic() - started), "",
           "- machine: %s; load average %.2f before, %.2f after" % (machine(), load[0], load_after[0]),
           "- libzmq %s (Debian), %s; two processes per run (the loader worker forked from the rank), "
           "loopback TCP" % (libzmq, compiler()),
           "- credit: batches per connection for taas, and the sending pool (batches in flight on the "
           "sending side) for both; median of %d alternating runs, each %g s after a %g s warm-up" % (
               args.rounds, args.seconds, args.warmup),
           "- measured %s" % datetime.date.today().isoformat(), "",
           "| batch (float32, N×C×H×W) | MB per batch | credit | processes | taas batches/s, median (best) "
           "| taas GB/s | bare batches/s, median (best) | bare GB/s | taas / bare, medians | taas / bare, bests "
           "| goal |",
           "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"] + rows + [""] + spread + [
           "", "CPU time per batch by thread, in µs (median of the rounds; /proc, over the timed part):", "",
           "| batch | credit | processes | impl | %s | loader side | rank side |" % " | ".join(h for _, h in ROLES),
           "|---|---:|---|---|%s---:|---:|" % ("---:|" * len(ROLES))] + cpu_rows
    print("\n".join(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
