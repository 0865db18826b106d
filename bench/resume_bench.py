#!/usr/bin/python3
"""Jobs that survive (issue 15): what checkpoints cost, and what one rank's death costs.

The docs/design.md section 1 job (`#pragma taas --gpus 2 --cpus 2`, Fashion-MNIST's 60,000
training samples, one epoch, batch 64 a rank, Adadelta) through a real taas-kernel, three
cases in alternating rounds:

  none     checkpoint_every=10**12: no checkpoint is ever due (the baseline)
  default  checkpoint_every=None: by time, the first after 10 s, then at most ~1 % of the time
  killed   the default, and rank 1 killed (SIGKILL) once the display shows --kill-step steps
           and a checkpoint exists: the job resumes from it by itself

It reports the cell's wall time of each, the checkpoints' share as the job's summary line
says it, the overhead of default against none, and for killed: the time lost against
default, the steps redone (those after the checkpoint it resumed from), and what is left of
the loss after those steps at the undisturbed run's speed -- the restart itself.

--backend local runs the job on this machine (mpirun); --backend slurm on the test cluster of
tests/lib/cluster.py (root), the ranks on its two gpu hosts, the loaders on its cpu hosts.

    /usr/bin/python3 bench/resume_bench.py --build build --backend local --rounds 2
"""

import argparse
import glob
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
sys.path.insert(0, HERE)
from loader_bench import machine  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
SETUP = ("train = DataLoader(FashionMNIST(root='%s', train=True, transform=Compose([ToTensor(), "
         "Normalize((0.2860,), (0.3530,))])), batch_size=64, shuffle=True)\nregister(train)" % FASHION)
NET = ("Sequential(Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(), MaxPool2d(2), Dropout(0.25), "
       "Flatten(), Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5), Linear(128, 10), LogSoftmax(dim=1))")
EVERY = {"none": "10**12", "default": "None", "killed": "None"}


def cell(head, case):
    return ("%s#pragma taas --gpus 2 --cpus 2\nnet = %s\n"
            "fit(net, train, epochs=1, loss=NLLLoss(), optimizer=Adadelta(lr=1.0), seed=1, checkpoint_every=%s)"
            % (head, NET, EVERY[case]))


def ranks():
    import taastest
    return sorted(p for p, (_, a) in taastest.processes().items()
                  if a.startswith(taastest.worker_binary() + " trainer"))


