#!/usr/bin/python3
"""Control-plane load at the kernel (docs/scale.md, section 3): what the kernel's process
spends on the job's control messages when N ranks and L loader workers each send a
heartbeat every second and rank 0 sends its "step" message five times a second.

1. Emulated workers (default). A small C driver, compiled here against the project's own
   control-plane code (build/workers/libtaas_jobctl.a, build/common/libtaas_common.a: the
   taas_ctl_* and taas_zsock_* that the kernel and the workers use), plays both sides:
   - "kernel": one ROUTER made as kernel/job/job_plan.c makes it (handover, mandatory,
     maxmsg; CURVE with a ZAP handler when --transport curve). Its loop is the kernel's:
     wait on the socket until the next heartbeat is due, then drain it with
     taas_ctl_recv(ZMQ_DONTWAIT) (at most 10,000 a wake-up), dispatch each message as
     kernel/job/job.c's on_msg does (rank_of with sscanf, loader_of by a linear search of
     the loaders, the chain of type comparisons, the six fields of a "step" read), and
     every second send "hb" to every worker that said hello (job.c's heartbeats()).
     It does not render the training display: "step" messages are ≤ 5 a second whatever
     N is, and the real kernel's cost for them is measured by mode 2.
   - "workers": one process holding the N + L DEALERs (taas_ctl_connect, identities
     "rank.R" and "loader.0.J.0" as the kernel names them): each says hello, then sends
     {"t":"hb"} every second (the workers' clocks spread over the second), rank 0 also a
     "step" body five times a second; they read the kernel's heartbeats.
   The kernel side measures its own process's CPU time (getrusage, every thread: ZeroMQ's
   I/O thread and the ZAP handler included) over --seconds after a warm-up, and the
   messages it handled. Result: the share of one core, and microseconds per message
   (CPU ÷ messages received and sent).
2. --kernel PATH: the real taas-kernel (jupyter_client) runs the docs/design.md §1 job with
   `#pragma taas --gpus 2 --cpus 2`; the kernel process's CPU time (the sum of
   /proc/PID/task/*/schedstat) is sampled every 0.25 s while the cell runs, and the rate
   over the middle half of the run is reported: 4 workers' heartbeats, rank 0's steps and
   the display updates (≤ 5/s).

    /usr/bin/python3 bench/ctl_rate.py --cases 8:5,64:34,1024:544 --transport ipc,curve
    /usr/bin/python3 bench/ctl_rate.py --kernel build/kernel/taas-kernel --no-emulate

Each case runs --repeat times (median reported, with every run's figure); the load average
before each run is printed. Needs cc, libzmq, jansson and libsodium headers (the build's).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader_bench import machine  # noqa: E402  (one description of the machine for RESULTS.md)
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)

DRIVER = r"""
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "jobctl.h"
#include "zsock.h"

static double tv(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }
static double cpu(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return tv(ru.ru_utime) + tv(ru.ru_stime);
}
static void die(const char *what, const taas_error *e) {
    fprintf(stderr, "ctl_rate: %s: %s\n", what, e ? e->message : zmq_strerror(zmq_errno()));
    exit(1);
}

/* ---- the kernel's side, as kernel/job/job.c serves the control plane ---- */

typedef struct { char peer[64]; int hello, alive; } loader_t;
typedef struct {
    int world, nloaders;
    int *rank_hello;
    loader_t *loaders;
    long long hellos, hb, step, other;
    long long epoch, stepno, steps;
    double loss, sps, wait;
} state;

