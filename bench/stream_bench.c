/* taas-stream-bench: the C side of bench/stream_bench.py. Moves batches from one loader worker
 * to one rank over loopback TCP and prints one JSON line with the receiving side's figures:
 *
 *   taas-stream-bench --impl taas|taas-curve|bare --shape N,C,H,W [--seconds S] [--warmup S]
 *                     [--min-batches M] [--credit K] [--pin]
 *                     [--bind ENDPOINT] [--sender-netns PATH]
 *
 * --bind: where the receiver binds (tcp://127.0.0.1:* by default); --sender-netns: the network
 * namespace (/var/run/netns/NAME) the sender joins after the fork, so that the batches cross
 * a bridge between two test hosts (bench/curve_bench.py) instead of the loopback.
 * Two processes, for all implementations: the program forks; the child sends, the parent
 * receives (each with its own ZeroMQ context and I/O thread, as a loader and a rank are).
 *   taas: taas_stream_send_batch -> taas_stream_recv_take (DEALER -> ROUTER, credit K, the
 *         rank's receive thread and reorder table), the taker frees each batch.
 *   taas-curve: the same with the job planes' CURVE security (common/zsock.h): keys made for
 *         the run, the rank's ZAP handler admitting the loader's key, every frame encrypted.
 *   bare: a PUSH -> PULL pair moving the same bytes per message, zero-copy on the send side
 *         too (zmq_msg_init_data), the receiver closes each message.
 * Both senders send from a pool of K ready batches (filled once, as a loader's decode threads
 * would have filled them): a batch goes back to the pool when ZeroMQ has written it, so both
 * have at most K batches in flight. The receiver times from the first batch after the
 * warm-up until at least S seconds and M batches have passed, and reads the CPU time of every
 * thread of both processes (/proc) over that time: cpu_us_per_batch by thread name (the
 * sender's threads are bench-sender and 1/ZMQbg/IO/0, the receiver's bench-taker,
 * 2/ZMQbg/IO/0 and, for taas, taas-recv). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "batch.h"
#include "clock.h"
#include "stream_recv.h"
#include "stream_send.h"
#include "zsock.h"

static taas_zkeys KEYS;     /* made before the fork: both processes have them, as a job's do */

typedef struct opts {
    int taas;
    int curve;              /* taas with CURVE */
    uint32_t n, c, h, w;
    double seconds, warmup;
    uint64_t min_batches;
    uint32_t credit;
    int pin;                /* the sender on CPU 0, the receiver on CPU 1 */
    const char *bind;       /* the receiver's endpoint */
    const char *sender_netns;
} opts;

/* ---- the sender's pool of ready batches ----------------------------------------------- */

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    taas_batch **free;
    int nfree;
} pool;

static pool POOL;

static taas_batch *pool_get(void) {
    pthread_mutex_lock(&POOL.mu);
    while (POOL.nfree == 0) pthread_cond_wait(&POOL.cv, &POOL.mu);
    taas_batch *b = POOL.free[--POOL.nfree];
    pthread_mutex_unlock(&POOL.mu);
    return b;
}

static void pool_put(void *backing) { /* on ZeroMQ's I/O thread */
    pthread_mutex_lock(&POOL.mu);
    POOL.free[POOL.nfree++] = backing;
    pthread_cond_signal(&POOL.cv);
    pthread_mutex_unlock(&POOL.mu);
}

static void pool_put_msg(void *data, void *hint) {
    (void)data;
    pool_put(hint);
}

static void pool_fill(const opts *o, int k) {
    pthread_mutex_init(&POOL.mu, NULL);
    pthread_cond_init(&POOL.cv, NULL);
    POOL.free = calloc((size_t)k, sizeof *POOL.free);
    for (int i = 0; i < k; i++) {
        taas_batch *b = taas_batch_alloc(0, 0, o->n, o->c, o->h, o->w);
        if (!POOL.free || !b) {
            fprintf(stderr, "taas-stream-bench: out of memory for the sender's batches\n");
            exit(1);
        }
        size_t px = (size_t)o->n * o->c * o->h * o->w;
        for (size_t j = 0; j < px; j++) b->images[j] = (float)(j % 251) / 251.0f;
        for (uint32_t j = 0; j < o->n; j++) {
            b->labels[j] = j % 10;
            b->indices[j] = j;
        }
        POOL.free[POOL.nfree++] = b;
    }
}

