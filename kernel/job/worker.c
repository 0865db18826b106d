#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "errnames.h"
#include "fdio.h"
#include "utf8.h"

extern char **environ;

#define WORKER_NAME "taas-worker"
#define MAX_ARGS 16

struct taas_child {
    pid_t pid;
    int reaped;
    int status;      /* from waitpid, once reaped */
    int out_fd;      /* stdout, read end; -1 once at its end */
    int err_fd;      /* stderr, a memfd */
    taas_buf out;
    char role[16];
};

/* ---- finding the binary -------------------------------------------------------------- */

static int executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The first executable `name` in the folders of path_env; 1 and out when there is one. */
static int on_path(const char *name, const char *path_env, char *out, size_t n) {
    char cand[PATH_MAX];
    for (const char *p = path_env ? path_env : ""; *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len > 0 && (size_t)snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, name) < sizeof cand &&
            executable(cand) && strlen(cand) < n) {
            snprintf(out, n, "%s", cand);
            return 1;
        }
        p += len + (colon ? 1 : 0);
    }
    return 0;
}

int taas_program_find(const char *name, const char *env_var, const char *package, char *out, size_t n,
                      taas_error *err) {
    char q[300];
    const char *override = getenv(env_var);
    if (override && override[0]) {
        if (executable(override) && strlen(override) < n) {
            snprintf(out, n, "%s", override);
            return 0;
        }
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "%s names %s, which is not an executable file", env_var,
                       taas_utf8_clip(q, sizeof q, override, strlen(override), 200));
        taas_error_hint(err, "set %s to the path of %s, or unset it to use the one on PATH", env_var, name);
        return -1;
    }
    if (on_path(name, getenv("PATH"), out, n)) return 0;
    taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "cannot find %s on PATH", name);
    taas_error_hint(err, "install it (apt-get install %s), or set %s to its path", package, env_var);
    return -1;
}

int taas_worker_find_in(const char *override, const char *self_exe, const char *path_env, char *out, size_t n,
                        taas_error *err) {
    char q[300], cand[PATH_MAX];
    if (override && override[0]) {
        if (executable(override) && strlen(override) < n) {
            snprintf(out, n, "%s", override);
            return 0;
        }
        taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "TAAS_WORKER names %s, which is not an executable file",
                       taas_utf8_clip(q, sizeof q, override, strlen(override), 200));
        taas_error_hint(err, "set TAAS_WORKER to the path of taas-worker, or unset it to use the one next to "
                             "taas-kernel");
        return -1;
    }
    char dir[PATH_MAX] = "";
    if (self_exe && self_exe[0]) {
        snprintf(dir, sizeof dir, "%s", self_exe);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else dir[0] = '\0';
        if (dir[0] && (size_t)snprintf(cand, sizeof cand, "%s/%s", dir, WORKER_NAME) < sizeof cand &&
            executable(cand) && strlen(cand) < n) {
            snprintf(out, n, "%s", cand);
            return 0;
        }
    }
    if (on_path(WORKER_NAME, path_env, out, n)) return 0;
    taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "cannot find taas-worker: it is neither next to taas-kernel "
                   "(in %s) nor on PATH", dir[0] ? taas_utf8_clip(q, sizeof q, dir, strlen(dir), 200) : "?");
    taas_error_hint(err, "install taas-worker with taas-kernel (cmake --install puts both in one folder), put its "
                         "folder on PATH, or set TAAS_WORKER to its path");
    return -1;
}

int taas_worker_find(char *out, size_t n, taas_error *err) {
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = '\0';
    return taas_worker_find_in(getenv("TAAS_WORKER"), self, getenv("PATH"), out, n, err);
}

double taas_worker_timeout(const char *name, double dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    double v = strtod(s, &end);
    return (*end || !(v > 0) || !isfinite(v)) ? dflt : v;
}

/* ---- the child ----------------------------------------------------------------------- */

static int sys_error(taas_error *err, const char *what) {
    taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "cannot start taas-worker: %s failed: %s", what, strerror(errno));
    taas_error_hint(err, "the kernel may be out of file descriptors or memory; restart it");
    return -1;
}

/* A descriptor at 3 or above: one of 0-2 (a kernel started with them closed) would be a
 * no-op dup2 in the child and keep its close-on-exec flag. */
static int above_stdio(int fd) {
    if (fd < 0 || fd > 2) return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return moved;
}

