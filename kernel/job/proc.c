/* fork + setsid + PR_SET_PDEATHSIG + exec: posix_spawn cannot ask for the death signal. */
#include "proc.h"

#include "errnames.h"
#include "fdio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int sys_error(taas_error *err, const char *what, const char *doing) {
    taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "cannot start %s: %s failed: %s", what, doing, strerror(errno));
    taas_error_hint(err, "the kernel may be out of processes, file descriptors or memory; restart it");
    return -1;
}

taas_proc *taas_proc_spawn(const char *what, char *const argv[], char *const env[], const char *input,
                           int keep_stdin, taas_error *err) {
    taas_proc *p = calloc(1, sizeof *p);
    if (!p) {
        sys_error(err, what, "calloc");
        return NULL;
    }
    snprintf(p->what, sizeof p->what, "%s", what);
    p->pidfd = p->out_fd = p->in_fd = -1;
    int fds[2] = {-1, -1}, in[2] = {-1, -1};
    if (pipe2(fds, O_CLOEXEC) < 0 || (input && pipe2(in, O_CLOEXEC) < 0)) {
        sys_error(err, what, "pipe");
        if (fds[0] >= 0) {
            close(fds[0]);
            close(fds[1]);
        }
        free(p);
        return NULL;
    }
    pid_t parent = getpid();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);  /* no handler of the kernel runs in the child */
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);  /* the kernel died before the line above */
        for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, NULL);
        int devnull = in[0] >= 0 ? in[0] : open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execve(argv[0], argv, env ? env : environ);
        static const char msg[] = "taas: exec failed: the program is missing or not executable\n";
        ssize_t w = write(2, msg, sizeof msg - 1);  /* only async-signal-safe calls after fork */
        (void)w;
        _exit(127);
    }
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(fds[1]);
    if (in[0] >= 0) close(in[0]);
    if (pid < 0) {
        errno = saved;
        close(fds[0]);
        if (in[1] >= 0) close(in[1]);
        sys_error(err, what, "fork");
        free(p);
        return NULL;
    }
    p->pid = pid;
    p->out_fd = fds[0];
    if (in[1] >= 0) {
        /* a few hundred bytes: the pipe holds them without a reader (a process that ended
         * at once is told by its exit) */
        taas_write_all(in[1], input, strlen(input));
        if (keep_stdin) p->in_fd = in[1];
        else close(in[1]);
    }
    fcntl(p->out_fd, F_SETFL, fcntl(p->out_fd, F_GETFL) | O_NONBLOCK);
    p->pidfd = pidfd_open(pid, 0);
    if (p->pidfd >= 0) fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
    return p;
}

int taas_proc_reap(taas_proc *p) {
    if (p->exited) return 1;
    int st;
    pid_t r;
    while ((r = waitpid(p->pid, &st, WNOHANG)) < 0 && errno == EINTR) {}
    if (r != p->pid) return 0;
    p->exited = 1;
    p->status = st;
    if (p->pidfd >= 0) close(p->pidfd);
    p->pidfd = -1;
    return 1;
}

/* Its children by /proc (every thread's): a launcher such as mpirun starts its processes in
 * process groups of their own, where killing its session does not reach them. */
static void kill_children(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    for (int n = 0; n < 4096 && (e = readdir(d)); n++) {  /* bounded: a launcher has a few threads */
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char cpath[320], list[4096];
        snprintf(cpath, sizeof cpath, "/proc/%d/task/%.32s/children", (int)pid, e->d_name);
        int fd = open(cpath, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t len = read(fd, list, sizeof list - 1);
        close(fd);
        if (len <= 0) continue;
        list[len] = '\0';
        char *save = NULL;
        for (char *t = strtok_r(list, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
            long child = strtol(t, NULL, 10);
            if (child > 1) kill((pid_t)child, SIGKILL);
        }
    }
    closedir(d);
}

void taas_proc_kill(taas_proc *p) {
    if (p && p->in_fd >= 0) {
        close(p->in_fd);
        p->in_fd = -1;
    }
    if (!p || p->exited) return;
    kill_children(p->pid);  /* before it dies, while they are still its children */
    kill(-p->pid, SIGKILL);
    kill(p->pid, SIGKILL);
    int st;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
    p->exited = 1;
    p->status = st;
    if (p->pidfd >= 0) close(p->pidfd);
    p->pidfd = -1;
}

void taas_proc_free(taas_proc *p) {
    if (!p) return;
    taas_proc_kill(p);
    if (p->out_fd >= 0) close(p->out_fd);
    if (p->in_fd >= 0) close(p->in_fd);
    taas_buf_free(&p->partial);
    free(p);
}

static void keep_tail(taas_proc *p, const char *s, size_t n) {
    size_t have = strlen(p->tail), room = sizeof p->tail - 1;
    if (n >= room) {
        memcpy(p->tail, s + n - room, room);
        p->tail[room] = '\0';
        return;
    }
    if (have + n > room) {
        memmove(p->tail, p->tail + (have + n - room), room - n);
        have = room - n;
    }
    memcpy(p->tail + have, s, n);
    p->tail[have + n] = '\0';
}

int taas_proc_read(taas_proc *p, void (*line)(void *ctx, taas_proc *p, const char *text), void *ctx) {
    if (p->out_fd < 0) return 1;
    char buf[4096];
    for (;;) {
        ssize_t n = read(p->out_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 0;  /* EAGAIN: more later */
        if (n == 0) {
            if (p->partial.len && line) line(ctx, p, p->partial.data);
            taas_buf_free(&p->partial);
            close(p->out_fd);
            p->out_fd = -1;
            return 1;
        }
        keep_tail(p, buf, (size_t)n);
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                taas_buf_putc(&p->partial, buf[i]);
                continue;
            }
            if (line) line(ctx, p, p->partial.data ? p->partial.data : "");
            taas_buf_free(&p->partial);
        }
    }
}

void taas_proc_describe(const taas_proc *p, char *out, size_t n) {
    if (WIFSIGNALED(p->status))
        snprintf(out, n, "signal %d (%s)", WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
    else
        snprintf(out, n, "exit status %d", WEXITSTATUS(p->status));
}

int taas_proc_ok(const taas_proc *p) {
    return p->exited && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}