/* The batch's item number, in its header (after the magic and the epoch) and its fields. */
static void set_item(taas_batch *b, uint64_t k) {
    b->k = k;
    memcpy((char *)b->buf + 16, &k, sizeof k);
}

static void sender(const opts *o, const char *endpoint) {
    prctl(PR_SET_NAME, "bench-sender"); /* names for profiles: bench-sender, 1/ZMQbg/IO/0 */
    void *zctx = zmq_ctx_new();
    zmq_ctx_set(zctx, ZMQ_THREAD_NAME_PREFIX, 1);
    pool_fill(o, (int)o->credit);
    taas_error err;
    taas_error_clear(&err);
    if (o->taas) {
        taas_zsec *sec = o->curve ? taas_zsec_new(zctx, &KEYS, 0, &err) : NULL;
        if (o->curve && !sec) fprintf(stderr, "taas-stream-bench: %s\n", err.message), _exit(1);
        taas_stream_send_cfg c = {.zctx = zctx, .sec = sec, .stream = 0, .worker = 0, .world = 1, .ranks = &endpoint};
        taas_stream_send *s = taas_stream_send_new(&c, &err);
        for (uint64_t k = 0; s; k++) {
            taas_batch *backing = pool_get(), *b = malloc(sizeof *b);
            set_item(backing, k);
            *b = *backing;
            b->release = pool_put; /* taas_batch_free gives the buffer back, frees b */
            b->release_ctx = backing;
            if (taas_stream_send_batch(s, b, -1, NULL, &err)) break;
        }
    } else {
        void *push = zmq_socket(zctx, ZMQ_PUSH);
        int zero = 0;
        zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(push, endpoint);
        for (uint64_t k = 0;; k++) {
            taas_batch *backing = pool_get();
            set_item(backing, k);
            zmq_msg_t m;
            zmq_msg_init_data(&m, backing->buf, backing->buf_len, pool_put_msg, backing);
            if (zmq_msg_send(&m, push, 0) < 0) break;
        }
    }
    fprintf(stderr, "taas-stream-bench: the sender stopped: %s\n", err.message);
    _exit(1);
}

/* ---- CPU time per thread, from /proc ------------------------------------------------------- */

enum { MAX_THREADS = 16 };

typedef struct cpu_snap {
    int n;
    char name[MAX_THREADS][32];
    double s[MAX_THREADS]; /* user + system seconds */
} cpu_snap;

/* Adds the threads of process pid (named by their comm) to snap. */
static void cpu_read(pid_t pid, cpu_snap *snap) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    long hz = sysconf(_SC_CLK_TCK);
    while (d && (e = readdir(d)) && snap->n < MAX_THREADS) {
        char stat[512], file[96];
        snprintf(file, sizeof file, "%s/%.20s/stat", path, e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(file, "r") : NULL;
        size_t got = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
        if (f) fclose(f);
        stat[got] = '\0';
        char *open = strchr(stat, '('), *close = strrchr(stat, ')');
        unsigned long ut, st;
        /* after "(comm) ": state and 10 fields, then utime and stime */
        if (!open || !close || sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
            continue;
        snprintf(snap->name[snap->n], sizeof snap->name[0], "%.*s", (int)(close - open - 1), open + 1);
        snap->s[snap->n++] = (double)(ut + st) / (double)hz;
    }
    if (d) closedir(d);
}

/* The CPU each thread (by name) spent between a and b, per batch, in microseconds. */
static json_t *cpu_per_batch(const cpu_snap *a, const cpu_snap *b, uint64_t batches) {
    json_t *out = json_object();
    for (int i = 0; i < b->n; i++) {
        double before = 0;
        for (int j = 0; j < a->n; j++)
            if (!strcmp(a->name[j], b->name[i])) before = a->s[j];
        json_t *old = json_object_get(out, b->name[i]);
        double us = (b->s[i] - before) * 1e6 / (double)(batches ? batches : 1) + (old ? json_real_value(old) : 0);
        json_object_set_new(out, b->name[i], json_real(us));
    }
    return out;
}

/* ---- the receiver ----------------------------------------------------------------------- */

typedef struct rx {
    taas_stream_recv *r;
    void *pull;
    uint64_t k;
    size_t len;
} rx;

static int receive_one(rx *x, taas_error *err) {
    if (x->r) {
        taas_batch *b;
        if (taas_stream_recv_take(x->r, 0, 0, x->k++, 60, NULL, &b, err)) return -1;
        x->len = b->buf_len;
        taas_batch_free(b);
        return 0;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, x->pull, 0) < 0) {
        taas_error_set(err, "TaasIOError", (taas_srcpos){0, 0}, "receiving: %s", zmq_strerror(errno));
        return -1;
    }
    x->len = zmq_msg_size(&m);
    zmq_msg_close(&m);
    return 0;
}

