/* What the harnesses share: a private temporary folder per process (for the readers that
 * only take a path or URL), writing an input there, and splitting an input into parts.
 * Header-only (static functions): each harness is one program. */
#ifndef TAAS_FUZZ_UTIL_H
#define TAAS_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdarg.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fz_dir[512];

static inline int fz_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void fz_rmtree(void) {
    if (fz_dir[0]) nftw(fz_dir, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    fz_dir[0] = '\0';
}

/* A folder of this process's own under $TMPDIR (the fuzz tests point TMPDIR at a folder
 * they remove, so a crashed run leaves nothing behind either), removed at a clean exit. */
static inline const char *fz_tmpdir(void) {
    if (fz_dir[0]) return fz_dir;
    const char *t = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%s/taas-fuzz-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(fz_dir)) {
        perror("mkdtemp");
        abort();
    }
    atexit(fz_rmtree);
    return fz_dir;
}

/* fz_tmpdir()/rel, in a ring of buffers so that a few can be used at once. */
static inline const char *fz_path(const char *rel) {
    static char ring[8][640];
    static int k;
    char *p = ring[k++ % 8];
    snprintf(p, sizeof ring[0], "%s/%s", fz_tmpdir(), rel);
    return p;
}

/* Writes data to fz_path(rel), making its folder; returns the path. */
static inline const char *fz_write(const char *rel, const void *data, size_t n) {
    const char *p = fz_path(rel);
    char dir[640];
    snprintf(dir, sizeof dir, "%s", p);
    for (char *s = dir + strlen(fz_tmpdir()) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(dir, 0700);
            *s = '/';
        }
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(p);
        abort();
    }
    const uint8_t *b = data;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w <= 0) {
            perror(p);
            abort();
        }
        b += w;
        n -= (size_t)w;
    }
    close(fd);
    return p;
}

/* Splits data at each occurrence of the separator byte: up to max parts into part/len;
 * returns how many there are (the last takes the rest). A separator rather than lengths
 * keeps the parts where mutations leave them. */
static inline size_t fz_split(const uint8_t *data, size_t size, uint8_t sep, const uint8_t **part, size_t *len,
                       size_t max) {
    size_t n = 0, start = 0;
    if (max == 0) return 0;
    for (size_t i = 0; i < size && n + 1 < max; i++)
        if (data[i] == sep) {
            part[n] = data + start;
            len[n++] = i - start;
            start = i + 1;
        }
    part[n] = data + start;
    len[n++] = size - start;
    return n;
}

/* Reads n bytes at p where the optimiser cannot drop the reads: ASan then checks that a
 * buffer is as long as what it claims to hold. */
static volatile unsigned fz_sink;
static inline void fz_touch(const void *p, size_t n) {
    const unsigned char *b = p;
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) sum += b[i];
    fz_sink += sum;
}

/* With TAAS_FUZZ_VERBOSE set, says on stderr what became of an input (opened, refused and
 * why): to see how far the seeds get. Silent otherwise, so that fuzzing stays fast. */
__attribute__((format(printf, 1, 2))) static inline void fz_say(const char *fmt, ...) {
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("TAAS_FUZZ_VERBOSE") != NULL;
    if (!verbose) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* A NUL-terminated copy (malloc'd) of data: the parsers that take C strings. */
static inline char *fz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