static int rank_of(const state *s, const char *peer) {
    int r;
    char rest;
    return sscanf(peer, "rank.%d%c", &r, &rest) == 1 && r >= 0 && r < s->world ? r : -1;
}
static loader_t *loader_of(state *s, const char *peer) {
    for (int i = 0; i < s->nloaders; i++)
        if (!strcmp(s->loaders[i].peer, peer)) return &s->loaders[i];
    return NULL;
}
static void on_msg(state *s, taas_ctl_msg *m) {
    const char *t = taas_ctl_type(m);
    const json_t *b = m->body;
    int r = rank_of(s, m->peer);
    loader_t *l = r < 0 ? loader_of(s, m->peer) : NULL;
    if (r < 0 && !l) return;
    if (!strcmp(t, "hello")) {
        if (r >= 0 && !s->rank_hello[r]) s->rank_hello[r] = 1, s->hellos++;
        else if (l && !l->hello) l->hello = l->alive = 1, s->hellos++;
    } else if (!strcmp(t, "ready")) {
        s->other++;
    } else if (!strcmp(t, "log")) {
        s->other++;
    } else if (!strcmp(t, "start") && r == 0) {
        s->other++;
    } else if (!strcmp(t, "step") && r == 0) {
        s->epoch = (long long)json_integer_value(json_object_get(b, "epoch"));
        s->stepno = (long long)json_integer_value(json_object_get(b, "step"));
        s->steps = (long long)json_integer_value(json_object_get(b, "steps"));
        s->loss = json_number_value(json_object_get(b, "loss"));
        s->sps = json_number_value(json_object_get(b, "samples_per_s"));
        s->wait = json_number_value(json_object_get(b, "wait"));
        s->step++;
    } else if (!strcmp(t, "epoch") && r == 0) {
        s->other++;
    } else if (!strcmp(t, "done") && r == 0) {
        s->other++;
    } else if (!strcmp(t, "ended") && l) {
        s->other++;
    } else if (!strcmp(t, "error")) {
        s->other++;
    } else {
        s->hb++;  /* "hb": no branch of on_msg takes it */
    }
}

static long long serve(state *s, void *router) {
    long long n = 0;
    for (int i = 0; i < 10000; i++) {
        taas_ctl_msg m;
        taas_error e;
        int rc = taas_ctl_recv(router, 1, ZMQ_DONTWAIT, &m, &e);
        if (rc == 1) break;
        if (rc < 0) continue;
        on_msg(s, &m);
        taas_ctl_msg_clear(&m);
        n++;
    }
    return n;
}

static long long heartbeats(state *s, void *router) {
    long long n = 0;
    char peer[32];
    taas_error e;
    for (int r = 0; r < s->world; r++)
        if (s->rank_hello[r]) {
            snprintf(peer, sizeof peer, "rank.%d", r);
            taas_ctl_send(router, peer, taas_ctl_body("hb"), NULL, 0, ZMQ_DONTWAIT, &e);
            n++;
        }
    for (int i = 0; i < s->nloaders; i++)
        if (s->loaders[i].hello && s->loaders[i].alive) {
            taas_ctl_send(router, s->loaders[i].peer, taas_ctl_body("hb"), NULL, 0, ZMQ_DONTWAIT, &e);
            n++;
        }
    return n;
}

