/* Jobs that outlive the kernel: their folders, their coordinator and how a kernel follows
 * them (detached.h). */
#include "detached.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/pidfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "errnames.h"
#include "fdio.h"
#include "job_priv.h"
#include "self_exe.h"
#include "suggest.h"
#include "utf8.h"

/* The lock's descriptor in the coordinator, as the kernel that starts it leaves it. */
#define LOCK_FD 3
/* The journal keeps at most this much; later output is left out (one line says so). */
#define JOURNAL_MAX (16u << 20)
/* job.json, state.json and view.json are read whole, at most this much each: a state is a
 * few hundred bytes, a done job's has its History (about 300 bytes an epoch) and the view its
 * displays; a larger one is a damaged job, and never more than this is read on the kernel's
 * time for one file. */
#define FILE_MAX (16u << 20)
/* state.json and view.json are written again at most this often while the job runs. */
#define WRITE_EVERY_S 1.0

static int sys_fail(taas_error *err, const char *doing, const char *path) {
    taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "%s %s: %s", doing, path, strerror(errno));
    taas_error_hint(err, "the jobs folder ($TAAS_JOBS_DIR, else ~/.local/state/taas/jobs) must be yours and "
                         "writable, with free space");
    return -1;
}

static int mkdir_private(const char *path) {
    return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

int taas_jobs_dir(char *out, size_t n, taas_error *err) {
    const char *env = getenv("TAAS_JOBS_DIR"), *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int fits;
    if (env && *env) {
        fits = (size_t)snprintf(out, n, "%s", env) < n;
    } else if (state && state[0] == '/') {
        char taas[PATH_MAX];
        snprintf(taas, sizeof taas, "%s/taas", state);
        if (mkdir_private(state) || mkdir_private(taas)) return sys_fail(err, "cannot make", taas);
        fits = (size_t)snprintf(out, n, "%s/taas/jobs", state) < n;
    } else if (home && home[0] == '/') {
        const char *parts[] = {"/.local", "/.local/state", "/.local/state/taas"};
        for (size_t i = 0; i < 3; i++) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s%s", home, parts[i]);
            if (mkdir_private(p)) return sys_fail(err, "cannot make", p);
        }
        fits = (size_t)snprintf(out, n, "%s/.local/state/taas/jobs", home) < n;
    } else {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "there is no jobs folder: neither TAAS_JOBS_DIR, XDG_STATE_HOME "
                       "nor HOME is set");
        taas_error_hint(err, "set TAAS_JOBS_DIR to a folder of yours before starting Jupyter");
        return -1;
    }
    if (!fits) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "the jobs folder's path is too long");
        taas_error_hint(err, "set TAAS_JOBS_DIR to a shorter folder before starting Jupyter");
        return -1;
    }
    if (mkdir_private(out)) return sys_fail(err, "cannot make the jobs folder", out);
    return 0;
}

int taas_detached_folder(char *dir, size_t n, taas_error *err) {
    char jobs[PATH_MAX / 4];
    if (taas_jobs_dir(jobs, sizeof jobs, err)) return -1;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    if ((size_t)snprintf(dir, n, "%s/job-%s-XXXXXX", jobs, stamp) >= n) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "the jobs folder's path is too long");
        taas_error_hint(err, "set TAAS_JOBS_DIR to a shorter folder before starting Jupyter");
        return -1;
    }
    return mkdtemp(dir) ? 0 : sys_fail(err, "cannot make a job folder in", jobs);
}

/* ---- files of the folder ------------------------------------------------------------ */

static int path_in(char *out, size_t n, const char *dir, const char *name) {
    return (size_t)snprintf(out, n, "%s/%s", dir, name) < n ? 0 : -1;
}