static int memfd_with(const char *name, const char *data, size_t len, taas_error *err) {
    int fd = above_stdio(memfd_create(name, MFD_CLOEXEC));
    if (fd < 0) return sys_error(err, "memfd_create");
    if (taas_write_all(fd, data, len)) {
        close(fd);
        return sys_error(err, "writing the spec");
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

taas_child *taas_child_start(const char *role, const char *const *args, const char *input, size_t len,
                             taas_error *err) {
    char path[PATH_MAX];
    if (taas_worker_find(path, sizeof path, err)) return NULL;
    char *argv[MAX_ARGS + 3];
    size_t na = 0;
    argv[na++] = path;
    argv[na++] = (char *)role;
    for (size_t i = 0; args && args[i] && i < MAX_ARGS; i++) argv[na++] = (char *)args[i];
    argv[na] = NULL;

    taas_child *c = calloc(1, sizeof *c);
    if (!c) {
        sys_error(err, "calloc");
        return NULL;
    }
    snprintf(c->role, sizeof c->role, "%s", role);
    c->out_fd = c->err_fd = -1;
    int in_fd = memfd_with("taas-spec", input ? input : "", input ? len : 0, err);
    int pipefd[2] = {-1, -1};
    if (in_fd < 0) goto fail;
    if ((c->err_fd = above_stdio(memfd_create("taas-worker-stderr", MFD_CLOEXEC))) < 0) {
        sys_error(err, "memfd_create");
        goto fail;
    }
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        sys_error(err, "pipe");
        goto fail;
    }
    pipefd[0] = above_stdio(pipefd[0]);
    pipefd[1] = above_stdio(pipefd[1]);
    if (pipefd[0] < 0 || pipefd[1] < 0) {
        sys_error(err, "fcntl");
        goto fail;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    /* dup2 clears close-on-exec on the copies the child keeps */
    posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, c->err_fd, 2);
    /* its own process group; the kernel's ignored SIGPIPE and its handlers are not inherited */
    sigset_t def, none;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawn(&c->pid, path, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) {
        errno = rc;
        sys_error(err, "posix_spawn");
        goto fail;
    }
    close(pipefd[1]);
    close(in_fd);
    c->out_fd = pipefd[0];
    fcntl(c->out_fd, F_SETFL, fcntl(c->out_fd, F_GETFL) | O_NONBLOCK);
    return c;
fail:
    if (in_fd >= 0) close(in_fd);
    if (pipefd[0] >= 0) close(pipefd[0]);
    if (pipefd[1] >= 0) close(pipefd[1]);
    if (c->err_fd >= 0) close(c->err_fd);
    free(c);
    return NULL;
}

void taas_child_free(taas_child *c) {
    if (!c) return;
    if (c->pid > 0 && !c->reaped) {
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {}
    }
    if (c->out_fd >= 0) close(c->out_fd);
    if (c->err_fd >= 0) close(c->err_fd);
    taas_buf_free(&c->out);
    free(c);
}

pid_t taas_child_pid(const taas_child *c) {
    return c->pid;
}

int taas_child_fd(const taas_child *c) {
    return c->out_fd;
}

const taas_buf *taas_child_output(const taas_child *c) {
    return &c->out;
}

int taas_child_pump(taas_child *c, size_t max, taas_error *err) {
    char buf[65536];
    while (c->out_fd >= 0) {
        ssize_t r = read(c->out_fd, buf, sizeof buf);
        if (r > 0) {
            if (c->out.len + (size_t)r > max) {
                taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "taas-worker %s wrote more than %zu MiB", c->role,
                               max >> 20);
                taas_error_hint(err, "ask for less (a smaller n), or report it as a bug in taas");
                return -1;
            }
            taas_buf_add(&c->out, buf, (size_t)r);
            continue;
        }
        if (r == 0) {
            close(c->out_fd);
            c->out_fd = -1;
            break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "cannot read taas-worker %s's output: %s", c->role,
                       strerror(errno));
        taas_error_hint(err, "run the cell again");
        return -1;
    }
    return 1;
}

static char *read_stderr(const taas_child *c) {
    struct stat st;
    if (c->err_fd < 0 || fstat(c->err_fd, &st) < 0 || st.st_size <= 0) return strdup("");
    size_t n = (size_t)st.st_size;
    char *s = malloc(n + 1);
    if (!s) return strdup("");
    ssize_t r = pread(c->err_fd, s, n, 0);
    s[r > 0 ? (size_t)r : 0] = '\0';
    return s;
}

