#!/usr/bin/python3
"""Offloaded training over slow storage (issue 5): the docs/design.md §1 network trained in a
`#pragma taas --gpus 2 --cpus C` cell on this machine (two CPU ranks under mpirun), with the
registered training loader reading Fashion-MNIST over HTTP from tests/lib/faultserver.py,
which adds --latency (50 ms) to every request. For C = 1, 2 and 4 loader workers it reports
the share of the ranks' time spent waiting for a batch, from the job's summary line: over
the whole run, and after each rank's first batch (the first batch waits while the loader
workers fetch and decompress the data). The fetch cache is off (TAAS_CACHE_DIR=), so every
loader worker fetches over the slow link.

Runs a real taas-kernel through jupyter_client; prints a markdown table with the command and
the machine. On an otherwise idle machine:

    /usr/bin/python3 bench/offload_bench.py --kernel build/kernel/taas-kernel
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402  (one description of the machine for RESULTS.md)

FASHION = "/usr/share/datasets/fashion-mnist"
NET = ("Sequential(Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(), MaxPool2d(2), Dropout(0.25), "
       "Flatten(), Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5), Linear(128, 10), LogSoftmax(dim=1))")


def start_server(latency, rate, tmp, root=FASHION):
    """tests/lib/faultserver.py serving root (Fashion-MNIST's folder) with its delays; it and
    its port."""
    portfile = os.path.join(tmp, "port")
    proc = subprocess.Popen([sys.executable, os.path.join(SOURCE, "tests", "lib", "faultserver.py"),
                             "--root", root, "--portfile", portfile, "--latency", str(latency),
                             "--rate", str(rate)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(portfile) or not open(portfile).read().strip():
        if time.monotonic() > deadline:
            raise SystemExit("faultserver.py did not start")
        time.sleep(0.05)
    return proc, int(open(portfile).read())


def run_fit(k, cpus, units, timeout=7200):
    """The §1 job in a `#pragma taas --gpus 2 --cpus CPUS --units UNITS` cell on the registered
    `train`: (its streams' text, its messages, wall seconds, the match of its summary line:
    group 1 the job's time, 2 and 3 the ranks' wait over the whole run and after the first
    batch). Shared with pool_bench.py."""
    code = ("#pragma taas --gpus 2 --cpus %s --units %d\n"
            "net = %s\n"
            "fit(net, train, epochs=1, loss=NLLLoss(), optimizer=Adadelta(lr=1.0), seed=1)" % (cpus, units, NET))
    t = time.monotonic()
    reply, msgs = k.execute(code, timeout=timeout)
    wall = time.monotonic() - t
    if reply["content"]["status"] != "ok":
        raise SystemExit("the job failed: %s" % msgs)
    text = "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
    m = re.search(r"done: .* in (.+?); the ranks waited for data ([0-9.]+)% of the time \(([0-9.]+)% after the "
                  r"first batch\)", text)
    if not m:
        raise SystemExit("no summary line in:\n" + text)
    return text, msgs, wall, m


def run_job(k, cpus, units):
    _, msgs, secs, m = run_fit(k, cpus, units, timeout=3600)
    rate = re.findall(r"([0-9,]+) samples/s", "".join(
        m2["content"]["data"]["text/plain"] for m2 in msgs if m2["msg_type"] == "update_display_data"))
    return float(m.group(2)), float(m.group(3)), secs, rate[-1] if rate else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default=os.path.join(SOURCE, "build", "kernel", "taas-kernel"))
    ap.add_argument("--latency", type=float, default=0.05, help="seconds added to each HTTP request")
    ap.add_argument("--rate", type=float, default=0.0, help="bytes/s per connection (0: no cap)")
    ap.add_argument("--units", type=int, default=12800, help="samples each job trains")
    ap.add_argument("--cpus", default="1,2,4")
    args = ap.parse_args()
    os.environ["TAAS_KERNEL"] = os.path.abspath(args.kernel)
    import taastest

    with tempfile.TemporaryDirectory(prefix="taas-offload-bench-") as tmp:
        server, port = start_server(args.latency, args.rate, tmp)
        k = taastest.Kernel(cwd=tmp, env=dict(os.environ, TAAS_CACHE_DIR=""))
        try:
            reply, msgs = k.execute(
                "transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
                "train = DataLoader(FashionMNIST(root='http://127.0.0.1:%d', train=True, transform=transform), "
                "batch_size=64, shuffle=True)\nregister(train)" % port, timeout=120)
            assert reply["content"]["status"] == "ok", msgs
            rows = []
            for c in [int(x) for x in args.cpus.split(",")]:
                rows.append((c,) + run_job(k, c, args.units))
        finally:
            k.close()
            server.terminate()
    cap = ", %.0f MB/s a connection" % (args.rate / 1e6) if args.rate > 0 else ""
    print("### Slow storage: the ranks' wait for batches, Fashion-MNIST over HTTP with %.0f ms a request%s\n"
          % (args.latency * 1000, cap))
    print("| --cpus | waited, whole run | waited, after the first batch | job time (s) | samples/s (rank 0's view) |")
    print("|---:|---:|---:|---:|---:|")
    for c, whole, steady, secs, rate in rows:
        print("| %d | %.1f %% | %.1f %% | %.1f | %s |" % (c, whole, steady, secs, rate))
    print()
    print("- command: `/usr/bin/python3 bench/offload_bench.py --kernel %s --latency %g --rate %g --units %d`"
          % (args.kernel, args.latency, args.rate, args.units))
    print("- job: `#pragma taas --gpus 2 --cpus C --units %d`, the docs/design.md §1 network, Adadelta, batch 64 per "
          "rank; the registered training loader reads Fashion-MNIST's .gz files over HTTP (fetch cache off); two "
          "CPU ranks" % args.units)
    print("- machine: %s; measured %s" % (machine(), datetime.date.today().isoformat()))


if __name__ == "__main__":
    main()