static int write_json(const char *dir, const char *name, const json_t *v) {
    char path[PATH_MAX];
    char *text = json_dumps(v, JSON_COMPACT);
    int rc = -1;
    if (text && path_in(path, sizeof path, dir, name) == 0) rc = taas_write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

/* A file of the folder opened for reading, or -1 with errno (EINVAL: it is not a regular
 * file): a FIFO or a device in its place (the folder is the user's) must not hold the
 * kernel, so it is opened without blocking and refused unless it is a regular file. */
static int open_regular(const char *dir, const char *name) {
    char path[PATH_MAX];
    int fd = path_in(path, sizeof path, dir, name) ? -1 : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* A JSON object file of the folder, read whole in one read of at most FILE_MAX bytes (never
 * a byte a read(), as jansson reads a descriptor) and parsed from memory. NULL with why[0]
 * == '\0' when it is not there; NULL with why saying what is wrong with it when it is
 * damaged. */
static json_t *read_json(const char *dir, const char *name, char *why, size_t n) {
    why[0] = '\0';
    int fd = open_regular(dir, name);
    if (fd < 0) {
        if (errno == EINVAL) snprintf(why, n, "%s is not a regular file", name);
        else if (errno != ENOENT) snprintf(why, n, "%s cannot be read: %s", name, strerror(errno));
        return NULL;
    }
    size_t got = 0;
    char *text = taas_read_capped(fd, FILE_MAX, &got);
    if (!text && errno == EFBIG) {
        struct stat st;
        taas_buf b = TAAS_BUF_INIT;
        taas_buf_thousands(&b, fstat(fd, &st) == 0 ? (long long)st.st_size : -1);
        snprintf(why, n, "%s is %s bytes: more than a job's file has (%u MiB at most)", name, b.data ? b.data : "?",
                 FILE_MAX >> 20);
        taas_buf_free(&b);
    } else if (!text) {
        snprintf(why, n, "%s cannot be read: %s", name, strerror(errno));
    }
    close(fd);
    json_t *v = NULL;
    if (!why[0]) {
        json_error_t e;
        v = json_loadb(text, got, 0, &e);
        if (!v) snprintf(why, n, "%s is not JSON (line %d)", name, e.line);
        else if (!json_is_object(v)) snprintf(why, n, "%s is not a JSON object", name);
        if (v && !json_is_object(v)) {
            json_decref(v);
            v = NULL;
        }
    }
    free(text);
    return v;
}

static const char *id_of(const char *dir) {
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

/* ---- the start ------------------------------------------------------------------------ */

static json_t *job_record(const taas_job_cfg *cfg, const char *header) {
    json_t *streams = json_array();
    for (int i = 0; i < cfg->nstreams; i++)
        json_array_append_new(streams, json_pack("{s:s, s:s?, s:O?}", "role", cfg->streams[i].role, "name",
                                                 cfg->streams[i].name, "facts", cfg->streams[i].facts));
    char cwd[PATH_MAX];
    return json_pack("{s:i, s:s, s:O, s:o, s:s, s:s?, s:i, s:I, s:I, s:I, s:s?}", "version", 1, "header", header,
                     "spec", cfg->spec, "streams", streams, "weights", cfg->weights, "model", cfg->model,
                     "max_restarts", cfg->max_restarts, "resume_epoch", (json_int_t)cfg->resume_epoch,
                     "resume_step", (json_int_t)cfg->resume_step, "created", (json_int_t)time(NULL), "cwd",
                     getcwd(cwd, sizeof cwd));
}

/* The coordinator's process: a grandchild in a session of its own (no zombie for the
 * kernel, no signal from its terminal or its end), holding the folder's lock from before
 * its exec, so a folder whose lock is free has no coordinator. A failed exec writes its
 * errno to report. */
static void exec_coordinator(const char *exe, const char *dir, int report) {
    setsid();
    if (fork() != 0) _exit(0);
    char path[PATH_MAX];
    int lock = path_in(path, sizeof path, dir, "lock") ? -1 : open(path, O_RDWR | O_CREAT, 0600);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) || dup2(lock, LOCK_FD) < 0) goto fail;
    int null = open("/dev/null", O_RDONLY);
    int log = path_in(path, sizeof path, dir, "coordinator.log") ? -1
                                                                 : open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) goto fail;
    for (int fd = LOCK_FD + 1; fd < 1024; fd++)
        if (fd != report) close(fd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    execl(exe, exe, "--run-job", dir, (char *)NULL);
fail:;
    int e = errno;
    (void)!write(report, &e, sizeof e);
    _exit(127);
}

/* A start that failed leaves no job behind. */
static void remove_folder(const char *dir) {
    static const char *const files[] = {"job.json", "state.json", "lock", "coordinator.log", NULL};
    char path[PATH_MAX];
    for (int i = 0; files[i]; i++)
        if (path_in(path, sizeof path, dir, files[i]) == 0) unlink(path);
    rmdir(dir);
}

static int start_failed(taas_error *err, const char *doing, const char *dir) {
    sys_fail(err, doing, dir);
    remove_folder(dir);
    return -1;
}

int taas_detached_start(const taas_job_cfg *cfg, const char *header, taas_error *err) {
    if (!cfg->pragma || !header) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "only a #pragma taas cell's fit can be detached");
        taas_error_hint(err, "put `#pragma taas --gpus N --detach` on the cell's first line");
        return -1;
    }
    char exe[PATH_MAX];
    if (taas_self_exe(exe, sizeof exe, err)) {
        remove_folder(cfg->dir);
        return -1;
    }
    json_t *rec = job_record(cfg, header);
    json_t *state = json_pack("{s:s, s:s, s:s?, s:I}", "id", id_of(cfg->dir), "state", "starting", "model",
                              cfg->model, "created", (json_int_t)time(NULL));
    int bad = !rec || !state || write_json(cfg->dir, "job.json", rec) || write_json(cfg->dir, "state.json", state);
    json_decref(rec);
    json_decref(state);
    if (bad) return start_failed(err, "cannot write the job's record in", cfg->dir);
    int report[2];
    if (pipe2(report, O_CLOEXEC)) return start_failed(err, "cannot start the job's coordinator for", cfg->dir);
    pid_t pid = fork();
    if (pid == 0) {
        close(report[0]);
        exec_coordinator(exe, cfg->dir, report[1]);
    }
    close(report[1]);
    int e = 0;
    ssize_t got = 0;
    if (pid > 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        while ((got = read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    } else {
        e = errno;
    }
    close(report[0]);
    if (pid < 0 || got == (ssize_t)sizeof e) {
        errno = e;
        return start_failed(err, "cannot start the job's coordinator for", cfg->dir);
    }
    return 0;
}

/* ---- the coordinator ------------------------------------------------------------------ */

typedef struct coord {
    char dir[PATH_MAX / 2];
    json_t *state;
    json_t *view;           /* display id -> {"data", "metadata"} */
    int journal;            /* fd, O_APPEND */
    size_t journal_bytes;
    int journal_full;
    int view_dirty;
    double next_write;
    char ckpt_said[PATH_MAX];  /* the checkpoint state.json names */
    taas_job *job;
} coord;

static void journal(coord *c, json_t *entry) {
    if (c->journal_full || c->journal < 0) {
        json_decref(entry);
        return;
    }
    char *text = json_dumps(entry, JSON_COMPACT);
    json_decref(entry);
    if (!text) return;
    size_t n = strlen(text);
    if (c->journal_bytes + n + 1 > JOURNAL_MAX) {
        c->journal_full = 1;
        free(text);
        text = strdup("{\"stream\":\"stderr\",\"text\":\"[job] its output is longer than the journal keeps: "
                      "the rest is left out\\n\"}");
        if (!text) return;
        n = strlen(text);
    }
    text[n] = '\n';  /* over the NUL: one write, so a reader never sees half a line end */
    if (taas_write_all(c->journal, text, n + 1) == 0) c->journal_bytes += n + 1;
    free(text);
}

static void coord_stream(void *ctx, const char *name, const char *text) {
    coord *c = ctx;
    if (!strcmp(name, "stdout") && !strncmp(text, "plan: ", 6) && !json_object_get(c->state, "plan")) {
        size_t n = strcspn(text + 6, "\n");
        json_object_set_new(c->state, "plan", json_stringn(text + 6, n));
    }
    journal(c, json_pack("{s:s, s:s}", "stream", name, "text", text));
}

static void coord_display(void *ctx, json_t *data, json_t *metadata, const char *id, int update) {
    coord *c = ctx;
    if (!update) journal(c, json_pack("{s:O, s:O, s:s?}", "display", data, "metadata", metadata, "id", id));
    if (id) {
        json_object_set_new(c->view, id, json_pack("{s:O, s:O}", "data", data, "metadata", metadata));
        c->view_dirty = 1;
    }
    json_decref(data);
    json_decref(metadata);
}

static void coord_progress(coord *c) {
    taas_job *j = c->job;
    if (!j) return;
    json_object_set_new(c->state, "epoch", json_integer(j->epoch));
    json_object_set_new(c->state, "epochs", json_integer(j->epochs));
    json_object_set_new(c->state, "step", json_integer(j->step));
    json_object_set_new(c->state, "steps", json_integer(j->steps_per_epoch));
    json_object_set_new(c->state, "loss", json_real(j->loss));
    json_object_set_new(c->state, "restarts", json_integer(j->restarts));
    json_object_set_new(c->state, "backend", json_string(j->be ? j->be->name : "local"));
    if (!j->ckpt[0][0]) return;
    json_object_set_new(c->state, "checkpoint", json_string(j->ckpt[0]));
    /* where it stands, as epoch and step say it: the step lines come at most ~5 a second, so
     * the newest checkpoint may be past the last one */
    long long ce = j->ckpt_epoch + 1, cs = j->ckpt_step;  /* ckpt_step steps of epoch ckpt_epoch + 1 */
    if (cs == 0 && j->ckpt_epoch > 0) {  /* at an epoch's start: the one before is done */
        ce = j->ckpt_epoch;
        cs = j->steps_per_epoch;
    }
    json_object_set_new(c->state, "checkpoint_epoch", json_integer(ce));
    json_object_set_new(c->state, "checkpoint_step", json_integer(cs));
}

static void coord_write(coord *c, int now) {
    /* a new checkpoint is said at once: a coordinator killed next still names it */
    if (c->job && c->job->ckpt[0][0] && strcmp(c->job->ckpt[0], c->ckpt_said) != 0) {
        snprintf(c->ckpt_said, sizeof c->ckpt_said, "%s", c->job->ckpt[0]);
        now = 1;
    }
    if (!now && taas_now() < c->next_write) return;
    c->next_write = taas_now() + WRITE_EVERY_S;
    coord_progress(c);
    if (c->view_dirty && write_json(c->dir, "view.json", c->view) == 0) c->view_dirty = 0;
    write_json(c->dir, "state.json", c->state);
}

static void coord_end(coord *c, const char *state, const taas_error *e, const json_t *done, int weights) {
    json_object_set_new(c->state, "state", json_string(state));
    json_object_set_new(c->state, "ended", json_integer((json_int_t)time(NULL)));
    if (e) json_object_set_new(c->state, "error", json_pack("{s:s, s:s, s:s}", "ename", e->ename, "message",
                                                            e->message, "hint", e->hint));
    if (done) json_object_set_new(c->state, "done", json_deep_copy(done));
    if (weights && c->job) json_object_set_new(c->state, "weights", json_string(c->job->weights));
    c->view_dirty = 1;
    coord_write(c, 1);
}

static int coord_lock(const char *dir) {
    if (flock(LOCK_FD, LOCK_EX | LOCK_NB) == 0) return LOCK_FD;  /* the kernel's, from before the exec */
    char path[PATH_MAX];
    int fd = path_in(path, sizeof path, dir, "lock") ? -1 : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* The job's streams, names and facts from its record, kept alive by rec. */
static int coord_cfg(json_t *rec, const char *dir, taas_pragma *pr, taas_job_stream *streams, taas_job_cfg *cfg,
                     taas_error *err) {
    const char *header = json_string_value(json_object_get(rec, "header"));
    json_t *spec = json_object_get(rec, "spec");
    const json_t *ss = json_object_get(rec, "streams");
    const char *weights = json_string_value(json_object_get(rec, "weights"));
    if (!header || !json_is_object(spec) || !json_is_array(ss) || json_array_size(ss) > 2 || !weights) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "%s/job.json is not a job record of this version", dir);
        taas_error_hint(err, "start the job again from its cell");
        return -1;
    }
    if (taas_pragma_parse(header, pr, err)) return -1;
    for (size_t i = 0; i < json_array_size(ss); i++) {
        const json_t *s = json_array_get(ss, i);
        streams[i].role = json_string_value(json_object_get(s, "role"));
        streams[i].name = json_string_value(json_object_get(s, "name"));
        streams[i].facts = json_object_get(s, "facts");
        if (!streams[i].role) streams[i].role = "train";
    }
    *cfg = (taas_job_cfg){.pragma = pr, .spec = spec, .streams = streams, .nstreams = (int)json_array_size(ss),
                          .dir = dir, .weights = weights,
                          .model = json_string_value(json_object_get(rec, "model")),
                          .max_restarts = (int)json_integer_value(json_object_get(rec, "max_restarts")),
                          .resume_epoch = (long long)json_integer_value(json_object_get(rec, "resume_epoch")),
                          .resume_step = (long long)json_integer_value(json_object_get(rec, "resume_step"))};
    return 0;
}

