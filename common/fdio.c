#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
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
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s", path);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = '\0';
            int dfd = open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                fsync(dfd);
                close(dfd);
            }
            return 0;
        }
    }
    int e = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    errno = e;
    return -1;
}