static int kernel_main(int world, int nloaders, int curve, const char *ipc, double warmup, double seconds) {
    taas_error e;
    state s = {.world = world, .nloaders = nloaders};
    s.rank_hello = calloc((size_t)world, sizeof *s.rank_hello);
    s.loaders = calloc((size_t)(nloaders ? nloaders : 1), sizeof *s.loaders);
    for (int i = 0; i < nloaders; i++) snprintf(s.loaders[i].peer, sizeof s.loaders[i].peer, "loader.0.%d.0", i);
    void *zctx = zmq_ctx_new();
    taas_zkeys keys;
    taas_zsec *sec = NULL;
    if (curve && (taas_zkeys_new(&keys, &e) || !(sec = taas_zsec_new(zctx, &keys, 1, &e)))) die("keys", &e);
    taas_zsock_cfg c = {.type = ZMQ_ROUTER, .what = "the job's control", .sec = sec, .linger_ms = 0,
                        .sndhwm = -1, .rcvhwm = -1, .maxmsg = (int64_t)1 << 34,
                        .flags = TAAS_ZSOCK_HANDOVER | TAAS_ZSOCK_MANDATORY};
    char want[512], bound[512];
    if (curve) snprintf(want, sizeof want, "tcp://127.0.0.1:*");
    else snprintf(want, sizeof want, "ipc://%s", ipc);
    void *router = taas_zsock_bind(zctx, &c, want, bound, sizeof bound, &e);
    if (!router) die("bind", &e);
    char text[TAAS_ZKEYS_TEXT + 1] = "";
    if (curve) taas_zkeys_text(&keys, text);
    printf("{\"endpoint\": \"%s\", \"keys\": \"%s\"}\n", bound, text);
    fflush(stdout);
    /* every worker says hello; then warm up, then measure */
    double now = taas_now(), until = now + 120, next_beat = now + TAAS_CTL_HEARTBEAT_S;
    double t0 = 0, c0 = 0, c0t = 0, end = 0;
    long long in0 = 0, out0 = 0, hb0 = 0, step0 = 0, in = 0, out = 0, wakeups = 0, wake0 = 0;
    int phase = 0;  /* 0: hellos, 1: warm-up, 2: measuring */
    for (;;) {
        now = taas_now();
        if (phase == 0 && s.hellos == world + nloaders) phase = 1, until = now + warmup;
        else if (phase == 0 && now > until) {
            fprintf(stderr, "ctl_rate: only %lld of %d workers said hello\n", s.hellos, world + nloaders);
            return 1;
        }
        if (phase == 1 && now >= until) {
            phase = 2, t0 = now, c0 = cpu(RUSAGE_SELF), c0t = cpu(RUSAGE_THREAD), end = now + seconds;
            in0 = in, out0 = out, hb0 = s.hb, step0 = s.step, wake0 = wakeups;
        }
        if (phase == 2 && now >= end) break;
        double due = next_beat;
        if (phase == 1 && until < due) due = until;
        if (phase == 2 && end < due) due = end;
        long ms = (long)((due - now) * 1000) + 1;
        zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, ms < 1 ? 1 : ms);
        wakeups++;
        in += serve(&s, router);
        now = taas_now();
        if (now >= next_beat) {
            next_beat = now + TAAS_CTL_HEARTBEAT_S;
            out += heartbeats(&s, router);
        }
    }
    double wall = taas_now() - t0, used = cpu(RUSAGE_SELF) - c0, used_t = cpu(RUSAGE_THREAD) - c0t;
    long long msgs = (in - in0) + (out - out0);
    printf("{\"ranks\": %d, \"loaders\": %d, \"transport\": \"%s\", \"wall_s\": %.3f, \"cpu_s\": %.4f, "
           "\"main_thread_cpu_s\": %.4f, \"in\": %lld, \"in_hb\": %lld, \"in_step\": %lld, \"out\": %lld, "
           "\"wakeups\": %lld, \"core_share\": %.6f, \"us_per_msg\": %.3f, \"msgs_per_s\": %.1f}\n",
           world, nloaders, curve ? "curve" : "ipc", wall, used, used_t, in - in0, s.hb - hb0, s.step - step0,
           out - out0, wakeups - wake0, used / wall, msgs ? used / (double)msgs * 1e6 : 0, msgs / wall);
    fflush(stdout);
    zmq_close(router);
    taas_zsec_free(sec);
    zmq_ctx_term(zctx);
    return 0;
}

/* ---- the workers' side: N + L DEALERs in one process ---- */