int taas_detached_run(const char *dir) {
    coord c = {.journal = -1};
    if ((size_t)snprintf(c.dir, sizeof c.dir, "%s", dir) >= sizeof c.dir) {
        fprintf(stderr, "taas-kernel: --run-job: the folder's path is too long\n");
        return 1;
    }
    int lock = coord_lock(dir);
    char why[256];
    json_t *rec = read_json(dir, "job.json", why, sizeof why);
    if (lock < 0 || !rec) {
        fprintf(stderr, "taas-kernel: --run-job %s: %s\n", dir,
                lock < 0 ? "another coordinator runs this job, or its lock cannot be made"
                         : why[0] ? why : "no job.json there");
        json_decref(rec);
        return 1;
    }
    /* the job's processes do not hold the lock: a folder whose lock is free has no coordinator */
    fcntl(lock, F_SETFD, FD_CLOEXEC);
    c.state = read_json(dir, "state.json", why, sizeof why);
    if (!c.state) c.state = json_object();
    c.view = json_object();
    json_object_set_new(c.state, "id", json_string(id_of(dir)));
    json_object_set_new(c.state, "state", json_string("running"));
    json_object_set_new(c.state, "pid", json_integer(getpid()));
    json_object_set_new(c.state, "started", json_integer((json_int_t)time(NULL)));
    char path[PATH_MAX];
    if (path_in(path, sizeof path, dir, "journal.jsonl") == 0)
        c.journal = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const char *cwd = json_string_value(json_object_get(rec, "cwd"));
    if (cwd && chdir(cwd) != 0) {}  /* relative paths of the spec are the kernel's */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    const taas_io io = {.ctx = &c, .stream = coord_stream, .display = coord_display};
    taas_pragma pr;
    taas_job_stream streams[2];
    taas_job_cfg cfg;
    taas_error err;
    taas_error_clear(&err);
    coord_write(&c, 1);
    if (coord_cfg(rec, dir, &pr, streams, &cfg, &err) || !(c.job = taas_job_start(&cfg, &io, &err))) {
        coord_end(&c, "failed", &err, NULL, 0);
    } else {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN};
        ev.data.fd = taas_job_fd(c.job);
        epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev);
        ev.data.fd = sfd;
        if (sfd >= 0) epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
        for (;;) {
            struct signalfd_siginfo si;
            if (sfd >= 0 && read(sfd, &si, sizeof si) == (ssize_t)sizeof si && si.ssi_signo != SIGHUP) {
                int kept = taas_job_cancel(c.job, TAAS_JOB_STOP_GRACE_S, &io);
                coord_end(&c, "cancelled", NULL, kept ? taas_job_done(c.job) : NULL, kept);
                break;
            }
            int rc = taas_job_poll(c.job, &io, &err);
            if (rc == 0) {
                coord_end(&c, "done", NULL, taas_job_done(c.job), 1);
                break;
            }
            if (rc < 0) {
                coord_end(&c, "failed", &err, NULL, 0);
                break;
            }
            coord_write(&c, 0);
            double wait = taas_job_deadline(c.job) - taas_now();
            if (wait > WRITE_EVERY_S) wait = WRITE_EVERY_S;
            epoll_wait(ep, &ev, 1, wait < 0 ? 0 : (int)(wait * 1000) + 1);
        }
        if (ep >= 0) close(ep);
    }
    taas_job_free(c.job);
    if (c.journal >= 0) close(c.journal);
    if (sfd >= 0) close(sfd);
    json_decref(c.state);
    json_decref(c.view);
    json_decref(rec);
    close(lock);
    return 0;
}

