/* An offloaded job's lifecycle: start, the control plane, the processes, the end. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "jobctl.h"
#include "job_priv.h"

static const taas_srcpos NOPOS = {0, 0};

static void say(const taas_io *io, const char *name, const char *text) {
    if (io && io->stream) io->stream(io->ctx, name, text);
}

/* The first failure wins: it is what the user sees. */
static void fail(taas_job *j, const char *ename, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(taas_job *j, const char *ename, const char *hint, const char *fmt, ...) {
    if (j->failed) return;
    j->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    taas_error_vset(&j->failure, ename, NOPOS, fmt, ap);
    va_end(ap);
    if (hint) taas_error_hint(&j->failure, "%s", hint);
}

static void send_to(taas_job *j, const char *peer, json_t *body) {
    taas_error e;
    taas_ctl_send(j->router, peer, body, NULL, 0, ZMQ_DONTWAIT, &e);  /* a peer that is gone is handled by its exit */
}

static const char *loader_label(const taas_job *j, const job_loader *l, char *out, size_t n) {
    const taas_job_stream *s = &j->streams[l->stream];
    snprintf(out, n, "loader %s.%d", s->name ? s->name : s->role, l->worker);
    return out;
}

static job_loader *loader_of(taas_job *j, const char *peer) {
    for (int i = 0; i < j->nloaders; i++)
        if (!strcmp(j->loaders[i].peer, peer)) return &j->loaders[i];
    return NULL;
}

static int rank_of(const char *peer) {
    int r;
    char rest;
    return sscanf(peer, "rank.%d%c", &r, &rest) == 1 ? r : -1;
}

/* Every rank is there: the loaders learn where to send. */
static void start_loaders(taas_job *j) {
    if (!j->start_msg) {
        json_t *ranks = json_array();
        for (int r = 0; r < j->world; r++) json_array_append_new(ranks, json_string(j->ranks[r].data));
        j->start_msg = taas_ctl_body("start");
        json_object_set_new(j->start_msg, "ranks", ranks);
    }
    for (int i = 0; i < j->nloaders; i++) {
        job_loader *l = &j->loaders[i];
        if (l->hello && !l->started) {
            send_to(j, l->peer, json_deep_copy(j->start_msg));
            l->started = 1;
        }
    }
}

static void write_weights(taas_job *j, const void *blob, size_t n) {
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.part", j->weights);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t done = 0;
    while (fd >= 0 && done < n) {
        ssize_t w = write(fd, (const char *)blob + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (fd >= 0 && done == n && fsync(fd) == 0 && close(fd) == 0 && rename(tmp, j->weights) == 0) {
        j->have_weights = 1;
        return;
    }
    if (fd >= 0) close(fd);
    unlink(tmp);
    fail(j, "TaasOffloadError", "the temporary folder ($TMPDIR or /tmp) must be writable with free space",
         "cannot write the trained weights to %s: %s", j->weights, strerror(errno));
}

static void on_error_msg(taas_job *j, const char *peer, const json_t *b) {
    const char *ename = json_string_value(json_object_get(b, "ename"));
    const char *msg = json_string_value(json_object_get(b, "message"));
    const char *hint = json_string_value(json_object_get(b, "hint"));
    int r = rank_of(peer);
    char who[96];
    job_loader *l = loader_of(j, peer);
    if (r >= 0) snprintf(who, sizeof who, "rank %d on %s", r, j->ranks[r].host[0] ? j->ranks[r].host : "?");
    else if (l) loader_label(j, l, who, sizeof who);
    else snprintf(who, sizeof who, "%s", peer);
    /* a training error (a nan loss) reads best as it is; the others say where they happened */
    if (r == 0 || (r > 0 && !j->failed && ename && !strcmp(ename, "TaasValueError") && msg && strstr(msg, "loss is")))
        fail(j, ename ? ename : "TaasWorkerError", hint, "%s", msg ? msg : "a worker failed");
    else
        fail(j, ename ? ename : "TaasWorkerError", hint, "%s: %s", who, msg ? msg : "failed");
}

static void on_msg(taas_job *j, const taas_io *io, taas_ctl_msg *m) {
    const char *t = taas_ctl_type(m);
    const json_t *b = m->body;
    int r = rank_of(m->peer);
    if (!strcmp(t, "hello")) {
        if (r >= 0 && r < j->world && !j->ranks[r].hello) {
            job_rank *k = &j->ranks[r];
            k->hello = 1;
            k->pid = (pid_t)json_integer_value(json_object_get(b, "pid"));
            const char *host = json_string_value(json_object_get(b, "host"));
            const char *data = json_string_value(json_object_get(b, "data"));
            snprintf(k->host, sizeof k->host, "%s", host ? host : "?");
            snprintf(k->data, sizeof k->data, "%s", data ? data : "");
            j->nhello++;
        } else if (loader_of(j, m->peer)) {
            loader_of(j, m->peer)->hello = 1;
        }
        if (j->nhello == j->world) start_loaders(j);
    } else if (!strcmp(t, "log")) {
        const char *text = json_string_value(json_object_get(b, "text"));
        job_loader *l = loader_of(j, m->peer);
        char who[96], line[1200];
        if (r >= 0) snprintf(who, sizeof who, "rank %d", r);
        else if (l) loader_label(j, l, who, sizeof who);
        else snprintf(who, sizeof who, "%s", m->peer);
        snprintf(line, sizeof line, "[%s] %s\n", who, text ? text : "");
        say(io, "stderr", line);
    } else if (!strcmp(t, "start") && r == 0) {
        taas_trainview_start(j->view, b);
        j->epochs = (long long)json_integer_value(json_object_get(b, "epochs"));
        taas_job_view(j, io, 1);
    } else if (!strcmp(t, "step") && r == 0) {
        j->epoch = (long long)json_integer_value(json_object_get(b, "epoch"));
        j->step = (long long)json_integer_value(json_object_get(b, "step"));
        j->steps_per_epoch = (long long)json_integer_value(json_object_get(b, "steps"));
        j->loss = json_number_value(json_object_get(b, "loss"));
        j->samples_per_s = json_number_value(json_object_get(b, "samples_per_s"));
        j->wait_share = json_number_value(json_object_get(b, "wait"));
        taas_trainview_step(j->view, b);
        taas_job_view(j, io, 0);
    } else if (!strcmp(t, "epoch") && r == 0) {
        j->epoch = (long long)json_integer_value(json_object_get(b, "epoch"));
        j->step = (long long)json_integer_value(json_object_get(b, "steps"));
        taas_trainview_epoch(j->view, b);
        taas_job_view(j, io, 1);
    } else if (!strcmp(t, "done") && r == 0 && !j->done) {
        j->done = json_incref(m->body);
        if (m->blob && m->blob_len) write_weights(j, m->blob, m->blob_len);
        else fail(j, "TaasOffloadError", "taas-worker and taas-kernel may come from different versions",
                  "rank 0 ended without sending the trained weights");
    } else if (!strcmp(t, "ended")) {
        job_loader *l = loader_of(j, m->peer);
        if (l) l->ended = 1;
    } else if (!strcmp(t, "error")) {
        on_error_msg(j, m->peer, b);
    }
}

static void serve_control(taas_job *j, const taas_io *io) {
    for (;;) {
        taas_ctl_msg m;
        taas_error e;
        int rc = taas_ctl_recv(j->router, 1, ZMQ_DONTWAIT, &m, &e);
        if (rc == 1) break;
        if (rc < 0) continue;
        on_msg(j, io, &m);
        taas_ctl_msg_clear(&m);
    }
}

typedef struct line_ctx {
    taas_job *j;
    const taas_io *io;
} line_ctx;

/* A line a process printed: mpirun's own, or what a worker wrote outside the control plane. */
static void on_line(void *ctx, taas_proc *p, const char *text) {
    line_ctx *c = ctx;
    if (!text[0]) return;
    char line[1200];
    snprintf(line, sizeof line, "[%s] %s\n", p->what, text);
    say(c->io, "stderr", line);
}

/* "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)." */
static int mpirun_rank_death(const char *tail, int *rank, char *host, size_t hn, char *how, size_t wn) {
    const char *p = strstr(tail, "noticed that process rank ");
    if (!p) return 0;
    char h[64] = "";
    int r;
    if (sscanf(p, "noticed that process rank %d with PID %*d on node %63s", &r, h) != 2) return 0;
    const char *e = strstr(p, "exited on ");
    *rank = r;
    snprintf(host, hn, "%s", h);
    if (e) {
        const char *end = strpbrk(e, ".\n");
        snprintf(how, wn, "%.*s", end ? (int)(end - e) : (int)strlen(e), e);
    } else {
        snprintf(how, wn, "died");
    }
    return 1;
}

static void on_mpirun_exit(taas_job *j) {
    taas_proc *p = j->mpirun;
    if (taas_proc_ok(p) && j->done) return;
    char how[96], host[64];
    int rank;
    if (mpirun_rank_death(p->tail, &rank, host, sizeof host, how, sizeof how)) {
        const char *h = rank >= 0 && rank < j->world && j->ranks[rank].host[0] ? j->ranks[rank].host : host;
        fail(j, "TaasWorkerError", "the other ranks were stopped with it; run the cell again",
             "trainer rank %d on %s (pid %d) %s", rank, h, rank >= 0 && rank < j->world ? (int)j->ranks[rank].pid : 0,
             how);
        return;
    }
    taas_proc_describe(p, how, sizeof how);
    const char *nl = p->tail[0] ? p->tail : "(no output)";
    fail(j, "TaasWorkerError", "check that Open MPI works here: mpirun -np 2 hostname",
         "mpirun ended with %s before the job was done: %.600s", how, nl);
}

/* A loader worker ended. Done with its work, fine; else a replacement takes over from the
 * step the ranks have reached (items before it were trained; ranks drop what they have). */
static void on_loader_exit(taas_job *j, const taas_io *io, job_loader *l) {
    if (l->ended && taas_proc_ok(l->proc)) return;
    if (j->done || j->failed || j->cancelled) return;
    char who[96], how[96], line[400];
    loader_label(j, l, who, sizeof who);
    taas_proc_describe(l->proc, how, sizeof how);
    if (l->gen + 1 >= TAAS_JOB_MAX_GENERATIONS) {
        fail(j, "TaasWorkerError", "see the lines it printed above; fix the data source and run the cell again",
             "%s (pid %d) ended with %s, %d times: the job stops", who, (int)l->proc->pid, how, l->gen + 1);
        return;
    }
    int validate = !strcmp(j->streams[l->stream].role, "validate");
    long long epoch = j->epoch > 0 ? j->epoch - 1 : 0, step = validate ? 0 : j->step;
    snprintf(line, sizeof line, "[%s] died (pid %d, %s); a replacement takes over from epoch %lld step %lld\n",
             who, (int)l->proc->pid, how, epoch + 1, step);
    say(io, "stderr", line);
    l->gen++;
    taas_error e;
    if (taas_job_launch_loader(j, l, epoch, step, &e)) fail(j, e.ename, e.hint, "%s", e.message);
}

static void watch_processes(taas_job *j, const taas_io *io) {
    line_ctx c = {j, io};
    if (j->mpirun && !j->mpirun->exited) {
        taas_proc_read(j->mpirun, on_line, &c);
        if (taas_proc_reap(j->mpirun)) {
            taas_proc_read(j->mpirun, on_line, &c);
            serve_control(j, io);  /* rank 0's last messages may still be queued */
            on_mpirun_exit(j);
        }
    }
    for (int i = 0; i < j->nloaders; i++) {
        job_loader *l = &j->loaders[i];
        if (!l->proc || l->proc->exited) continue;
        taas_proc_read(l->proc, on_line, &c);
        if (taas_proc_reap(l->proc)) {
            taas_proc_read(l->proc, on_line, &c);
            serve_control(j, io);
            on_loader_exit(j, io, l);
        }
    }
}

taas_job *taas_job_start(const taas_job_cfg *cfg, const taas_io *io, taas_error *err) {
    taas_job *j = calloc(1, sizeof *j);
    if (!j) {
        taas_error_set(err, "TaasMemoryError", NOPOS, "out of memory starting the job");
        return NULL;
    }
    j->epfd = epoll_create1(EPOLL_CLOEXEC);
    snprintf(j->dir, sizeof j->dir, "%s", cfg->dir);
    snprintf(j->weights, sizeof j->weights, "%s", cfg->weights);
    const char *slash = strrchr(cfg->dir, '/');
    snprintf(j->id, sizeof j->id, "%s", slash ? slash + 1 : cfg->dir);
    snprintf(j->display_id, sizeof j->display_id, "taas-%s", j->id);
    snprintf(j->model, sizeof j->model, "%s", cfg->model ? cfg->model : "the model");
    j->view = taas_trainview_new(j->display_id);
    j->t0 = taas_now();
    if (j->epfd < 0 || !j->view || taas_job_plan(j, cfg, io, err)) goto fail;
    j->ranks = calloc((size_t)j->world, sizeof *j->ranks);
    j->nloaders = j->nstreams * j->cpus;
    j->loaders = calloc((size_t)(j->nloaders ? j->nloaders : 1), sizeof *j->loaders);
    if (!j->ranks || !j->loaders) {
        taas_error_set(err, "TaasMemoryError", NOPOS, "out of memory starting the job");
        goto fail;
    }
    if (taas_job_launch_ranks(j, err)) goto fail;
    for (int i = 0; i < j->nloaders; i++) {
        j->loaders[i].stream = i / j->cpus;
        j->loaders[i].worker = i % j->cpus;
        if (taas_job_launch_loader(j, &j->loaders[i], 0, 0, err)) goto fail;
    }
    j->hello_deadline = taas_now() + TAAS_JOB_HELLO_S;
    j->next_beat = taas_now() + TAAS_CTL_HEARTBEAT_S;
    taas_job_view(j, io, 1);
    return j;
fail:
    taas_job_free(j);
    return NULL;
}

int taas_job_fd(const taas_job *j) {
    return j->epfd;
}

double taas_job_deadline(const taas_job *j) {
    double d = j->next_beat, v = taas_job_view_due(j);
    if (v > 0 && v < d) d = v;
    if (j->nhello < j->world && j->hello_deadline < d) d = j->hello_deadline;
    return d;
}

static void heartbeats(taas_job *j) {
    double now = taas_now();
    if (now < j->next_beat) return;
    j->next_beat = now + TAAS_CTL_HEARTBEAT_S;
    char peer[32];
    for (int r = 0; r < j->world; r++)
        if (j->ranks[r].hello) {
            snprintf(peer, sizeof peer, "rank.%d", r);
            send_to(j, peer, taas_ctl_body("hb"));
        }
    for (int i = 0; i < j->nloaders; i++)
        if (j->loaders[i].hello && j->loaders[i].proc && !j->loaders[i].proc->exited)
            send_to(j, j->loaders[i].peer, taas_ctl_body("hb"));
}

int taas_job_poll(taas_job *j, const taas_io *io, taas_error *err) {
    /* the epoll set is level-triggered and only wakes the kernel: everything is looked at here */
    serve_control(j, io);
    watch_processes(j, io);
    heartbeats(j);
    if (!j->failed && j->nhello < j->world && taas_now() > j->hello_deadline)
        fail(j, "TaasOffloadError", "see the lines mpirun printed above; check that mpirun -np 2 hostname works",
             "only %d of %d ranks started within %.0f s", j->nhello, j->world, TAAS_JOB_HELLO_S);
    if (taas_job_view_due(j) > 0 && taas_now() >= taas_job_view_due(j)) taas_job_view(j, io, 1);
    if (j->failed) {
        taas_job_cancel(j, 0, NULL);
        taas_trainview_end(j->view, "failed", NULL);
        taas_job_view(j, io, 1);
        *err = j->failure;
        return -1;
    }
    if (j->done && j->mpirun->exited) {
        for (int i = 0; i < j->nloaders; i++) taas_proc_kill(j->loaders[i].proc);
        taas_trainview_end(j->view, "done", j->model);
        taas_job_view(j, io, 1);
        taas_job_summary(j, io);
        return 0;
    }
    return 1;
}

const json_t *taas_job_done(const taas_job *j) {
    return j->done;
}

static void kill_all(taas_job *j) {
    for (int r = 0; j->ranks && r < j->world; r++)
        if (j->ranks[r].hello && j->ranks[r].pid > 0 && j->mpirun && !j->mpirun->exited) kill(j->ranks[r].pid, SIGKILL);
    taas_proc_kill(j->mpirun);
    for (int i = 0; j->loaders && i < j->nloaders; i++) taas_proc_kill(j->loaders[i].proc);
}

int taas_job_cancel(taas_job *j, double grace_s, const taas_io *io) {
    j->cancelled = 1;
    char peer[32];
    for (int r = 0; j->ranks && r < j->world; r++)
        if (j->ranks[r].hello) {
            snprintf(peer, sizeof peer, "rank.%d", r);
            send_to(j, peer, taas_ctl_body("cancel"));
        }
    for (int i = 0; j->loaders && i < j->nloaders; i++)
        if (j->loaders[i].hello) send_to(j, j->loaders[i].peer, taas_ctl_body("cancel"));
    double until = taas_now() + grace_s;
    while (!j->done && !j->failed && j->mpirun && !j->mpirun->exited && taas_now() < until) {
        struct epoll_event ev;
        int ms = (int)((until - taas_now()) * 1000) + 1;
        epoll_wait(j->epfd, &ev, 1, ms > 50 ? 50 : ms);
        serve_control(j, NULL);
    }
    kill_all(j);
    int kept = j->done && j->have_weights;
    if (io && j->view) {
        taas_trainview_end(j->view, "stopped", kept ? j->model : NULL);
        taas_job_view(j, io, 1);
    }
    return kept;
}

void taas_job_free(taas_job *j) {
    if (!j) return;
    kill_all(j);
    taas_proc_free(j->mpirun);
    for (int i = 0; j->loaders && i < j->nloaders; i++) taas_proc_free(j->loaders[i].proc);
    free(j->loaders);
    free(j->ranks);
    if (j->router) zmq_close(j->router);
    if (j->zctx) zmq_ctx_term(j->zctx);
    if (j->epfd >= 0) close(j->epfd);
    if (j->spec_path[0]) unlink(j->spec_path);
    json_decref(j->start_msg);
    taas_trainview_free(j->view);
    json_decref(j->done);
    free(j);
}
