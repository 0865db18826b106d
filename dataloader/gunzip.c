/* gzip in memory through zlib. A stream that stops before its end marker is reported as
 * truncated (an interrupted download), not as a generic failure. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "errnames.h"
#include "formats.h"

int taas_is_gzip(const unsigned char *p, size_t n) {
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

static int truncated(const char *name, size_t got, taas_error *err) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                   "%s: truncated gzip: the compressed data ends before the end of the stream (%zu bytes "
                   "decompressed so far)",
                   name, got);
    taas_error_hint(err, "the file was cut short, probably by an interrupted download: fetch it again");
    return -1;
}

size_t taas_gunzip_head(const unsigned char *src, size_t n, unsigned char *head, size_t n_head) {
    if (!taas_is_gzip(src, n)) return 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return 0;
    zs.next_in = (unsigned char *)src;
    zs.avail_in = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
    zs.next_out = head;
    zs.avail_out = (uInt)n_head;
    int zr = Z_OK;
    for (int k = 0; k < 64 && zs.avail_out > 0 && zr == Z_OK; k++) zr = inflate(&zs, Z_NO_FLUSH);
    size_t got = n_head - zs.avail_out;
    inflateEnd(&zs);
    return got;
}

static int bomb(const char *name, size_t max_out, taas_error *err) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                   "%s: the gzip stream inflates to more than %zu bytes, more than its contents can hold "
                   "(a gzip bomb, or not the file it claims to be); nothing more was inflated",
                   name, max_out);
    taas_error_hint(err, "the file is damaged or hostile: fetch it again from where it came from");
    return -1;
}

int taas_gunzip(const unsigned char *src, size_t n, const char *name, size_t max_out, unsigned char **out,
                size_t *out_len, taas_error *err) {
    *out = NULL;
    *out_len = 0;
    if (!taas_is_gzip(src, n)) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: not a gzip file (it does not start with 1f 8b)", name);
        taas_error_hint(err, "give the uncompressed file a name without .gz, or compress it with gzip");
        return -1;
    }
    /* the last member's trailer holds its size mod 2^32: a good first guess, but only a
     * guess — four bytes of a hostile file must not allocate 4 GB up front. deflate gives
     * at most 1032 bytes per byte of input, so a true trailer is never above that. */
    size_t cap = 1 << 16;
    if (n >= 18) {
        const unsigned char *t = src + n - 4;
        size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
        size_t most = n <= SIZE_MAX / 1032 ? n * 1032 : SIZE_MAX;
        if (isize > cap && isize < ((size_t)1 << 32) && isize <= most) cap = isize + 1;
    }
    /* one byte past the limit tells a stream that goes on from one that ends there */
    size_t limit = max_out < SIZE_MAX ? max_out + 1 : SIZE_MAX;
    if (cap > limit) cap = limit;
    unsigned char *buf = malloc(cap);
    if (!buf) return taas_fmt_oom(err, "a gzip buffer");
    size_t len = 0, pos = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 16) != Z_OK) {
        free(buf);
        return taas_fmt_oom(err, "a zlib stream");
    }
    int rc = -1;
    for (;;) {
        /* one gzip member; files may hold several back to back (gzip's multi-member format) */
        int zr;
        do {
            if (len == limit) {
                bomb(name, max_out, err);
                goto done;
            }
            if (len == cap) {
                size_t ncap = cap * 2 > limit || cap * 2 < cap ? limit : cap * 2;
                unsigned char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
                if (!nb) {
                    taas_fmt_oom(err, "gzip output");
                    goto done;
                }
                buf = nb;
                cap = ncap;
            }
            size_t in_left = n - pos, out_left = cap - len;
            zs.next_in = (unsigned char *)src + pos;
            zs.avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
            zs.next_out = buf + len;
            zs.avail_out = out_left > UINT32_MAX ? UINT32_MAX : (uInt)out_left;
            uInt ai = zs.avail_in, ao = zs.avail_out;
            zr = inflate(&zs, Z_NO_FLUSH);
            pos += ai - zs.avail_in;
            len += ao - zs.avail_out;
            if (zr == Z_BUF_ERROR && pos == n) {
                truncated(name, len, err);
                goto done;
            }
            if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR) {
                taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: corrupt gzip at compressed byte %zu: %s", name, pos,
                               zs.msg ? zs.msg : "invalid data");
                taas_error_hint(err, "the file is damaged: fetch it again, or check it with gzip -t");
                goto done;
            }
            if (zr == Z_MEM_ERROR) {
                taas_fmt_oom(err, "zlib's state");
                goto done;
            }
            if (zr == Z_OK && pos == n && zs.avail_out > 0) {
                truncated(name, len, err);
                goto done;
            }
        } while (zr != Z_STREAM_END);
        /* another member follows, or trailing padding (ignored, as gzip does) */
        if (!taas_is_gzip(src + pos, n - pos)) break;
        inflateReset(&zs);
    }
    if (len > max_out) {
        bomb(name, max_out, err);
        goto done;
    }
    rc = 0;
done:
    inflateEnd(&zs);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    if (len == 0) { /* keep *out non-NULL for an empty file */
        *out = buf;
    } else {
        unsigned char *shrunk = len < cap ? realloc(buf, len) : buf;
        *out = shrunk ? shrunk : buf;
    }
    *out_len = len;
    return 0;
}
