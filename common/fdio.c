#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int taas_write_all(int fd, const void *p, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}

static void fsync_folder_of(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    int dfd = open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int taas_write_file_atomic(const char *path, const void *p, size_t n) {
    char tmp[PATH_MAX + 8];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.part", path) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && taas_write_all(fd, p, n) == 0 && fsync(fd) == 0) {
        int rc = close(fd);
        fd = -1;
        if (rc == 0 && rename(tmp, path) == 0) {
            fsync_folder_of(path);
            return 0;
        }
    }
    int e = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    errno = e;
    return -1;
}

int taas_copy_file_atomic(const char *src, const char *dst) {
    char tmp[PATH_MAX + 16];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.part-XXXXXX", dst) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* non-blocking: a FIFO in src's place must not hold the caller */
    int in = open(src, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (in < 0) return -1;
    int bad = fstat(in, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (bad) {
        close(in);
        errno = bad;
        return -1;
    }
    int out = mkostemp(tmp, O_CLOEXEC);
    if (out < 0) {
        int e = errno;
        close(in);
        errno = e;
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    int rc = fchmod(out, 0666 & ~mask);
    char buf[1 << 16];
    for (int done = 0; rc == 0 && !done;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) rc = -1;
        else if (n == 0) done = 1;
        else rc = taas_write_all(out, buf, (size_t)n);
    }
    if (rc == 0) rc = fsync(out);
    int e = errno;
    close(in);
    if (close(out) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && rename(tmp, dst) == 0) {
        fsync_folder_of(dst);
        return 0;
    }
    if (rc == 0) e = errno;
    unlink(tmp);
    errno = e;
    return -1;
}

char *taas_read_capped(int fd, size_t max, size_t *len) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        return NULL;
    }
    if (st.st_size < 0 || (unsigned long long)st.st_size > max) {
        errno = EFBIG;
        return NULL;
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *text = malloc(size + 2);
    if (!text) {
        errno = ENOMEM;
        return NULL;
    }
    /* one byte past the size: a file that grows while it is read is not read whole */
    while (got < size + 1) {
        ssize_t r = read(fd, text + got, size + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(text);
            errno = e;
            return NULL;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (got > size) {
        free(text);
        errno = EFBIG;
        return NULL;
    }
    text[got] = '\0';
    *len = got;
    return text;
}