/* This process and the threads it starts from now on (ZeroMQ's I/O thread) on one CPU. */
static void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) perror("taas-stream-bench: sched_setaffinity");
}

static int usage(const char *why) {
    fprintf(stderr, "taas-stream-bench: %s\nusage: taas-stream-bench --impl taas|bare --shape N,C,H,W "
                    "[--seconds S] [--warmup S] [--min-batches M] [--credit K] [--pin]\n", why);
    return 2;
}

int main(int argc, char **argv) {
    opts o = {.taas = -1, .seconds = 3, .warmup = 1, .min_batches = 20, .credit = 4, .bind = "tcp://127.0.0.1:*"};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--pin")) {
            o.pin = 1;
            i--;
        } else if (!strcmp(a, "--impl")) {
            o.taas = !strcmp(v, "taas") || !strcmp(v, "taas-curve") ? 1 : !strcmp(v, "bare") ? 0 : -1;
            o.curve = !strcmp(v, "taas-curve");
        } else if (!strcmp(a, "--shape")) {
            if (sscanf(v, "%u,%u,%u,%u", &o.n, &o.c, &o.h, &o.w) != 4) return usage("--shape is N,C,H,W");
        } else if (!strcmp(a, "--bind")) o.bind = v;
        else if (!strcmp(a, "--sender-netns")) o.sender_netns = v;
        else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
        else if (!strcmp(a, "--warmup")) o.warmup = atof(v);
        else if (!strcmp(a, "--min-batches")) o.min_batches = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--credit")) o.credit = (uint32_t)atoi(v);
        else return usage("unknown option");
    }
    if (o.taas < 0 || !o.n || !o.c || !o.h || !o.w || o.credit < 1) return usage("--impl and --shape are required");

    taas_error kerr;
    if (o.curve && taas_zkeys_new(&KEYS, &kerr)) return fprintf(stderr, "%s\n", kerr.message), 1;
    int fds[2];
    if (pipe(fds)) return 1;
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) { /* the loader worker: waits for the rank's endpoint */
        close(fds[1]);
        if (o.pin) pin_to(0);
        if (o.sender_netns) {
            int ns = open(o.sender_netns, O_RDONLY | O_CLOEXEC);
            if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
                fprintf(stderr, "taas-stream-bench: cannot join %s: %s\n", o.sender_netns, strerror(errno));
                _exit(1);
            }
            close(ns);
        }
        char ep[256] = {0};
        size_t got = 0;
        ssize_t r;
        while (got < sizeof ep - 1 && (r = read(fds[0], ep + got, sizeof ep - 1 - got)) > 0) got += (size_t)r;
        sender(&o, ep);
    }
    close(fds[0]);
    if (o.pin) pin_to(1);
    prctl(PR_SET_NAME, "bench-taker"); /* and 2/ZMQbg/IO/0, taas-recv */
    void *zctx = zmq_ctx_new();
    zmq_ctx_set(zctx, ZMQ_THREAD_NAME_PREFIX, 2);
    taas_error err;
    rx x = {0};
    taas_zsec *sec = NULL;  /* the rank's ZAP handler, with --impl taas-curve */
    const char *ep;
    char bare_ep[256];
    if (o.taas) {
        uint32_t workers = 1;
        sec = o.curve ? taas_zsec_new(zctx, &KEYS, 1, &err) : NULL;
        if (o.curve && !sec) return fprintf(stderr, "taas-stream-bench: %s\n", err.message), 1;
        taas_stream_recv_cfg c = {.zctx = zctx, .sec = sec, .bind = "tcp://127.0.0.1:*", .rank = 0, .world = 1,
                                  .nstreams = 1, .workers = &workers, .credit = o.credit};
        c.bind = o.bind;
        if (!(x.r = taas_stream_recv_new(&c, &err))) return fprintf(stderr, "%s\n", err.message), 1;
        ep = taas_stream_recv_endpoint(x.r);
    } else {
        x.pull = zmq_socket(zctx, ZMQ_PULL);
        int zero = 0;
        size_t len = sizeof bare_ep;
        zmq_setsockopt(x.pull, ZMQ_LINGER, &zero, sizeof zero);
        if (zmq_bind(x.pull, o.bind)) return 1;
        zmq_getsockopt(x.pull, ZMQ_LAST_ENDPOINT, bare_ep, &len);
        ep = bare_ep;
    }
    if (write(fds[1], ep, strlen(ep)) < 0) return 1;
    close(fds[1]);

    int rc = 0;
    double t0 = taas_now();
    uint64_t warm = 0;
    while (!rc && (taas_now() - t0 < o.warmup || warm < 3)) rc = receive_one(&x, &err), warm++;
    uint64_t batches = 0;
    cpu_snap cpu0 = {0}, cpu1 = {0};
    cpu_read(getpid(), &cpu0);
    cpu_read(child, &cpu0);
    double t1 = taas_now(), t2 = t1;
    while (!rc && (t2 - t1 < o.seconds || batches < o.min_batches)) {
        rc = receive_one(&x, &err);
        batches++;
        t2 = taas_now();
    }
    cpu_read(getpid(), &cpu1);
    cpu_read(child, &cpu1);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (rc) {
        fprintf(stderr, "taas-stream-bench: %s\n", err.message);
        return 1;
    }
    json_t *out = json_pack("{s:s, s:[i,i,i,i], s:I, s:I, s:I, s:f, s:f, s:f, s:i, s:I}", "impl",
                            o.curve ? "taas-curve" : o.taas ? "taas" : "bare", "shape", (int)o.n, (int)o.c, (int)o.h, (int)o.w, "batch_bytes",
                            (json_int_t)x.len, "batches", (json_int_t)batches, "bytes", (json_int_t)(batches * x.len),
                            "seconds", t2 - t1, "batches_per_s", (double)batches / (t2 - t1), "gb_per_s",
                            (double)batches * (double)x.len / (t2 - t1) / 1e9, "credit", (int)o.credit,
                            "warmup_batches", (json_int_t)warm);
    json_object_set_new(out, "cpu_us_per_batch", cpu_per_batch(&cpu0, &cpu1, batches));
    if (x.r) {
        taas_stream_recv_stats st;
        taas_stream_recv_stats_get(x.r, &st);
        json_object_set_new(out, "take_wait_s", json_real(st.wait_s));
        json_object_set_new(out, "max_held", json_integer(st.max_held));
    }
    int maj, min, pat;
    zmq_version(&maj, &min, &pat);
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d.%d", maj, min, pat);
    json_object_set_new(out, "libzmq", json_string(ver));
    char *text = json_dumps(out, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(out);
    taas_stream_recv_free(x.r);
    if (x.pull) zmq_close(x.pull);
    taas_zsec_free(sec);  /* its handler's socket would hold the context open */
    zmq_ctx_term(zctx);
    return 0;
}