/* ---- reading the folder ------------------------------------------------------------- */

/* Someone (the coordinator) holds the folder's lock. */
static int coordinator_runs(const char *dir) {
    char path[PATH_MAX];
    int fd = path_in(path, sizeof path, dir, "lock") ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

static int ended(const char *state) {
    return state && strcmp(state, "starting") != 0 && strcmp(state, "running") != 0;
}

/* The states a coordinator writes (lost and damaged are the reader's). */
static int known_state(const char *state) {
    static const char *const all[] = {"starting", "running", "done", "failed", "cancelled", NULL};
    for (int i = 0; all[i]; i++)
        if (!strcmp(state, all[i])) return 1;
    return 0;
}

static json_t *damaged(const char *why) {
    char shown[256];
    return json_pack("{s:s, s:s}", "state", "damaged", "damage", taas_utf8_clip(shown, sizeof shown, why,
                                                                                strlen(why), 160));
}

/* state.json as it is: NULL when it is not there (a folder that is being made); a damaged
 * state when it cannot be read or is not a coordinator's. */
static json_t *read_state(const char *dir) {
    char why[256];
    json_t *s = read_json(dir, "state.json", why, sizeof why);
    if (!s) return why[0] ? damaged(why) : NULL;
    const json_t *st = json_object_get(s, "state");
    if (!json_is_string(st)) {
        snprintf(why, sizeof why, "state.json has no \"state\"");
    } else if (!known_state(json_string_value(st))) {
        char shown[128];
        snprintf(why, sizeof why, "state.json's \"state\" is '%s'",
                 taas_utf8_clip(shown, sizeof shown, json_string_value(st), json_string_length(st), 40));
    } else {
        return s;
    }
    json_decref(s);
    return damaged(why);
}

json_t *taas_detached_state(const char *dir) {
    json_t *s = read_state(dir);
    if (!s) return NULL;
    const char *st = json_string_value(json_object_get(s, "state"));
    if (!ended(st) && !coordinator_runs(dir)) {
        /* the coordinator may have ended just now: its last word first */
        json_decref(s);
        s = read_state(dir);
        if (s && !ended(json_string_value(json_object_get(s, "state"))))
            json_object_set_new(s, "state", json_string("lost"));
    }
    return s;
}

static long long field(const json_t *s, const char *key) {
    return (long long)json_integer_value(json_object_get(s, key));
}

void taas_detached_reached(const json_t *state, long long *epoch, long long *step) {
    *epoch = field(state, "epoch");
    *step = field(state, "step");
    long long ce = field(state, "checkpoint_epoch"), cs = field(state, "checkpoint_step");
    if (json_is_string(json_object_get(state, "checkpoint")) && (ce > *epoch || (ce == *epoch && cs > *step))) {
        *epoch = ce;
        *step = cs;
    }
    if (*epoch < 0 || *step < 0) *epoch = *step = 0;
}

int taas_detached_ended_error(const json_t *state, const char *id, const char *dir, const char *into, int kept,
                              taas_error *err) {
    const char *st = json_string_value(json_object_get(state, "state"));
    const char *ckpt = json_string_value(json_object_get(state, "checkpoint"));
    st = st ? st : "damaged";
    if (!strcmp(st, "failed")) {
        const json_t *e = json_object_get(state, "error");
        const char *ename = json_string_value(json_object_get(e, "ename"));
        const char *message = json_string_value(json_object_get(e, "message"));
        const char *hint = json_string_value(json_object_get(e, "hint"));
        char why[160], shown[96];
        if (!json_is_object(e)) snprintf(why, sizeof why, "it has no \"error\" object");
        else if (!ename || !taas_error_name_known(ename))
            snprintf(why, sizeof why, "its \"ename\" '%s' is no taas error name",
                     ename ? taas_utf8_clip(shown, sizeof shown, ename, strlen(ename), 40) : "");
        else if (!message) snprintf(why, sizeof why, "its \"message\" is not a string");
        else why[0] = '\0';
        if (why[0]) {
            taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s failed, but its state.json's error is damaged: %s",
                           id, why);
            taas_error_hint(err, "%s/coordinator.log and journal.jsonl there tell what happened", dir);
            return -1;
        }
        taas_error_set(err, ename, TAAS_NOPOS, "%s", message);
        if (hint && hint[0]) taas_error_hint(err, "%s", hint);
        return -1;
    }
    if (!strcmp(st, "cancelled")) {
        long long epoch, step;
        taas_detached_reached(state, &epoch, &step);
        if (epoch > 0 || step > 0)
            taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s was cancelled at epoch %lld, step %lld", id,
                           epoch > 0 ? epoch : 1, step);
        else
            taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s was cancelled%s", id,
                           kept || ckpt ? "" : " before it had trained a step");
        if (kept) taas_error_hint(err, "%s has the weights of its last completed step", into);
        else if (!into && json_is_string(json_object_get(state, "weights")))
            taas_error_hint(err, "attach('%s', into=net) gives net its last weights", id);
        else if (ckpt) taas_error_hint(err, "its last checkpoint is %s: fit(..., resume='%s') goes on from it", ckpt,
                                       ckpt);
        return -1;
    }
    if (!strcmp(st, "lost")) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s lost its coordinator (pid %lld): it was killed, or its "
                       "machine restarted", id, field(state, "pid"));
        if (ckpt) taas_error_hint(err, "its last checkpoint is %s: fit(..., resume='%s') goes on from it", ckpt, ckpt);
        else taas_error_hint(err, "it had no checkpoint yet: run its cell again");
        return -1;
    }
    const char *why = json_string_value(json_object_get(state, "damage"));
    taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s's folder is damaged: %s", id,
                   why ? why : "its state is not one taas writes");
    taas_error_hint(err, "its files are not what taas wrote: %s/coordinator.log may tell what happened; remove the "
                    "folder when you no longer need it", dir);
    return -1;
}

