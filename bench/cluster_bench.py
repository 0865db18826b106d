#!/usr/bin/python3
"""Jobs across hosts (issue 13), on the test cluster of tests/lib/cluster.py (hosts in network
namespaces joined by a bridge on this one machine):

1. The data plane across the bridge: one loader worker's batches to one rank, the receiver in
   host gpu1's network namespace and the sender in cpu1's (taas-stream-bench --bind on gpu1's
   address, --sender-netns cpu1), for taas with CURVE (the planes of a job across machines),
   taas without CURVE, and a bare ZeroMQ PUSH/PULL pair moving the same bytes, alternating
   per round; float32 batches of 64x1x28x28 (0.2 MB) and 256x3x224x224 (154 MB).
2. The docs/design.md section 1 job over Slurm (`#!t1.N` / `#pragma taas --gpus 2 --cpus C`, the
   ranks on the two gpu hosts, the loader workers on the cpu hosts), its training loader
   reading Fashion-MNIST over HTTP from tests/lib/faultserver.py on its host's loopback with
   --latency per request (slow storage, fetch cache off): the share of the ranks' time spent waiting
   for data at C = 1, 2, 4, from the job's summary line.

Needs root and the packages of scripts/deps.sh. Prints markdown for bench/RESULTS.md:

    /usr/bin/python3 bench/cluster_bench.py --build build
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402
from offload_bench import NET  # noqa: E402

SHAPES = [("64,1,28,28", "Fashion-MNIST batch"), ("256,3,224,224", "ImageNet-sized batch")]
IMPLS = ("bare", "taas", "taas-curve")


def stream_case(cl, driver, shape, credit, seconds, rounds):
    rx, tx = cl.host("gpu1"), cl.host("cpu1")
    res = {i: [] for i in IMPLS}
    for r in range(rounds):
        order = IMPLS if r % 2 == 0 else tuple(reversed(IMPLS))
        for impl in order:
            cmd = ["ip", "netns", "exec", rx.netns, driver, "--impl", impl, "--shape", shape,
                   "--seconds", str(seconds), "--warmup", "1", "--min-batches", "20", "--credit", str(credit),
                   "--bind", "tcp://%s:*" % rx.addr, "--sender-netns", "/var/run/netns/" + tx.netns]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            try:
                res[impl].append(json.loads(p.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                raise SystemExit("taas-stream-bench failed (%d): %s %s" % (p.returncode, p.stdout, p.stderr))
    return res


def job_case(cl, kernel_env, cwd, cpus, units, threads):
    import taastest

    k = taastest.Kernel(env=kernel_env, cwd=cwd)
    try:
        reply, msgs = k.execute(SETUP_CELL, timeout=120)
        assert reply["content"]["status"] == "ok", msgs
        code = ("#!t1.%d\n#pragma taas --gpus 2 --cpus %d --units %d\nnet = %s\n"
                "fit(net, train, epochs=1, loss=NLLLoss(), optimizer=Adadelta(lr=1.0), seed=1)"
                % (threads, cpus, units, NET))
        t = time.monotonic()
        reply, msgs = k.execute(code, timeout=3600)
        secs = time.monotonic() - t
    finally:
        k.close()
    text = "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
    if reply["content"]["status"] != "ok":
        raise SystemExit("the job failed:\n" + text)
    import re
    m = re.search(r"the ranks waited for data ([0-9.]+)% of the time \(([0-9.]+)% after the first batch\)", text)
    if not m:
        raise SystemExit("no summary line in:\n" + text)
    return float(m.group(1)), float(m.group(2)), secs


SETUP_CELL = None


def main():
    global SETUP_CELL
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--units", type=int, default=6400)
    ap.add_argument("--cpus", default="1,2,4")
    ap.add_argument("--skip-stream", action="store_true")
    ap.add_argument("--skip-job", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ["TAAS_KERNEL"] = os.path.join(build, "kernel", "taas-kernel")
    os.environ["TAAS_SOURCE_DIR"] = SOURCE
    from cluster import TestCluster

    threads = max(1, (os.cpu_count() or 2) // 2)
    out = []
    with TestCluster(cpus=2, gpus=2, share=[SOURCE, build], cpus_per_host=max(4, threads)) as cl:
        if not args.skip_stream:
            driver = os.path.join(build, "bench", "taas-stream-bench")
            out.append("### The data plane across the test cluster's bridge: CURVE, plain, bare ZeroMQ\n")
            out.append("| batch (float32) | MB | credit | bare ZeroMQ MB/s | taas MB/s | taas + CURVE MB/s | "
                       "CURVE / plain | plain / bare |")
            out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
            for shape, label in SHAPES:
                credit = 21 if shape.startswith("64,") else 4
                res = stream_case(cl, driver, shape, credit, args.seconds, args.rounds)
                size = res["taas"][0]["batch_bytes"]
                med = {i: statistics.median(x["batches_per_s"] for x in res[i]) * size / 1e6 for i in IMPLS}
                out.append("| %s, %s | %.2f | %d | %.0f | %.0f | %.0f | %.0f %% | %.0f %% |" % (
                    shape.replace(",", "×"), label, size / 1e6, credit, med["bare"], med["taas"], med["taas-curve"],
                    100 * med["taas-curve"] / med["taas"], 100 * med["taas"] / med["bare"]))
                out.append("")
                for i in IMPLS:
                    out.append("- %s, %s: MB/s of each round: %s" % (shape, i, ", ".join(
                        "%.0f" % (x["batches_per_s"] * size / 1e6) for x in res[i])))
                out.append("")
            out.append("- command: `/usr/bin/python3 bench/cluster_bench.py --build %s --rounds %d --seconds %g "
                       "--skip-job`; medians of %d rounds, the three alternating" % (args.build, args.rounds,
                                                                                      args.seconds, args.rounds))
            out.append("- the receiver (a rank's ROUTER, or PULL) in gpu1's network namespace bound to its address, "
                       "the sender (a loader's DEALER, or PUSH) in cpu1's; veth → bridge → veth on one machine")
            out.append("")
        if not args.skip_job:
            tmp = tempfile.mkdtemp(prefix="taas-cluster-bench-")
            cfg = os.path.join(tmp, "config.json")
            with open(cfg, "w") as f:
                json.dump({"configurations": {"t1.%d" % threads: {"gpus": 1, "cpus": threads, "partition": "gpu"},
                                              "c1.4": {"gpus": 0, "cpus": 1, "partition": "cpu"}},
                           "cluster": {"backend": "slurm", "munge_socket": cl.munge_socket}}, f)
            # slow storage on each loader host (an HTTP server on its loopback, as a network
            # filesystem's client would be), and one here for the kernel's probe; one port for all
            import socket
            with socket.socket() as so:
                so.bind(("127.0.0.1", 0))
                port = so.getsockname()[1]
            fault = os.path.join(SOURCE, "tests", "lib", "faultserver.py")
            argv = ["/usr/bin/python3", fault, "--root", "/usr/share/datasets/fashion-mnist", "--port", str(port),
                    "--latency", str(args.latency)]
            servers = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
            servers += [cl.popen_on(h.name, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        for h in cl.cpu_hosts]
            try:
                import urllib.request
                deadline = time.monotonic() + 20
                while True:
                    try:
                        urllib.request.urlopen("http://127.0.0.1:%d/_stats" % port, timeout=2).read()
                        ok = all(cl.run_on(h.name, ["/usr/bin/python3", "-c", "import urllib.request; "
                                                    "urllib.request.urlopen('http://127.0.0.1:%d/_stats')" % port])
                                 .returncode == 0 for h in cl.cpu_hosts)
                    except OSError:
                        ok = False
                    if ok:
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit("faultserver.py did not start")
                    time.sleep(0.1)
                SETUP_CELL = ("transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
                              "train = DataLoader(FashionMNIST(root='http://127.0.0.1:%d', train=True, transform=transform), "
                              "batch_size=64, shuffle=True)\nregister(train)" % port)
                env = cl.slurm_env(dict(os.environ, TAAS_CONFIG=cfg, TAAS_CACHE_DIR=""))
                rows = []
                for c in [int(x) for x in args.cpus.split(",")]:
                    rows.append((c,) + job_case(cl, env, tmp, c, args.units, threads))
            finally:
                for sv in servers:
                    sv.terminate()
            out.append("### The §1 job over Slurm: the ranks' wait for batches\n")
            out.append("| --cpus | waited, whole run | waited, after the first batch | cell time (s) |")
            out.append("|---:|---:|---:|---:|")
            for c, whole, steady, secs in rows:
                out.append("| %d | %.1f %% | %.1f %% | %.1f |" % (c, whole, steady, secs))
            out.append("")
            out.append("- command: `/usr/bin/python3 bench/cluster_bench.py --build %s --latency %g --units %d "
                       "--skip-stream`" % (args.build, args.latency, args.units))
            out.append("- job: `#!t1.%d` / `#pragma taas --gpus 2 --cpus C --units %d`, the docs/design.md §1 network, "
                       "Adadelta, batch 64 a rank; one heterogeneous Slurm allocation: the 2 ranks on the gpu hosts "
                       "(the CPU core, %d thread%s each), the C loader workers on the cpu hosts; the loaders read "
                       "Fashion-MNIST's .gz files over HTTP from a server on their host (tests/lib/faultserver.py) "
                       "with %.0f ms a request (fetch cache off)"
                       % (threads, args.units, threads, "" if threads == 1 else "s", args.latency * 1000))
            out.append("")
    out.append("- machine: %s (every host of the test cluster shares its cores); measured %s" % (
        machine(), datetime.date.today().isoformat()))
    print("\n".join(out))


if __name__ == "__main__":
    main()
