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
#include <sodium.h>
#include <zmq.h>

#include "buf.h"
#include "clock.h"
#include "cpu.h"
#include "errnames.h"
#include "fdio.h"
#include "job_priv.h"
#include "jobctl.h"

static void say(const taas_io *io, const char *name, const char *text) {
    if (io && io->stream) io->stream(io->ctx, name, text);
}

/* The first failure wins: it is what the user sees. */
void taas_job_fail(taas_job *j, const char *ename, const char *hint, const char *fmt, ...) {
    if (j->failed) return;
    j->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    taas_error_vset(&j->failure, ename, TAAS_NOPOS, fmt, ap);
    va_end(ap);
    if (hint) taas_error_hint(&j->failure, "%s", hint);
}
#define fail taas_job_fail

void taas_job_watch(taas_job *j, int fd) {
    if (fd < 0) return;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(j->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void taas_job_unwatch(taas_job *j, int fd) {
    if (fd >= 0) epoll_ctl(j->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void taas_job_line(taas_job *j, const char *who, const char *text) {
    if (!text[0]) return;
    char line[1200];
    snprintf(line, sizeof line, "[%s] %s\n", who, text);
    say(j->io, "stderr", line);
}

static void send_to(taas_job *j, const char *peer, json_t *body, const void *blob, size_t n) {
    taas_error e;
    /* a peer that is gone is handled by its process's end */
    taas_ctl_send(j->router, peer, body, blob, n, ZMQ_DONTWAIT, &e);
}

const char *taas_job_loader_label(const taas_job *j, const job_loader *l, char *out, size_t n) {
    const taas_job_stream *s = &j->streams[l->stream];
    snprintf(out, n, "loader %s.%d", s->name ? s->name : s->role, l->worker);
    return out;
}

static job_loader *loader_of(taas_job *j, const char *peer) {
    for (int i = 0; i < j->nloaders; i++)
        if (!strcmp(j->loaders[i].peer, peer)) return &j->loaders[i];
    return NULL;
}

/* rank.R of this job, or -1 (a peer that is not one of its ranks) */
static int rank_of(const taas_job *j, const char *peer) {
    int r;
    char rest;
    return sscanf(peer, "rank.%d%c", &r, &rest) == 1 && r >= 0 && r < j->world ? r : -1;
}

/* On machines other than this one, where each worker runs, once all are there:
 * "started: rank 0 on gpu1 (pid 4242, data tcp://10.0.3.21:40311), ..., loader train.0 on
 * cpu1 (pid 977)". */
static void say_where(taas_job *j) {
    if (j->said_where || j->be == &taas_backend_local || j->nready < j->world) return;
    for (int i = 0; i < j->nloaders; i++)
        if (j->loaders[i].active && !j->loaders[i].hello) return;
    j->said_where = 1;
    taas_buf b = TAAS_BUF_INIT;
    taas_buf_puts(&b, "started:");
    for (int r = 0; r < j->world; r++)
        taas_buf_printf(&b, "%s rank %d on %s (pid %d, data %s)", r ? "," : "", r, j->ranks[r].host,
                        (int)j->ranks[r].pid, j->ranks[r].data[0] ? j->ranks[r].data : "none");
    for (int i = 0; i < j->nloaders; i++) {
        char who[96];
        if (!j->loaders[i].active) continue;
        taas_job_loader_label(j, &j->loaders[i], who, sizeof who);
        taas_buf_printf(&b, ", %s on %s (pid %d)", who, j->loaders[i].host, (int)j->loaders[i].pid);
    }
    taas_buf_puts(&b, "\n");
    say(j->io, "stdout", b.data);
    taas_buf_free(&b);
}

/* Every rank is ready: the loaders learn where to send. */
static void start_loaders(taas_job *j) {
    say_where(j);
    if (!j->start_msg) {
        json_t *ranks = json_array();
        for (int r = 0; r < j->world; r++) json_array_append_new(ranks, json_string(j->ranks[r].data));
        j->start_msg = taas_ctl_body("start");
        json_object_set_new(j->start_msg, "ranks", ranks);
    }
    for (int i = 0; i < j->nloaders; i++) {
        job_loader *l = &j->loaders[i];
        if (l->active && l->hello && !l->started) {
            send_to(j, l->peer, json_deep_copy(j->start_msg), NULL, 0);
            l->started = 1;
        }
    }
}

/* A worker said hello: it gets the job spec (and the model's weights before the fit), with
 * what is its own: a rank, where to bind its data plane; a loader, where to start. */
static void send_spec(taas_job *j, const char *peer, int rank, const job_loader *l) {
    json_t *spec = json_deep_copy(j->spec);
    json_t *off = json_object_get(spec, "offload");
    if (rank >= 0 && !strcmp(j->rank_bind, "route")) {
        json_object_set_new(off, "bind", json_string("route"));
    } else if (rank >= 0) {
        char ep[300];
        snprintf(ep, sizeof ep, "%s%d", j->rank_bind, rank);
        json_object_set_new(off, "bind", json_string(ep));
    }
    if (l) {  /* its generation's M (a pool that sizes itself has one for each) */
        json_object_set_new(json_array_get(json_object_get(off, "streams"), (size_t)l->stream), "workers",
                            json_integer(l->pool));
        json_object_set_new(off, "resume", json_pack("{s:I, s:I}", "epoch", (json_int_t)l->epoch, "step",
                                                     (json_int_t)l->step));
    }
    json_t *body = taas_ctl_body("spec");
    json_object_set_new(body, "spec", spec);
    send_to(j, peer, body, rank >= 0 ? j->init_weights : NULL, rank >= 0 ? j->init_weights_len : 0);
}

/* blob into path: a temporary file beside it, synced, renamed over it, and the folder
 * synced, so that path is the old file or the whole new one. 0, or -1 with errno. */
static int write_weights(taas_job *j, const void *blob, size_t n) {
    if (taas_write_file_atomic(j->weights, blob, n) == 0) return 0;
    fail(j, TAAS_ERR_OFFLOAD, "the temporary folder ($TMPDIR or /tmp) must be writable with free space",
         "cannot write the trained weights to %s: %s", j->weights, strerror(errno));
    return -1;
}

/* Rank 0's checkpoint: kept in the job folder with the one before it; older ones go. One
 * that cannot be written is said, and the job goes on with the last that could. */
static void on_checkpoint(taas_job *j, const json_t *b, const void *blob, size_t n) {
    long long steps = (long long)json_integer_value(json_object_get(b, "steps"));
    char path[PATH_MAX];
    if (!blob || !n || (size_t)snprintf(path, sizeof path, "%s/checkpoint-%lld.safetensors", j->dir, steps) >=
                           sizeof path)
        return;
    if (taas_write_file_atomic(path, blob, n)) {
        taas_buf line = TAAS_BUF_INIT;
        taas_buf_printf(&line, "[job] no checkpoint at step %lld: cannot write %s: %s\n", steps, path,
                        strerror(errno));
        say(j->io, "stderr", line.data);
        taas_buf_free(&line);
        return;
    }
    if (j->ckpt[1][0] && strcmp(j->ckpt[1], path) != 0) unlink(j->ckpt[1]);
    if (strcmp(j->ckpt[0], path) != 0) memcpy(j->ckpt[1], j->ckpt[0], sizeof j->ckpt[1]);
    snprintf(j->ckpt[0], sizeof j->ckpt[0], "%s", path);
    j->ckpt_epoch = (long long)json_integer_value(json_object_get(b, "epoch"));
    j->ckpt_step = (long long)json_integer_value(json_object_get(b, "step"));
    j->ckpt_steps = steps;
    taas_trainview_steps(j->view, steps);
}

/* The checkpoints of a job that is done are of no more use: its weights are kept. */
static void drop_checkpoints(taas_job *j) {
    for (int i = 0; i < 2; i++)
        if (j->ckpt[i][0]) {
            unlink(j->ckpt[i]);
            j->ckpt[i][0] = '\0';
        }
}

/* A job that ends without its result: where the fit can go on from. */
static void say_checkpoint(taas_job *j, const taas_io *io) {
    if (!j->ckpt[0][0] || j->evaluate) return;
    taas_buf b = TAAS_BUF_INIT;
    taas_buf_printf(&b, "the last checkpoint is %s (epoch %lld, step %lld): fit(..., resume='%s') goes on from it\n",
                    j->ckpt[0], j->ckpt_epoch + 1, j->ckpt_step, j->ckpt[0]);
    say(io, "stderr", b.data);
    taas_buf_free(&b);
}

static void on_error_msg(taas_job *j, const char *peer, int r, const json_t *b) {
    const char *ename = json_string_value(json_object_get(b, "ename"));
    const char *msg = json_string_value(json_object_get(b, "message"));
    const char *hint = json_string_value(json_object_get(b, "hint"));
    /* a sum that failed because another rank is gone: that rank's death, which mpirun or
     * srun reports next (the ranks' end always follows), is the cause, and it may resume */
    if (r >= 0 && ename && !strcmp(ename, TAAS_ERR_COLLECTIVE)) return;
    char who[96];
    job_loader *l = loader_of(j, peer);
    if (r >= 0) {
        snprintf(who, sizeof who, "rank %d on %s", r, j->ranks[r].host[0] ? j->ranks[r].host : "?");
    } else {
        taas_job_loader_label(j, l, who, sizeof who - 70);
        if (j->be != &taas_backend_local && l->host[0])  /* its data paths are that host's */
            snprintf(who + strlen(who), 70, " on %s", l->host);
    }
    /* a training error (a nan loss) reads best as it is; the others say where they happened */
    int first = !j->failed;
    if (r == 0 || (r > 0 && !j->failed && ename && !strcmp(ename, TAAS_ERR_VALUE) && msg && strstr(msg, "loss is")))
        fail(j, ename ? ename : TAAS_ERR_WORKER, hint, "%s", msg ? msg : "a worker failed");
    else
        fail(j, ename ? ename : TAAS_ERR_WORKER, hint, "%s: %s", who, msg ? msg : "failed");
    if (first && r < 0) j->failed_by_loader = 1;
}

/* Every rank said hello: the kernel set they all run (the asked one, else the lowest of
 * their hosts'), in the spec; one that cannot run it is the job's error, before any step. */
static int decide_kernels(taas_job *j) {
    int set = j->kernels_asked, low = TAAS_CPU_AVX512;
    for (int r = 0; r < j->world; r++) {
        const job_rank *k = &j->ranks[r];
        if (k->cpu < 0) {  /* a hello without a set's name: another build, or not a worker */
            fail(j, TAAS_ERR_OFFLOAD, "install the same taas on every host (or give its path as \"worker\" in the "
                 "cluster section)", "rank %d on %s did not say which kernels its CPU runs", r, k->host);
            return -1;
        }
        if (k->cpu < low) low = k->cpu;
    }
    if (set < 0) set = low;
    for (int r = 0; r < j->world; r++) {
        const job_rank *k = &j->ranks[r];
        if (k->cpu >= set) continue;
        fail(j, TAAS_ERR_OFFLOAD, NULL, "rank %d on %s cannot run the %s kernels the job asks for (%s): its CPU runs "
             "up to %s", r, k->host, taas_cpu_set_name((taas_cpu_set)set), j->kernels_why,
             taas_cpu_set_name((taas_cpu_set)k->cpu));
        taas_error_hint(&j->failure, "name a set every rank's host runs (\"kernels\" in the cluster section of the "
                        "configuration file, or TAAS_CPU), or leave it out for the best they all run; weights then "
                        "match only runs with the same set");
        return -1;
    }
    json_object_set_new(j->spec, "kernels", json_string(taas_cpu_set_name((taas_cpu_set)set)));
    if (j->offloaded && !j->said_kernels) {
        char line[sizeof j->kernels_why + 96];
        snprintf(line, sizeof line, "kernels: %s on every rank (%s)\n", taas_cpu_set_name((taas_cpu_set)set),
                 j->kernels_asked >= 0 ? j->kernels_why : "the best every rank's host runs");
        say(j->io, "stdout", line);
        j->said_kernels = 1;
    }
    /* resumed, the job keeps its set, wherever its ranks are then */
    if (j->kernels_asked < 0) {
        j->kernels_asked = set;
        snprintf(j->kernels_why, sizeof j->kernels_why, "the job's own, kept when it resumes");
    }
    return 0;
}

static void on_hello(taas_job *j, const char *peer, int r, job_loader *l, const json_t *b) {
    const char *host = json_string_value(json_object_get(b, "host"));
    pid_t pid = (pid_t)json_integer_value(json_object_get(b, "pid"));
    if (r >= 0 && !j->ranks[r].hello) {
        job_rank *k = &j->ranks[r];
        k->hello = 1;
        k->pid = pid;
        k->cpu = taas_cpu_parse(json_string_value(json_object_get(b, "cpu")));
        snprintf(k->host, sizeof k->host, "%s", host ? host : "?");
        /* the spec goes out once every rank said what it runs */
        if (++j->nhello < j->world || decide_kernels(j)) return;
        for (int q = 0; q < j->world; q++) {
            char id[32];
            snprintf(id, sizeof id, "rank.%d", q);
            send_spec(j, id, q, NULL);
        }
    } else if (l && !l->hello) {
        l->hello = 1;
        l->pid = pid;
        snprintf(l->host, sizeof l->host, "%s", host ? host : "?");
        send_spec(j, peer, -1, l);
        if (j->nready == j->world) start_loaders(j);
    }
}

static void replace_loader(taas_job *j, job_loader *l);
static void resize_pool(taas_job *j, int to, const char *why);

/* A new process in the slot counts its time and batches from 0: what the last one said goes. */
static void new_generation_load(job_loader *l) {
    l->up_s = l->idle_s = l->win_up = l->win_idle = 0;
    l->items = l->speed_items = 0;
    l->speed_up = -1;
}

/* The pool's size during each epoch, in the History's rows (--cpus auto). */
static void pool_in_rows(const taas_job *j, json_t *rows) {
    size_t i;
    json_t *e;
    json_array_foreach(rows, i, e) {
        if (json_is_object(e))
            json_object_set_new(e, "loaders", taas_job_pool_of_epoch(j, (long long)json_integer_value(json_object_get(e, "epoch"))));
    }
}

static void on_msg(taas_job *j, const taas_io *io, taas_ctl_msg *m) {
    const char *t = taas_ctl_type(m);
    const json_t *b = m->body;
    int r = rank_of(j, m->peer);
    job_loader *l = r < 0 ? loader_of(j, m->peer) : NULL;
    if (r < 0 && !l) return;  /* not a worker of this job */
    /* a loader the pool let go says its last lines; the rest of it is no longer the job's */
    if (l && !l->active && strcmp(t, "log") && strcmp(t, "leaving")) return;
    if (!strcmp(t, "hello")) {
        on_hello(j, m->peer, r, l, b);
    } else if (!strcmp(t, "ready") && r >= 0 && j->ranks[r].hello && !j->ranks[r].ready) {
        const char *data = json_string_value(json_object_get(b, "data"));
        snprintf(j->ranks[r].data, sizeof j->ranks[r].data, "%s", data ? data : "");
        j->ranks[r].ready = 1;
        if (++j->nready == j->world) {
            j->resuming = 0;
            for (int i = 0; i < j->nloaders && !j->failed; i++)
                if (j->loaders[i].due) replace_loader(j, &j->loaders[i]);
            start_loaders(j);
        }
    } else if (!strcmp(t, "log")) {
        const char *text = json_string_value(json_object_get(b, "text"));
        char who[96];
        if (r >= 0) snprintf(who, sizeof who, "rank %d", r);
        else taas_job_loader_label(j, l, who, sizeof who);
        if (j->offloaded) {
            taas_job_line(j, who, text ? text : "");
        } else {  /* a plain fit's worker speaks as the kernel would */
            say(io, "stderr", text ? text : "");
            say(io, "stderr", "\n");
        }
    } else if (!strcmp(t, "start") && r == 0) {
        taas_trainview_start(j->view, b);
        j->epochs = (long long)json_integer_value(json_object_get(b, "epochs"));
        taas_job_cost_start(j, b);
        taas_job_view(j, io, 1);
    } else if (!strcmp(t, "step") && r == 0) {
        j->epoch = (long long)json_integer_value(json_object_get(b, "epoch"));
        j->step = (long long)json_integer_value(json_object_get(b, "step"));
        j->steps_per_epoch = (long long)json_integer_value(json_object_get(b, "steps"));
        j->loss = json_number_value(json_object_get(b, "loss"));
        j->samples_per_s = json_number_value(json_object_get(b, "samples_per_s"));
        j->wait_share = json_number_value(json_object_get(b, "wait"));
        long long steps = (long long)json_integer_value(json_object_get(b, "steps_done"));
        double wait_s = json_number_value(json_object_get(b, "wait_s"));
        taas_job_cost_step(j, steps, wait_s);
        char why[sizeof j->pool_why];
        int to = taas_job_pool_step(j, wait_s, steps, why, sizeof why);
        if (to != j->pool) resize_pool(j, to, why);
        taas_trainview_step(j->view, b);
        taas_job_view(j, io, 0);
    } else if (!strcmp(t, "epoch") && r == 0) {
        j->epoch = (long long)json_integer_value(json_object_get(b, "epoch"));
        j->step = (long long)json_integer_value(json_object_get(b, "steps"));
        taas_job_speed_restart(j);  /* its validation is not a step's time */
        if (j->autosize) {
            json_t *row = json_deep_copy(b), *rows = json_pack("[O]", row);
            pool_in_rows(j, rows);
            taas_trainview_epoch(j->view, row);
            json_decref(rows);
            json_decref(row);
        } else {
            taas_trainview_epoch(j->view, b);
        }
        taas_job_view(j, io, 1);
    } else if (!strcmp(t, "done") && r == 0 && !j->done) {
        j->done = json_incref(m->body);
        taas_trainview_steps(j->view, (long long)json_integer_value(json_object_get(j->done, "steps")));
        if (j->evaluate) return;  /* the loss and accuracy are all of it */
        if (j->autosize) pool_in_rows(j, json_object_get(j->done, "history"));
        if (m->blob && m->blob_len) j->have_weights = write_weights(j, m->blob, m->blob_len) == 0;
        else fail(j, TAAS_ERR_OFFLOAD, "taas-worker and taas-kernel may come from different versions",
                  "rank 0 ended without sending the trained weights");
    } else if (!strcmp(t, "checkpoint") && r == 0 && !j->evaluate) {
        on_checkpoint(j, b, m->blob, m->blob_len);
    } else if (!strcmp(t, "ended") && l) {
        l->ended = 1;
    } else if (!strcmp(t, "load") && l) {
        taas_job_pool_load(j, l, b);
    } else if (!strcmp(t, "error")) {
        on_error_msg(j, m->peer, r, b);
    } else if (!strcmp(t, "leaving")) {  /* all it sent is read: now its end may be seen */
        send_to(j, m->peer, taas_ctl_body("bye"), NULL, 0);
    }
}

static void serve_control(taas_job *j, const taas_io *io) {
    for (int n = 0; n < 10000; n++) {  /* bounded: the rest waits for the next poll */
        taas_ctl_msg m;
        taas_error e;
        int rc = taas_ctl_recv(j->router, 1, ZMQ_DONTWAIT, &m, &e);
        if (rc == 1) break;
        if (rc < 0) continue;
        on_msg(j, io, &m);
        taas_ctl_msg_clear(&m);
    }
}

void taas_job_ranks_ended(taas_job *j, int ok, const char *how) {
    j->ranks_ended = 1;
    serve_control(j, j->io);  /* rank 0's last messages may still be queued */
    if (ok && j->done) return;
    if (ok) {
        fail(j, TAAS_ERR_WORKER, "taas-worker and taas-kernel may come from different versions",
             "the ranks ended before rank 0 sent its result");
        return;
    }
    /* a loader that failed to reach a rank that died failed because of it: the death is the
     * cause to show */
    if (j->failed_by_loader) j->failed = j->failed_by_loader = 0;
    /* a death, not a rank's own error (which would come again): the ranks resume, after the
     * watch that saw it (taas_job_poll) */
    if (!j->failed && !j->cancelled && !j->done && j->be->reset &&
        (j->preempted || j->restarts < j->max_restarts)) {
        j->restart_due = 1;
        snprintf(j->restart_why, sizeof j->restart_why, "%s", how);
        return;
    }
    if (!j->failed && j->max_restarts > 0 && j->restarts >= j->max_restarts) {
        fail(j, TAAS_ERR_WORKER, NULL, "%s, after %d restart%s: the job stops", how, j->restarts,
             j->restarts == 1 ? "" : "s");
        taas_error_hint(&j->failure, "fit()'s max_restarts=%d says how often a job resumes; see why the rank died "
                        "and run the cell again", j->max_restarts);
    }
    fail(j, TAAS_ERR_WORKER, "the other ranks were stopped with it; run the cell again", "%s", how);
}

static int launch_all(taas_job *j, long long epoch, long long step, taas_error *err);

/* Every process of the job again, the ranks from the newest checkpoint (or from the start,
 * before the first) and the loader workers from where it stands. */
static void restart(taas_job *j, const taas_io *io) {
    j->restart_due = 0;
    j->resuming = 1;
    if (!j->preempted) j->restarts++;  /* a preemption is not the job's failure */
    char from[128], count[64];
    if (j->ckpt[0][0])
        snprintf(from, sizeof from, "resuming from step %lld (epoch %lld)", j->ckpt_steps, j->ckpt_epoch + 1);
    else
        snprintf(from, sizeof from, "starting again (no checkpoint yet)");
    if (j->preempted) snprintf(count, sizeof count, " when it runs again");
    else snprintf(count, sizeof count, ", restart %d of %d", j->restarts, j->max_restarts);
    taas_buf line = TAAS_BUF_INIT;
    taas_buf_printf(&line, "%s; %s%s\n", j->restart_why, from, count);
    say(io, "stderr", line.data);
    taas_buf_free(&line);
    j->be->cancel(j);
    if (j->failed) return;  /* a host did not confirm that the old ranks are gone */
    j->be->reset(j);
    taas_error e;
    if (j->ckpt[0][0]) {
        json_object_set_new(j->spec, "resume", json_true());
        json_object_set_new(j->spec, "weights", json_string(j->ckpt[0]));
        if (taas_job_read_weights(j, j->ckpt[0], &e)) {
            fail(j, e.ename, e.hint, "%s", e.message);
            return;
        }
    }
    memset(j->ranks, 0, (size_t)j->world * sizeof *j->ranks);
    j->nhello = j->nready = 0;
    j->ranks_ended = 0;
    j->said_where = 0;
    json_decref(j->start_msg);
    j->start_msg = NULL;
    if (launch_all(j, j->ckpt[0][0] ? j->ckpt_epoch : 0, j->ckpt[0][0] ? j->ckpt_step : 0, &e))
        fail(j, e.ename, e.hint, "%s", e.message);
    j->preempted = j->allocation_gone = 0;
}

/* A loader's next generation, from the step the ranks have reached. */
static void replace_loader(taas_job *j, job_loader *l) {
    int validate = !strcmp(j->streams[l->stream].role, "validate");
    l->due = 0;
    l->gen++;
    l->pool = j->pool;
    l->epoch = j->epoch > 0 ? j->epoch - 1 : 0;
    l->step = validate ? 0 : j->step;
    l->hello = l->started = l->ended = 0;
    new_generation_load(l);
    l->pid = 0;
    snprintf(l->peer, sizeof l->peer, "loader.%d.%d.%d", l->stream, l->worker, l->gen);
    taas_error e;
    if (j->be->launch_loader(j, l, &e)) fail(j, e.ename, e.hint, "%s", e.message);
    else l->alive = 1;
}

/* The pool of every stream becomes `to` workers, at the step the ranks have reached: each
 * worker of the new pool is a new generation with the new M that makes the items from there
 * on (a batch depends only on the seed, the epoch and its item: design.md §3), as a
 * replacement does; the ranks drop what they have already. Workers past the new size are
 * told to stop; what they sent is the same data and is dropped or used. So every item is
 * trained exactly once, whatever the sizes and whenever they change. */
static void resize_pool(taas_job *j, int to, const char *why) {
    int from = j->pool;
    json_t *change = json_pack("{s:f, s:I, s:I, s:i, s:i, s:s}", "t", taas_now() - j->t0, "epoch",
                               (json_int_t)(j->epoch > 0 ? j->epoch : 1), "step", (json_int_t)j->step, "from", from,
                               "to", to, "why", why);
    if (!j->pool_log) j->pool_log = json_array();
    json_array_append_new(j->pool_log, change);
    snprintf(j->pool_why, sizeof j->pool_why, "%d \xE2\x86\x92 %d: %.160s", from, to, why);
    char line[sizeof j->pool_why + 80];
    snprintf(line, sizeof line, "loaders %s (epoch %lld step %lld)\n", j->pool_why, j->epoch > 0 ? j->epoch : 1,
             j->step);
    say(j->io, "stdout", line);
    j->pool = to;
    taas_job_speed_restart(j);  /* the ranks' speed with the new pool */
    for (int i = 0; i < j->nloaders && !j->failed; i++) {
        job_loader *l = &j->loaders[i];
        if (l->worker < to) {
            l->active = 1;
            replace_loader(j, l);  /* its process, if any, goes: the backend replaces it */
        } else if (l->active) {
            l->active = 0;
            if (l->hello && l->alive) send_to(j, l->peer, taas_ctl_body("cancel"), NULL, 0);
        }
    }
}

/* A loader worker ended. Done with its work, fine; else a replacement takes over from the
 * step the ranks have reached (items before it were trained; ranks drop what they have). */
void taas_job_loader_ended(taas_job *j, job_loader *l, int ok, const char *how) {
    l->alive = 0;
    serve_control(j, j->io);
    if (!l->active) return;  /* the pool let it go */
    if (l->ended && ok) return;
    if (j->done || j->failed || j->cancelled || j->budget_hit) return;
    /* the scheduler took the allocation back: the ranks' end follows and restarts the whole
     * job, and a replacement now could only fail in an allocation that is gone */
    if (j->preempted || j->allocation_gone) return;
    char who[96], line[400];
    taas_job_loader_label(j, l, who, sizeof who);
    if (++l->deaths >= TAAS_JOB_MAX_DEATHS) {
        fail(j, TAAS_ERR_WORKER, "see the lines it printed above; fix the data source and run the cell again",
             "%s (pid %d on %s) ended with %s, %d times: the job stops", who, (int)l->pid, l->host[0] ? l->host : "?",
             how, l->deaths);
        return;
    }
    /* resuming, the ranks are not there yet (a new allocation may not even be granted): its
     * replacement waits for them, as the other loaders do */
    if (j->resuming) {
        snprintf(line, sizeof line, "[%s] died (pid %d on %s, %s); a replacement starts when the ranks are back\n",
                 who, (int)l->pid, l->host[0] ? l->host : "?", how);
        say(j->io, "stderr", line);
        l->due = 1;
        return;
    }
    long long epoch = j->epoch > 0 ? j->epoch - 1 : 0;
    char whence[160];
    if (l->pid > 0) snprintf(whence, sizeof whence, "pid %d on %s, ", (int)l->pid, l->host[0] ? l->host : "?");
    else snprintf(whence, sizeof whence, "before it joined the job, ");
    snprintf(line, sizeof line, "[%s] died (%s%s); a replacement takes over from epoch %lld step %lld\n", who, whence,
             how, epoch + 1,
             strcmp(j->streams[l->stream].role, "validate") ? j->step : 0);
    say(j->io, "stderr", line);
    replace_loader(j, l);
}

taas_job *taas_job_start(const taas_job_cfg *cfg, const taas_io *io, taas_error *err) {
    taas_job *j = calloc(1, sizeof *j);
    if (!j) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting the job");
        return NULL;
    }
    j->epfd = epoll_create1(EPOLL_CLOEXEC);
    j->io = io;
    snprintf(j->dir, sizeof j->dir, "%s", cfg->dir);
    snprintf(j->weights, sizeof j->weights, "%s", cfg->weights);
    const char *slash = strrchr(cfg->dir, '/');
    snprintf(j->id, sizeof j->id, "%s", slash ? slash + 1 : cfg->dir);
    snprintf(j->display_id, sizeof j->display_id, "taas-%s", j->id);
    snprintf(j->model, sizeof j->model, "%s", cfg->model ? cfg->model : "the model");
    j->view = taas_trainview_new(j->display_id);
    j->t0 = taas_now();
    j->start_timeout = cfg->start_timeout > 0 ? cfg->start_timeout : TAAS_JOB_HELLO_S;
    j->evaluate = cfg->evaluate;
    j->max_restarts = cfg->evaluate ? 0 : cfg->max_restarts;
    if (j->epfd < 0 || !j->view || taas_job_plan(j, cfg, io, err)) goto fail;
    j->ranks = calloc((size_t)j->world, sizeof *j->ranks);
    j->nloaders = j->nstreams * j->cpus;
    j->loaders = calloc((size_t)(j->nloaders ? j->nloaders : 1), sizeof *j->loaders);
    if (!j->ranks || !j->loaders) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory starting the job");
        goto fail;
    }
    for (int i = 0; i < j->nloaders; i++) {
        j->loaders[i].stream = i / j->cpus;
        j->loaders[i].worker = i % j->cpus;
        j->loaders[i].active = j->loaders[i].worker < j->pool;
        j->loaders[i].gen = -1;  /* the launch makes generation 0 */
    }
    j->win_steps = -1;
    if (launch_all(j, cfg->resume_epoch, cfg->resume_step, err)) goto fail;
    j->next_beat = taas_now() + TAAS_CTL_HEARTBEAT_S;
    taas_job_view(j, io, 1);
    j->io = NULL;
    return j;
fail:
    j->io = NULL;
    taas_job_free(j);
    return NULL;
}

/* The ranks, and every loader worker as a new generation that starts at epoch, step (the
 * validate loaders at the epoch's start). */
static int launch_all(taas_job *j, long long epoch, long long step, taas_error *err) {
    if (j->be->launch_ranks(j, err)) return -1;
    j->win_steps = -1;
    for (int i = 0; i < j->nloaders; i++) {
        job_loader *l = &j->loaders[i];
        if (!l->active) continue;
        l->gen++;
        l->pool = j->pool;
        l->epoch = epoch;
        l->step = strcmp(j->streams[l->stream].role, "validate") ? step : 0;
        l->hello = l->started = l->ended = l->due = 0;
        new_generation_load(l);
        l->pid = 0;
        l->host[0] = '\0';
        snprintf(l->peer, sizeof l->peer, "loader.%d.%d.%d", l->stream, l->worker, l->gen);
        if (j->be->launch_loader(j, l, err)) return -1;
        l->alive = 1;
    }
    if (j->be->queued) j->hello_deadline = 1e300;  /* a job in a queue waits as long as it takes */
    else taas_job_launched(j);
    return 0;
}

void taas_job_launched(taas_job *j) {
    j->hello_deadline = taas_now() + j->start_timeout;
    if (j->launched_t <= 0) j->launched_t = taas_now();
}

int taas_job_fd(const taas_job *j) {
    return j->epfd;
}

double taas_job_deadline(const taas_job *j) {
    double d = j->next_beat, v = taas_job_view_due(j);
    if (v > 0 && v < d) d = v;
    if (j->stopping && j->stop_until < d) d = j->stop_until;
    if (!j->stopping && !j->budget_hit && taas_job_cost_due(j) < d) d = taas_job_cost_due(j);
    if (j->nready < j->world && j->hello_deadline < d) d = j->hello_deadline;
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
            send_to(j, peer, taas_ctl_body("hb"), NULL, 0);
        }
    for (int i = 0; i < j->nloaders; i++)
        if (j->loaders[i].hello && j->loaders[i].alive) send_to(j, j->loaders[i].peer, taas_ctl_body("hb"), NULL, 0);
}

static void end_processes(taas_job *j) {
    if (j->be && j->be_state) j->be->cancel(j);
}

/* The stop is over (rank 0's weights came, the ranks ended, or the grace passed): every
 * process goes, the display says stopped. 1 when the weights of the last step came. */
static int finish_stop(taas_job *j, const taas_io *io) {
    int kept = j->done && j->have_weights;
    if (j->stopped) return kept;
    j->stopped = 1;
    end_processes(j);
    if (io && j->view) {
        taas_trainview_end(j->view, "stopped", kept ? j->model : NULL);
        taas_job_view(j, io, 1);
    }
    say_checkpoint(j, io);
    j->stopping = 0;
    return kept;
}

/* Every worker is told to stop: the ranks after the step in progress, rank 0 then sends
 * the weights; the stop waits grace_s for them. */
static void send_cancel(taas_job *j, double grace_s) {
    j->stopping = 1;
    char peer[32];
    for (int r = 0; j->ranks && r < j->world; r++)
        if (j->ranks[r].hello) {
            snprintf(peer, sizeof peer, "rank.%d", r);
            send_to(j, peer, taas_ctl_body("cancel"), NULL, 0);
        }
    for (int i = 0; j->loaders && i < j->nloaders; i++)
        if (j->loaders[i].hello) send_to(j, j->loaders[i].peer, taas_ctl_body("cancel"), NULL, 0);
    j->stop_until = taas_now() + grace_s;
}

void taas_job_stop(taas_job *j, double grace_s) {
    if (j->stopping || j->cancelled) return;
    j->cancelled = 1;
    send_cancel(j, grace_s);
}

/* The budget is reached: the job stops as with the stop button, but its end is the fit's
 * result: the weights of the last step and the History of the epochs done. */
static void budget_stop(taas_job *j, const taas_io *io) {
    j->budget_hit = 1;
    if (j->first_step_t <= 0) {  /* no step to keep: the ranks may not even be there to tell */
        fail(j, TAAS_ERR_JOB, "give a larger --budget; the plan line's estimate says what the whole job needs",
             "%s before rank 0 sent the weights of a step: nothing was trained", j->budget_why);
        return;
    }
    taas_buf line = TAAS_BUF_INIT;
    taas_buf_printf(&line, "%s: stopping after the step in progress\n", j->budget_why);
    say(io, "stderr", line.data);
    taas_buf_free(&line);
    send_cancel(j, TAAS_JOB_BUDGET_GRACE_S);
}

int taas_job_poll(taas_job *j, const taas_io *io, taas_error *err) {
    /* the epoll set is level-triggered and only wakes the kernel: everything is looked at here */
    j->io = io;
    serve_control(j, io);
    j->be->watch(j);
    if (j->stopping) {
        if (!j->done && !j->failed && !j->ranks_ended && j->router && taas_now() < j->stop_until) {
            j->io = NULL;
            return 1;
        }
        if (!j->budget_hit) {
            int kept = finish_stop(j, io);
            j->io = NULL;
            return kept ? 3 : 2;
        }
        /* the budget's stop ends as a job that is done, with what rank 0 sent */
        j->stopping = 0;
        end_processes(j);
        j->ranks_ended = 1;
        if (!j->failed && !(j->done && j->have_weights))
            fail(j, TAAS_ERR_JOB, "give a larger --budget; the plan line's estimate says what the whole job needs",
                 "%s before rank 0 sent the weights of a step: nothing was trained", j->budget_why);
    }
    if (!j->failed && !j->stopping && !j->budget_hit && taas_job_cost_tick(j)) budget_stop(j, io);
    if (j->restart_due && !j->failed && !j->cancelled) restart(j, io);
    heartbeats(j);
    if (!j->failed && j->nready < j->world && taas_now() > j->hello_deadline)
        fail(j, TAAS_ERR_OFFLOAD, "see the lines the launcher printed above",
             "only %d of %d ranks started within %g s", j->nready, j->world, j->start_timeout);
    if (taas_job_view_due(j) > 0 && taas_now() >= taas_job_view_due(j)) taas_job_view(j, io, 1);
    int rc = 1;
    if (j->failed) {
        if (j->resuming) {  /* what it was resuming from is the cause to read first */
            j->resuming = 0;
            size_t len = strlen(j->failure.message);
            snprintf(j->failure.message + len, sizeof j->failure.message - len, " (while resuming after: %s)",
                     j->restart_why);
        }
        end_processes(j);
        taas_trainview_end(j->view, "failed", NULL);
        taas_job_view(j, io, 1);
        say_checkpoint(j, io);
        *err = j->failure;
        rc = -1;
    } else if (j->done && j->ranks_ended) {
        end_processes(j);  /* the loaders */
        if (!j->budget_hit) drop_checkpoints(j);  /* a job the budget stopped may go on from them */
        taas_job_cost_tick(j);
        if (!j->evaluate && !j->budget_hit) taas_job_cost_remember(j);
        taas_trainview_end(j->view, j->budget_hit ? "budget" : "done", j->model);
        taas_job_view(j, io, 1);
        if (j->offloaded) taas_job_summary(j, io);
        if (j->budget_hit) say_checkpoint(j, io);
        rc = 0;
    }
    j->io = NULL;
    return rc;
}

const json_t *taas_job_done(const taas_job *j) {
    return j->done;
}

int taas_job_cancel(taas_job *j, double grace_s, const taas_io *io) {
    if (!j->stopping) taas_job_stop(j, grace_s);
    while (!j->done && !j->failed && !j->ranks_ended && j->router && taas_now() < j->stop_until) {
        struct epoll_event ev;
        int ms = (int)((j->stop_until - taas_now()) * 1000) + 1;
        epoll_wait(j->epfd, &ev, 1, ms > 50 ? 50 : ms);
        serve_control(j, NULL);
    }
    return finish_stop(j, io);
}

void taas_job_free(taas_job *j) {
    if (!j) return;
    end_processes(j);
    if (j->be && j->be_state) j->be->free(j);
    free(j->loaders);
    free(j->ranks);
    if (j->router) zmq_close(j->router);
    taas_zsec_free(j->sec);
    if (j->zctx) zmq_ctx_term(j->zctx);
    if (!strncmp(j->bind, "ipc://", 6)) unlink(j->bind + 6);  /* the socket's file, in the job folder */
    if (j->epfd >= 0) close(j->epfd);
    json_decref(j->spec);
    taas_cluster_free(&j->cluster);
    free(j->init_weights);
    json_decref(j->start_msg);
    taas_trainview_free(j->view);
    json_decref(j->done);
    json_decref(j->pool_log);
    sodium_memzero(&j->keys, sizeof j->keys);
    free(j);
}
