/* Whole writes to file descriptors: write(2) may take part of a buffer, or be interrupted. */
#ifndef TAAS_FDIO_H
#define TAAS_FDIO_H

#include <stddef.h>

/* Writes all n bytes of p to fd, again after EINTR and short writes. 0, or -1 with errno. */
int taas_write_all(int fd, const void *p, size_t n);

/* Replaces the file at path with n bytes of p, all or nothing, across a crash too: written
 * to path.part (mode 0600), fsync'ed, renamed over path, and the folder fsync'ed. 0, or -1
 * with errno (path untouched, no .part left). */
int taas_write_file_atomic(const char *path, const void *p, size_t n);

#endif