static int valid_id(const char *id) {
    size_t n = strlen(id);
    if (n == 0 || n > 64 || id[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') ||
              id[i] == '-' || id[i] == '_'))
            return 0;
    return 1;
}

static int by_created(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t cx = json_integer_value(json_object_get(x, "created")), cy = json_integer_value(json_object_get(y, "created"));
    if (cx != cy) return cx > cy ? -1 : 1;
    return strcmp(json_string_value(json_object_get(y, "id")), json_string_value(json_object_get(x, "id")));
}

json_t *taas_detached_list(taas_error *err) {
    char jobs[PATH_MAX / 4];
    if (taas_jobs_dir(jobs, sizeof jobs, err)) return NULL;
    DIR *d = opendir(jobs);
    if (!d) {
        sys_fail(err, "cannot read the jobs folder", jobs);
        return NULL;
    }
    json_t **all = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    for (int k = 0; k < 100000 && (e = readdir(d)); k++) {  /* bounded: a folder of folders */
        if (strncmp(e->d_name, "job-", 4) != 0 || !valid_id(e->d_name)) continue;
        char dir[PATH_MAX];
        if (path_in(dir, sizeof dir, jobs, e->d_name)) continue;
        json_t *s = taas_detached_state(dir);
        if (!s) continue;
        json_object_set_new(s, "id", json_string(e->d_name));
        json_object_set_new(s, "dir", json_string(dir));
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            json_t **grown = realloc(all, nc * sizeof *all);
            if (!grown) {
                json_decref(s);
                break;
            }
            all = grown;
            cap = nc;
        }
        all[n++] = s;
    }
    closedir(d);
    if (n) qsort(all, n, sizeof *all, by_created);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(list, all[i]);
    free(all);
    return list;
}

