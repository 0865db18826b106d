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

/* Copies the regular file src to dst, all or nothing: into a new temporary file beside dst
 * (never one that exists), fsync'ed and renamed over dst, which gets the mode a new file
 * gets (0666 less the umask). Reads src whole before dst changes, so src == dst is safe.
 * 0, or -1 with errno (EINVAL: src is not a regular file); dst untouched on failure. */
int taas_copy_file_atomic(const char *src, const char *dst);

/* The regular file open at fd, read whole into a NUL-terminated buffer (free it), in as few
 * reads as the file allows (jansson's json_loadfd reads a byte a read()). NULL with errno:
 * EFBIG when it is longer than max bytes or grows while it is read, EINVAL when fd is not a
 * regular file, ENOMEM. *len gets its length. */
char *taas_read_capped(int fd, size_t max, size_t *len);

#endif