def run_case(k, head, case, jobs_dir, kill_step):
    import taastest
    from taastest import stream_text

    before = set(glob.glob(os.path.join(jobs_dir, "taas-job-*", "checkpoint-*")))
    t0 = time.monotonic()
    msg_id = k.send("shell", "execute_request", {"code": cell(head, case), "silent": False, "store_history": False,
                                                 "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    seen, killed_at, t_kill = [], None, None
    if case == "killed":
        def due():
            seen.extend(k.iopub_now(msg_id, 0.05))
            steps = [int(s) for m in seen if m["msg_type"] == "update_display_data"
                     for s in re.findall(r"step (\d+)/", m["content"]["data"]["text/plain"])]
            new = set(glob.glob(os.path.join(jobs_dir, "taas-job-*", "checkpoint-*"))) - before
            return steps[-1] if steps and steps[-1] >= kill_step and new else None
        killed_at = taastest.wait_until(due, 3600, interval=0.05)
        victims = ranks()
        if not killed_at or len(victims) != 2:
            raise SystemExit("the job did not reach step %d with a checkpoint (ranks %s)" % (kill_step, victims))
        t_kill = time.monotonic()
        os.kill(victims[1], signal.SIGKILL)
    reply = k.reply(msg_id, timeout=3600)
    secs = time.monotonic() - t0
    msgs = seen + k.iopub(msg_id)
    out, err = stream_text(msgs), stream_text(msgs, "stderr")
    if reply["content"]["status"] != "ok":
        raise SystemExit("the %s job failed:\n%s\n%s" % (case, out, err))
    share = re.search(r"(\d+) checkpoints?, ([0-9.]+) s \(([0-9.]+)% of the time\)", out)
    steps = int(re.search(r"done: 1 epoch, ([0-9,]+) steps", out).group(1).replace(",", ""))
    res = {"secs": secs, "steps": steps, "checkpoints": int(share.group(1)) if share else 0,
           "checkpoint_s": float(share.group(2)) if share else 0.0, "share": float(share.group(3)) if share else 0.0}
    if case == "killed":
        m = re.search(r"resuming from step (\d+) \(epoch 1\), restart 1 of 3", err)
        if not m:
            raise SystemExit("no resume line:\n" + err)
        res.update(killed_at=killed_at, resumed_from=int(m.group(1)), after_kill=time.monotonic() - t_kill)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--backend", choices=["local", "slurm"], default="local")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kill-step", type=int, default=300)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ["TAAS_KERNEL"] = os.path.join(build, "kernel", "taas-kernel")
    os.environ["TAAS_SOURCE_DIR"] = SOURCE
    import taastest

    tmp = tempfile.mkdtemp(prefix="taas-resume-bench-")
    jobs = os.path.join(tmp, "jobs")
    os.mkdir(jobs)
    env = dict(os.environ, TMPDIR=jobs)
    cl, head = None, ""
    threads = max(1, (os.cpu_count() or 2) // 2)
    if args.backend == "slurm":
        from cluster import TestCluster
        cl = TestCluster(cpus=2, gpus=2, share=[SOURCE, build], cpus_per_host=max(4, threads))
        cl.start()
        cfg = os.path.join(tmp, "config.json")
        with open(cfg, "w") as f:
            json.dump({"configurations": {"t1.%d" % threads: {"gpus": 1, "cpus": threads, "partition": "gpu"},
                                          "c1.4": {"gpus": 0, "cpus": 1, "partition": "cpu"}},
                       "cluster": {"backend": "slurm", "munge_socket": cl.munge_socket}}, f)
        env = cl.slurm_env(dict(env, TAAS_CONFIG=cfg))
        head = "#!t1.%d\n" % threads
    results = {c: [] for c in EVERY}
    try:
        k = taastest.Kernel(env=env, cwd=tmp)
        try:
            reply, msgs = k.execute(SETUP, timeout=120)
            if reply["content"]["status"] != "ok":
                raise SystemExit("setup failed: %s" % msgs)
            for r in range(args.rounds):
                for case in EVERY:
                    res = run_case(k, head, case, jobs, args.kill_step)
                    results[case].append(res)
                    print("round %d %s: %s" % (r + 1, case, res), file=sys.stderr)
        finally:
            k.close()
    finally:
        if cl is not None:
            cl.stop()
    med = {c: statistics.median(x["secs"] for x in results[c]) for c in EVERY}
    steps = results["default"][0]["steps"]
    step_s = med["default"] / steps
    print("| case | cell time (s), median | each round (s) | checkpoints | their share (summary line) |")
    print("|---|---:|---|---:|---:|")
    for c in EVERY:
        print("| %s | %.2f | %s | %s | %s |" % (c, med[c], ", ".join("%.2f" % x["secs"] for x in results[c]),
                                               ", ".join(str(x["checkpoints"]) for x in results[c]),
                                               ", ".join("%.1f %%" % x["share"] for x in results[c])))
    print()
    print("- checkpoint overhead (default against none, medians): %.1f %%" % (100 * (med["default"] / med["none"] - 1)))
    for i, x in enumerate(results["killed"]):
        redone = x["killed_at"] - x["resumed_from"]
        lost = x["secs"] - med["default"]
        print("- killed, round %d: killed at step %d, resumed from step %d (%d steps redone, %.2f s at %.1f ms a "
              "step); lost %.2f s against the undisturbed median, %.2f s of it besides the steps redone"
              % (i + 1, x["killed_at"], x["resumed_from"], redone, redone * step_s, 1000 * step_s, lost,
                 lost - redone * step_s))
    print("- command: `/usr/bin/python3 bench/resume_bench.py --build %s --backend %s --rounds %d --kill-step %d`"
          % (args.build, args.backend, args.rounds, args.kill_step))
    print("- machine: %s" % machine())


if __name__ == "__main__":
    main()