int taas_detached_find(const char *id, char *dir, size_t n, taas_error *err) {
    char shown[96];
    snprintf(shown, sizeof shown, "%.80s%s", id, strlen(id) > 80 ? "..." : "");
    if (!valid_id(id)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "'%s' is not a job id", shown);
        taas_error_hint(err, "a job id looks like 'job-20261126-071502-a8Bc3d'; jobs() lists yours");
        return -1;
    }
    json_t *list = taas_detached_list(err);
    if (!list) return -1;
    const json_t *hit = NULL;
    int hits = 0;
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) {
        const char *have = json_string_value(json_object_get(s, "id"));
        if (!strcmp(have, id)) {
            hit = s;
            hits = 1;
            break;
        }
        if (!strncmp(have, id, strlen(id))) {
            hit = s;
            hits++;
        }
    }
    if (hits == 1) {
        snprintf(dir, n, "%s", json_string_value(json_object_get(hit, "dir")));
        json_decref(list);
        return 0;
    }
    if (hits > 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "'%s' is the start of %d job ids", shown, hits);
        taas_error_hint(err, "give more of the id; jobs() lists them");
    } else {
        const char *names[8];
        size_t k = 0;
        json_array_foreach(list, i, s) if (k < 8) names[k++] = json_string_value(json_object_get(s, "id"));
        int close = taas_suggest(id, strlen(id), names, k);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "there is no job '%s'", shown);
        if (close >= 0) taas_error_hint(err, "did you mean '%s'? jobs() lists your jobs", names[close]);
        else if (k) taas_error_hint(err, "jobs() lists your jobs; the newest is '%s'", names[0]);
        else taas_error_hint(err, "there are no jobs yet: a fit in a `#pragma taas --gpus N --detach` cell makes one");
    }
    json_decref(list);
    return -1;
}

