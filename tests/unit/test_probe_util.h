/* Helpers for the probe and show tests: this build's taas-worker (next to taas-kernel in
 * the build tree, or $TAAS_WORKER), run as a process with its stdout and stderr captured,
 * .npy files written the way numpy.save writes them, and a scratch folder. */
#ifndef TAAS_TEST_PROBE_UTIL_H
#define TAAS_TEST_PROBE_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The build's taas-worker: $TAAS_WORKER, else <build>/kernel/taas-worker seen from
 * <build>/tests/<this test>. Also exported as TAAS_WORKER for the kernel-side code. */
static inline const char *pu_worker(void) {
    static char path[PATH_MAX];
    if (path[0]) return path;
    const char *env = getenv("TAAS_WORKER");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
        return path;
    }
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(path, sizeof path, "%s/../kernel/taas-worker", self);
    setenv("TAAS_WORKER", path, 1);
    return path;
}

typedef struct pu_run {
    int status;      /* exit status, or 128 + signal */
    char *out;       /* stdout, NUL-terminated (may hold binary data before the NUL) */
    size_t out_len;
    char *err;       /* stderr */
} pu_run;

static inline char *pu_slurp(int fd, size_t *len) {
    struct stat st;
    fstat(fd, &st);
    char *s = malloc((size_t)st.st_size + 1);
    ssize_t r = pread(fd, s, (size_t)st.st_size, 0);
    s[r > 0 ? r : 0] = '\0';
    if (len) *len = r > 0 ? (size_t)r : 0;
    return s;
}

static inline int pu_tmpfile(void) {
    char name[] = "/tmp/taas-probe-test-XXXXXX";
    int fd = mkstemp(name);
    unlink(name);
    return fd;
}

/* Runs taas-worker with args (NULL-terminated, the role first) and input on stdin. */
static inline pu_run pu_worker_run(const char *const *args, const char *input) {
    pu_run r;
    memset(&r, 0, sizeof r);
    int in = pu_tmpfile(), out = pu_tmpfile(), err = pu_tmpfile();
    if (input && write(in, input, strlen(input)) < 0) abort();
    lseek(in, 0, SEEK_SET);
    const char *argv[32];
    size_t n = 0;
    argv[n++] = pu_worker();
    for (size_t i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, err, 2);
    pid_t pid;
    if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) != 0) {
        fprintf(stderr, "cannot run %s: build taas-worker first\n", argv[0]);
        abort();
    }
    posix_spawn_file_actions_destroy(&fa);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = pu_slurp(out, &r.out_len);
    r.err = pu_slurp(err, NULL);
    close(in);
    close(out);
    close(err);
    return r;
}

static inline void pu_run_free(pu_run *r) {
    free(r->out);
    free(r->err);
}

/* numpy.save's format 1.0: magic, version, header length, a dict padded to 64 bytes. */
static inline void pu_write_npy(const char *path, const char *descr, const uint64_t *shape, int ndim,
                                const void *data, size_t nbytes) {
    char dict[256], sh[128] = "";
    size_t k = 0;
    for (int i = 0; i < ndim; i++)
        k += (size_t)snprintf(sh + k, sizeof sh - k, "%llu%s", (unsigned long long)shape[i],
                              ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh);
    size_t total = 10 + (size_t)dl + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    unsigned short hl = (unsigned short)(dl + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xFF, f);
    fputc(hl >> 8, f);
    fwrite(dict, 1, (size_t)dl, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
}

/* n grey h x w uint8 images (pixel = sample index * 10 + position) and labels i % 3. */
static inline void pu_write_npy_pair(const char *dir, const char *stem, uint64_t n, uint64_t h, uint64_t w) {
    char ip[PATH_MAX], lp[PATH_MAX];
    snprintf(ip, sizeof ip, "%s/%s-images.npy", dir, stem);
    snprintf(lp, sizeof lp, "%s/%s-labels.npy", dir, stem);
    unsigned char *img = malloc(n * h * w);
    int64_t *lab = malloc(n * sizeof *lab);
    for (uint64_t i = 0; i < n * h * w; i++) img[i] = (unsigned char)((i / (h * w)) * 10 + i % (h * w));
    for (uint64_t i = 0; i < n; i++) lab[i] = (int64_t)(i % 3);
    uint64_t ish[3] = {n, h, w}, lsh[1] = {n};
    pu_write_npy(ip, "|u1", ish, 3, img, n * h * w);
    pu_write_npy(lp, "<i8", lsh, 1, lab, n * sizeof *lab);
    free(img);
    free(lab);
}

/* A fresh scratch folder (mkdtemp); pu_rmdir removes it and what is in it. */
static inline char *pu_mkdtemp(void) {
    char *d = strdup("/tmp/taas-probe-test-XXXXXX");
    if (!mkdtemp(d)) abort();
    return d;
}

static inline void pu_rmdir(char *d) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", d);
    free(d);
}

#endif