/* The last non-empty line of s, in place (s is modified). */
static char *last_line(char *s) {
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
    char *nl = strrchr(s, '\n');
    return nl ? nl + 1 : s;
}

char *taas_child_last_line(const taas_child *c) {
    char *all = read_stderr(c);
    if (!all) return NULL;
    char *line = strdup(last_line(all));
    free(all);
    return line;
}

/* A worker's {"error": {...}} line into err; 0 when the line is not one. */
static int take_error(const char *line, taas_error *err) {
    json_t *j = json_loads(line, 0, NULL);
    const json_t *e = json_object_get(j, "error");
    const char *ename = json_string_value(json_object_get(e, "ename"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *hint = json_string_value(json_object_get(e, "hint"));
    int ok = ename && msg;
    if (ok) {
        taas_error_set(err, ename, TAAS_NOPOS, "%s", msg);
        if (hint && hint[0]) taas_error_hint(err, "%s", hint);
    }
    json_decref(j);
    return ok;
}

int taas_child_finish(taas_child *c, taas_error *err) {
    if (!c->reaped) {
        while (waitpid(c->pid, &c->status, 0) < 0) {
            if (errno == EINTR) continue;
            c->status = 0;
            break;
        }
        c->reaped = 1;
    }
    if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0) return 0;
    char *all = read_stderr(c);
    char *line = last_line(all ? all : (char *)"");
    /* probe reports on stdout, show on stderr */
    char *out_line = NULL;
    if (c->out.len && c->out.data && taas_utf8_valid(c->out.data, c->out.len)) {
        out_line = strdup(c->out.data);
        if (out_line && take_error(last_line(out_line), err)) goto done;
    }
    if (take_error(line, err)) goto done;
    char q[400];
    taas_utf8_clip(q, sizeof q, line, strlen(line), 300);
    if (WIFSIGNALED(c->status))
        taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "taas-worker %s was killed by signal %d (%s)", c->role,
                       WTERMSIG(c->status), strsignal(WTERMSIG(c->status)));
    else
        taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "taas-worker %s failed with exit status %d", c->role,
                       WEXITSTATUS(c->status));
    if (q[0])
        taas_error_hint(err, "its last words: %s", q);
    else
        taas_error_hint(err, "it said nothing; this is a bug in taas, please report the cell that did it");
done:
    free(out_line);
    free(all);
    return -1;
}

/* ---- running to the end ------------------------------------------------------------- */

int taas_worker_run(const char *role, const char *const *args, const char *input, size_t len, double timeout_s,
                    const char *timeout_name, int intr_fd, taas_buf *out, taas_error *err) {
    taas_child *c = taas_child_start(role, args, input, len, err);
    if (!c) return -1;
    double deadline = taas_now() + timeout_s;
    int rc = 0;
    for (;;) {
        int r = taas_child_pump(c, (size_t)64 << 20, err);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 1) {
            rc = taas_child_finish(c, err);
            break;
        }
        double left = deadline - taas_now();
        if (left <= 0) {
            taas_error_set(err, TAAS_ERR_TIMEOUT, TAAS_NOPOS, "taas-worker %s took longer than %g s and was stopped",
                           role, timeout_s);
            taas_error_hint(err, "the dataset's storage may be slow or unreachable: check the path or URL; for "
                                 "slow storage raise %s (seconds) in the kernel's environment", timeout_name);
            rc = -1;
            break;
        }
        struct pollfd p[2] = {{taas_child_fd(c), POLLIN, 0}, {intr_fd, POLLIN, 0}};
        int ms = (int)ceil(left * 1000.0);
        int np = poll(p, intr_fd >= 0 ? 2 : 1, ms > 0 ? ms : 1);
        if (np < 0 && errno != EINTR) {
            taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "waiting for taas-worker %s failed: %s", role,
                           strerror(errno));
            taas_error_hint(err, "run the cell again");
            rc = -1;
            break;
        }
        if (np > 0 && intr_fd >= 0 && (p[1].revents & POLLIN)) {
            taas_error_set(err, TAAS_ERR_INTERRUPT, TAAS_NOPOS, "interrupted while taas-worker %s was reading the data",
                           role);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && out) {
        const taas_buf *o = taas_child_output(c);
        if (o->len) taas_buf_add(out, o->data, o->len);
    }
    taas_child_free(c);
    return rc;
}