/* Does pid have the folder's lock file (st) open with the lock on it? Its descriptors and
 * what /proc/PID/fdinfo says of their locks (the locks held through that descriptor's open
 * file: a flock is its open file's). */
static int holds_lock(pid_t pid, const struct stat *st) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    int held = 0;
    struct dirent *e;
    for (int k = 0; !held && k < 1 << 20 && (e = readdir(d)); k++) {  /* bounded: RLIMIT_NOFILE's */
        char fd[sizeof path + 300], line[256];
        struct stat fst;
        if (e->d_name[0] == '.' || (size_t)snprintf(fd, sizeof fd, "%s/%s", path, e->d_name) >= sizeof fd ||
            stat(fd, &fst) != 0 || fst.st_dev != st->st_dev || fst.st_ino != st->st_ino)
            continue;
        snprintf(fd, sizeof fd, "/proc/%d/fdinfo/%.255s", (int)pid, e->d_name);
        FILE *f = fopen(fd, "re");
        while (f && !held && fgets(line, sizeof line, f))
            held = !strncmp(line, "lock:", 5) && strstr(line, " FLOCK ") && strstr(line, " WRITE ");
        if (f) fclose(f);
    }
    closedir(d);
    return held;
}

/* The process that holds the folder's lock, as the kernel's own records prove it: a taker
 * of a flock on the lock file's inode in /proc/locks, pinned by a pidfd, that has the lock
 * file open with the lock on it while the pidfd shows it alive (so the pid was not reused
 * meanwhile). Its pidfd and *pid, or -1: no process of this machine holds it. */
static int lock_holder(const char *dir, pid_t *pid) {
    char path[PATH_MAX], line[256];
    struct stat st;
    if (path_in(path, sizeof path, dir, "lock") || stat(path, &st) != 0) return -1;
    FILE *f = fopen("/proc/locks", "re");
    int pidfd = -1;
    while (f && pidfd < 0 && fgets(line, sizeof line, f)) {
        char type[16], rw[16];
        int p;
        unsigned maj, min;
        unsigned long long ino;
        /* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:1134 0 EOF"; a waiter's line has "->" and is
         * not matched. The device as /proc/locks says it may differ from stat's (btrfs,
         * overlayfs): the inode picks the candidates, holds_lock proves them. */
        if (sscanf(line, "%*d: %15s %*s %15s %d %x:%x:%llu", type, rw, &p, &maj, &min, &ino) != 6 ||
            strcmp(type, "FLOCK") || strcmp(rw, "WRITE") || ino != (unsigned long long)st.st_ino || p <= 1)
            continue;  /* p 0: a process outside this pid namespace */
        pidfd = (int)pidfd_open(p, 0);
        if (pidfd < 0) continue;
        if (holds_lock(p, &st) && pidfd_send_signal(pidfd, 0, NULL, 0) == 0) {
            *pid = p;
        } else {
            close(pidfd);
            pidfd = -1;
        }
    }
    if (f) fclose(f);
    return pidfd;
}

int taas_detached_cancel(const char *dir, taas_error *err) {
    json_t *s = taas_detached_state(dir);
    const char *id = id_of(dir);
    const char *st = s ? json_string_value(json_object_get(s, "state")) : "starting";
    const json_t *pv = s ? json_object_get(s, "pid") : NULL;
    json_int_t pid = json_integer_value(pv);
    int refused = 1;
    if (s && !strcmp(st, "damaged")) {
        taas_detached_ended_error(s, id, dir, NULL, 0, err);
    } else if (ended(st)) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s has already ended (%s)", id, st);
        taas_error_hint(err, "attach('%s') shows how it ended", id);
    } else if (!pv) {
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s is still starting", id);
        taas_error_hint(err, "cancel it again in a moment");
    } else if (!json_is_integer(pv) || pid <= 1 || pid > INT_MAX) {
        /* never a number read from a file: pid_t is 32 bits, and -1 is every process */
        char *text = json_dumps(pv, JSON_ENCODE_ANY), shown[64];
        taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s's state.json has \"pid\": %s, which is no process id",
                       id, text ? taas_utf8_clip(shown, sizeof shown, text, strlen(text), 32) : "?");
        taas_error_hint(err, "its folder %s is damaged; nothing was signalled. Its coordinator, if one runs, holds "
                        "%s/lock (fuser -v shows it)", dir, dir);
        free(text);
    } else {
        refused = 0;
    }
    json_decref(s);
    if (refused) return -1;
    /* the coordinator is the lock's holder, proven, and the pid it wrote must be that one */
    pid_t holder = 0;
    int pidfd = lock_holder(dir, &holder);
    if (pidfd < 0 || holder != (pid_t)pid) {
        if (pidfd >= 0)
            taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s was not cancelled: its lock is held by process %d, "
                           "not by process %lld that its state.json names", id, (int)holder, (long long)pid);
        else
            taas_error_set(err, TAAS_ERR_JOB, TAAS_NOPOS, "job %s was not cancelled: no process of this machine "
                           "holds its lock", id);
        taas_error_hint(err, "nothing was signalled. A coordinator on another machine that shares the jobs folder is "
                        "cancelled there; else jobs() shows how it stands now");
        if (pidfd >= 0) close(pidfd);
        return -1;
    }
    int rc = pidfd_send_signal(pidfd, SIGTERM, NULL, 0);
    int e = errno;
    close(pidfd);
    errno = e;
    /* ESRCH: it ended just now, as the follow will tell */
    return rc == 0 || errno == ESRCH ? 0 : sys_fail(err, "cannot stop the coordinator of", dir);
}