static int workers_main(int world, int nloaders, const char *endpoint, const char *keytext, double seconds) {
    taas_error e;
    int n = world + nloaders;
    void *zctx = zmq_ctx_new();
    zmq_ctx_set(zctx, ZMQ_MAX_SOCKETS, n + 64);
    taas_zkeys keys;
    taas_zsec *sec = NULL;
    if (keytext && *keytext) {
        if (taas_zkeys_parse(keytext, "the driver", &keys, &e) || !(sec = taas_zsec_new(zctx, &keys, 0, &e)))
            die("keys", &e);
    }
    void **socks = calloc((size_t)n, sizeof *socks);
    double *next = calloc((size_t)n, sizeof *next);
    double start = taas_now();
    for (int i = 0; i < n; i++) {
        char id[64];
        if (i < world) snprintf(id, sizeof id, "rank.%d", i);
        else snprintf(id, sizeof id, "loader.0.%d.0", i - world);
        if (!(socks[i] = taas_ctl_connect(zctx, sec, endpoint, id, &e))) die("connect", &e);
        json_t *hello = i < world ? json_pack("{s:s, s:s, s:i, s:s, s:i}", "t", "hello", "role", "trainer",
                                              "rank", i, "host", "bench", "pid", (int)getpid())
                                  : json_pack("{s:s, s:s, s:i, s:i, s:i}", "t", "hello", "role", "loader",
                                              "stream", 0, "worker", i - world, "generation", 0);
        if (taas_ctl_send(socks[i], NULL, hello, NULL, 0, 0, &e)) die("hello", &e);
        next[i] = start + 1.0 + (double)i / n;  /* the workers' clocks spread over the second */
    }
    double end = start + seconds, next_step = start + 1.0, next_drain = start;
    long long step = 0;
    while (taas_now() < end) {
        double now = taas_now(), soonest = next_step < next_drain ? next_step : next_drain;
        for (int i = 0; i < n; i++) {
            if (now >= next[i]) {
                taas_ctl_send(socks[i], NULL, taas_ctl_body("hb"), NULL, 0, ZMQ_DONTWAIT, &e);
                next[i] += TAAS_CTL_HEARTBEAT_S;
            }
            if (next[i] < soonest) soonest = next[i];
        }
        if (now >= next_step && world > 0) {  /* rank 0, at most five a second (workers/fit_loop.c) */
            json_t *b = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f}", "t", "step", "epoch", (json_int_t)1,
                                  "step", (json_int_t)++step, "steps", (json_int_t)937, "loss", 0.43521,
                                  "samples_per_s", 153456.5, "wait", 0.0123);
            taas_ctl_send(socks[0], NULL, b, NULL, 0, ZMQ_DONTWAIT, &e);
            next_step += 0.2;
        }
        if (now >= next_drain) {  /* the kernel's heartbeats */
            for (int i = 0; i < n; i++) {
                taas_ctl_msg m;
                while (taas_ctl_recv(socks[i], 0, ZMQ_DONTWAIT, &m, &e) == 0) taas_ctl_msg_clear(&m);
            }
            next_drain = now + 0.25;
        }
        double wait = soonest - taas_now();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < n; i++) zmq_close(socks[i]);
    taas_zsec_free(sec);
    zmq_ctx_term(zctx);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 8 && !strcmp(argv[1], "kernel"))
        return kernel_main(atoi(argv[2]), atoi(argv[3]), !strcmp(argv[4], "curve"), argv[5], atof(argv[6]),
                           atof(argv[7]));
    if (argc >= 7 && !strcmp(argv[1], "workers"))
        return workers_main(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5], atof(argv[6]));
    fprintf(stderr, "usage: ctl-rate kernel RANKS LOADERS ipc|curve IPC_PATH WARMUP SECONDS\n"
                    "       ctl-rate workers RANKS LOADERS ENDPOINT KEYS SECONDS\n");
    return 2;
}
"""


def build(tmp, build_dir):
    src = os.path.join(tmp, "ctl_rate.c")
    exe = os.path.join(tmp, "ctl-rate")
    with open(src, "w") as f:
        f.write(DRIVER)
    cmd = ["cc", "-O2", "-std=c11", "-I", os.path.join(SOURCE, "workers"), "-I", os.path.join(SOURCE, "common"),
           src, os.path.join(build_dir, "workers", "libtaas_jobctl.a"),
           os.path.join(build_dir, "common", "libtaas_common.a"),
           "-lzmq", "-ljansson", "-lsodium", "-lpthread", "-o", exe]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("could not build the driver:\n%s\n%s" % (" ".join(cmd), p.stderr))
    return exe


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def emulate(exe, ranks, loaders, transport, warmup, seconds, tmp):
    ipc = os.path.join(tmp, "control")
    k = subprocess.Popen([exe, "kernel", str(ranks), str(loaders), transport, ipc, str(warmup), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(k.stdout.readline())
        w = subprocess.Popen([exe, "workers", str(ranks), str(loaders), first["endpoint"], first["keys"],
                              str(warmup + seconds + 30)])
        try:
            out, _ = k.communicate(timeout=warmup + seconds + 150)
        finally:
            w.terminate()
            w.wait()
    finally:
        if k.poll() is None:
            k.kill()
            k.wait()
    if k.returncode:
        raise SystemExit("the kernel side failed (%d)" % k.returncode)
    return json.loads(out.strip().splitlines()[-1])


def proc_cpu(pid):
    """CPU seconds of every live thread of pid, from /proc/PID/task/*/schedstat (nanoseconds;
    /proc/PID/stat counts 10 ms ticks, too coarse for a kernel that is mostly idle)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1e9


NET = ("Sequential(Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(), MaxPool2d(2), Dropout(0.25), "
       "Flatten(), Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5), Linear(128, 10), LogSoftmax(dim=1))")


def real_kernel(kernel, units):
    sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
    os.environ["TAAS_KERNEL"] = os.path.abspath(kernel)
    import taastest

    with tempfile.TemporaryDirectory(prefix="taas-ctl-rate-") as tmp:
        k = taastest.Kernel(cwd=tmp)
        try:
            reply, msgs = k.execute(
                "transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
                "train = DataLoader(FashionMNIST(train=True, transform=transform), batch_size=64, shuffle=True)\n"
                "register(train)", timeout=120)
            assert reply["content"]["status"] == "ok", msgs
            samples, stop = [], threading.Event()

            def sample():
                while not stop.is_set():
                    samples.append((time.monotonic(), proc_cpu(k.pid)))
                    time.sleep(0.25)

            idle0 = (time.monotonic(), proc_cpu(k.pid))
            time.sleep(5)
            idle1 = (time.monotonic(), proc_cpu(k.pid))
            th = threading.Thread(target=sample)
            th.start()
            code = ("#pragma taas --gpus 2 --cpus 2 --units %d\nnet = %s\n"
                    "fit(net, train, epochs=1, loss=NLLLoss(), optimizer=Adadelta(lr=1.0), seed=1)" % (units, NET))
            reply, msgs = k.execute(code, timeout=3600)
            stop.set()
            th.join()
            if reply["content"]["status"] != "ok":
                raise SystemExit("the job failed: %s" % msgs)
        finally:
            k.close()
    t_first, t_last = samples[0][0], samples[-1][0]
    lo, hi = t_first + 0.25 * (t_last - t_first), t_first + 0.75 * (t_last - t_first)
    mid = [s for s in samples if lo <= s[0] <= hi]
    updates = sum(1 for m in msgs if m["msg_type"] == "update_display_data")
    return {"job_s": t_last - t_first, "window_s": mid[-1][0] - mid[0][0],
            "core_share": (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0]),
            "whole_run_core_share": (samples[-1][1] - samples[0][1]) / (t_last - t_first),
            "idle_core_share": (idle1[1] - idle0[1]) / (idle1[0] - idle0[0]),
            "display_updates": updates, "display_updates_per_s": updates / (t_last - t_first)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--cases", default="8:5,64:34,1024:544", help="RANKS:LOADERS,...")
    ap.add_argument("--transport", default="ipc,curve", help="ipc (a job on one machine), curve (tcp + CURVE: "
                    "a job across machines), or both")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds after the last hello before measuring")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernel", help="also measure the real taas-kernel running a --gpus 2 --cpus 2 job")
    ap.add_argument("--units", type=int, default=30000, help="samples the real job trains")
    ap.add_argument("--no-emulate", action="store_true", help="only the real kernel")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    raw = {"emulated": [], "kernel": []}
    print("machine: %s; %s" % (machine(), datetime.datetime.now().isoformat(timespec="seconds")))
    if not args.no_emulate:
        with tempfile.TemporaryDirectory(prefix="taas-ctl-rate-") as tmp:
            exe = build(tmp, args.build_dir)
            print("\n| transport | ranks N | loaders L | messages/s at the kernel (in + out) | kernel CPU, "
                  "share of one core (median) | µs per message (median) | runs: share of a core |")
            print("|---|---:|---:|---:|---:|---:|---|")
            for case in args.cases.split(","):
                ranks, loaders = (int(x) for x in case.split(":"))
                for transport in args.transport.split(","):
                    runs = []
                    for _ in range(args.repeat):
                        load = loadavg()
                        r = emulate(exe, ranks, loaders, transport, args.warmup, args.seconds, tmp)
                        r["loadavg_before"] = load
                        runs.append(r)
                        raw["emulated"].append(r)
                        print("  run: %s" % json.dumps(r), file=sys.stderr)
                    print("| %s | %d | %d | %.0f | %.4f | %.1f | %s |" % (
                        transport, ranks, loaders, statistics.median(r["msgs_per_s"] for r in runs),
                        statistics.median(r["core_share"] for r in runs),
                        statistics.median(r["us_per_msg"] for r in runs),
                        ", ".join("%.4f (load %s)" % (r["core_share"], r["loadavg_before"]) for r in runs)))
    if args.kernel:
        print("\n| real taas-kernel, --gpus 2 --cpus 2 job | job s | kernel CPU, share of one core, middle half | "
              "whole run | idle kernel | display updates/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for _ in range(args.repeat):
            load = loadavg()
            r = real_kernel(args.kernel, args.units)
            r["loadavg_before"] = load
            raw["kernel"].append(r)
            print("| load %s | %.1f | %.4f | %.4f | %.4f | %.1f |" % (
                load, r["job_s"], r["core_share"], r["whole_run_core_share"], r["idle_core_share"],
                r["display_updates_per_s"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