/* ---- following -------------------------------------------------------------------------- */

struct taas_follow {
    char dir[PATH_MAX / 2];
    int inotify;
    off_t journal_at;
    json_t *shown;          /* display id -> what this follow last showed of it */
    taas_buf partial;       /* the journal's line so far */
    int too_long;           /* the line is longer than a coordinator writes: left out */
};

taas_follow *taas_follow_open(const char *dir, taas_error *err) {
    taas_follow *f = calloc(1, sizeof *f);
    if (!f) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory following the job");
        return NULL;
    }
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->shown = json_object();
    f->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (f->inotify < 0 || inotify_add_watch(f->inotify, dir, IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
        sys_fail(err, "cannot watch the job folder", dir);
        taas_follow_free(f);
        return NULL;
    }
    return f;
}

int taas_follow_fd(const taas_follow *f) {
    return f->inotify;
}

static void show_entry(taas_follow *f, const json_t *e, const taas_io *io) {
    const char *stream = json_string_value(json_object_get(e, "stream"));
    const char *text = json_string_value(json_object_get(e, "text"));
    if (stream && text && io->stream) {
        io->stream(io->ctx, strcmp(stream, "stderr") ? "stdout" : "stderr", text);
        return;
    }
    json_t *data = json_object_get(e, "display");
    if (!json_is_object(data) || !io->display) return;
    const json_t *md = json_object_get(e, "metadata");
    const char *id = json_string_value(json_object_get(e, "id"));
    io->display(io->ctx, json_incref(data), json_is_object(md) ? json_deep_copy(md) : json_object(), id, 0);
    if (id) json_object_set_new(f->shown, id, json_pack("{s:O, s:O}", "data", data, "metadata",
                                                        json_is_object(md) ? md : json_object()));
}

/* The journal's new lines. A poll reads at most what a coordinator writes (JOURNAL_MAX and a
 * line); a line longer than that is not one a coordinator wrote, and is left out. */
static void follow_journal(taas_follow *f, const taas_io *io) {
    int fd = open_regular(f->dir, "journal.jsonl");
    if (fd < 0) return;
    char buf[65536];
    for (size_t k = 0; k < JOURNAL_MAX / sizeof buf + 2; k++) {
        ssize_t n = pread(fd, buf, sizeof buf, f->journal_at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        f->journal_at += n;
        for (ssize_t i = 0, start = 0; i < n; i++) {
            int end = buf[i] == '\n';
            if (!end && i + 1 < n) continue;
            if (!f->too_long) taas_buf_add(&f->partial, buf + start, (size_t)(i - start + !end));
            start = i + 1;
            if (f->partial.len > JOURNAL_MAX) {
                f->too_long = 1;
                taas_buf_free(&f->partial);
            }
            if (!end) continue;
            json_t *e = f->partial.data ? json_loadb(f->partial.data, f->partial.len, 0, NULL) : NULL;
            if (e) show_entry(f, e, io);
            json_decref(e);
            taas_buf_free(&f->partial);
            f->too_long = 0;
        }
    }
    close(fd);
}

static void follow_view(taas_follow *f, const taas_io *io) {
    char why[256];
    json_t *view = read_json(f->dir, "view.json", why, sizeof why);
    const char *id;
    json_t *v;
    json_object_foreach(view, id, v) {
        if (json_equal(json_object_get(f->shown, id), v) || !json_is_object(json_object_get(v, "data"))) continue;
        const json_t *md = json_object_get(v, "metadata");
        if (io->display)
            io->display(io->ctx, json_deep_copy(json_object_get(v, "data")),
                        json_is_object(md) ? json_deep_copy(md) : json_object(), id, 1);
        json_object_set(f->shown, id, v);
    }
    json_decref(view);
}

int taas_follow_poll(taas_follow *f, const taas_io *io, json_t **state) {
    char events[4096];
    while (read(f->inotify, events, sizeof events) > 0) {}
    json_t *s = taas_detached_state(f->dir);
    follow_journal(f, io);
    follow_view(f, io);
    if (s && ended(json_string_value(json_object_get(s, "state")))) {
        *state = s;
        return 0;
    }
    json_decref(s);
    return 1;
}

void taas_follow_free(taas_follow *f) {
    if (!f) return;
    if (f->inotify >= 0) close(f->inotify);
    json_decref(f->shown);
    taas_buf_free(&f->partial);
    free(f);
}
