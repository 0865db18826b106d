/* A tar reader over an archive in memory: v7, ustar, POSIX pax and GNU headers, enough for
 * WebDataset shards (written by Python's tarfile, GNU tar, bsdtar) and the CIFAR-10
 * archive. Only regular files are returned; directories, links and devices are skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "formats.h"
#include "utf8.h"

#define BLOCK 512

void taas_tar_iter_init(taas_tar_iter *it, const unsigned char *data, size_t len, const char *archive) {
    memset(it, 0, sizeof *it);
    it->data = data;
    it->len = len;
    it->archive = archive;
    it->pax_size = -1;
}

void taas_tar_iter_free(taas_tar_iter *it) {
    free(it->name);
    free(it->long_name);
    it->name = it->long_name = NULL;
}

static int corrupt(taas_tar_iter *it, size_t at, const char *what, taas_error *err) {
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "%s: corrupt tar archive at byte %zu: %s", it->archive, at, what);
    taas_error_hint(err, "the shard is damaged or is not a tar file: check it with tar -tvf");
    return -1;
}

/* An octal field (spaces or NULs around the digits), or GNU's base-256 when the top bit of
 * the first byte is set. -1 when it is neither. */
static int64_t number(const unsigned char *f, size_t n) {
    if (f[0] & 0x80) {
        if (f[0] != 0x80) return -1; /* negative, or too big for us */
        uint64_t v = 0;
        for (size_t i = 1; i < n; i++) {
            if (v >> 55) return -1;
            v = v << 8 | f[i];
        }
        return (int64_t)v;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ') i++;
    uint64_t v = 0;
    int digits = 0;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v >> 60) return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0') return -1;
    return digits ? (int64_t)v : 0;
}

static int zero_block(const unsigned char *b) {
    for (int i = 0; i < BLOCK; i++)
        if (b[i]) return 0;
    return 1;
}

/* The checksum counts the chksum field as eight spaces; old tars summed signed chars. */
static int checksum_ok(const unsigned char *b) {
    int64_t want = number(b + 148, 8);
    int64_t su = 0, ss = 0;
    for (int i = 0; i < BLOCK; i++) {
        unsigned char c = (i >= 148 && i < 156) ? ' ' : b[i];
        su += c;
        ss += (signed char)c;
    }
    return want >= 0 && (want == su || want == ss);
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* "len key=value\n" records of a pax header; keeps path and size for the next member. */
static int pax_records(taas_tar_iter *it, const unsigned char *p, size_t n, size_t at, taas_error *err) {
    size_t i = 0;
    while (i < n) {
        if (p[i] == '\0') break; /* padding some writers leave */
        size_t len = 0, j = i;
        while (j < n && p[j] >= '0' && p[j] <= '9' && len < ((size_t)1 << 40)) len = len * 10 + (size_t)(p[j++] - '0');
        if (j == i || j >= n || p[j] != ' ' || len <= j - i + 1 || len > n - i || p[i + len - 1] != '\n')
            return corrupt(it, at, "a pax extended header record is malformed", err);
        const unsigned char *kv = p + j + 1, *end = p + i + len - 1;
        const unsigned char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq) return corrupt(it, at, "a pax extended header record has no '='", err);
        size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            free(it->long_name);
            it->long_name = dup_n((const char *)eq + 1, vlen);
            if (!it->long_name) return taas_fmt_oom(err, "a tar member name");
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            int64_t v = 0;
            for (size_t k = 0; k < vlen; k++) {
                if (eq[1 + k] < '0' || eq[1 + k] > '9' || v > ((int64_t)1 << 56))
                    return corrupt(it, at, "a pax size record is not a number", err);
                v = v * 10 + (eq[1 + k] - '0');
            }
            it->pax_size = v;
        }
        i += len;
    }
    return 0;
}

int taas_tar_next(taas_tar_iter *it, taas_tar_member *m, taas_error *err) {
    for (;;) {
        if (it->pos >= it->len) return 0; /* no end blocks: accepted, as GNU tar does */
        size_t at = it->pos;
        if (it->len - at < BLOCK) return corrupt(it, at, "the archive ends inside a header (truncated)", err);
        const unsigned char *b = it->data + at;
        if (zero_block(b)) return 0;
        if (!checksum_ok(b))
            return corrupt(it, at, "header checksum mismatch (not a tar header, or a damaged one)", err);
        int64_t size = number(b + 124, 12);
        if (size < 0) return corrupt(it, at, "the member size field is not a number", err);
        char type = (char)b[156];
        if (it->pax_size >= 0 && type != 'x' && type != 'g' && type != 'L' && type != 'K') size = it->pax_size;
        size_t data = at + BLOCK;
        if ((uint64_t)size > it->len - data) {
            char what[200];
            snprintf(what, sizeof what,
                     "a member needs %lld bytes but only %zu remain (truncated archive)", (long long)size,
                     it->len - data);
            return corrupt(it, at, what, err);
        }
        size_t padded = ((size_t)size + BLOCK - 1) / BLOCK * BLOCK;
        it->pos = padded > it->len - data ? it->len : data + padded;
        switch (type) {
        case 'x':
            if (pax_records(it, it->data + data, (size_t)size, at, err) != 0) return -1;
            continue;
        case 'L':
            free(it->long_name);
            it->long_name = dup_n((const char *)it->data + data, strnlen((const char *)it->data + data, (size_t)size));
            if (!it->long_name) return taas_fmt_oom(err, "a tar member name");
            continue;
        case 'g': /* global pax header */
        case 'K': /* GNU long link name */
            continue;
        case '0':
        case '\0':
        case '7':
            break;
        default: /* directories, links, devices, FIFOs: no file data for a dataset */
            free(it->long_name);
            it->long_name = NULL;
            it->pax_size = -1;
            continue;
        }
        free(it->name);
        if (it->long_name) {
            it->name = it->long_name;
            it->long_name = NULL;
        } else {
            size_t nl = strnlen((const char *)b, 100);
            /* POSIX ustar keeps the leading directories in prefix; GNU's "ustar  " uses that
             * space for other fields */
            int ustar = memcmp(b + 257, "ustar\0", 6) == 0;
            size_t pl = ustar ? strnlen((const char *)b + 345, 155) : 0;
            it->name = malloc(pl + nl + 2);
            if (!it->name) return taas_fmt_oom(err, "a tar member name");
            size_t k = 0;
            if (pl) {
                memcpy(it->name, b + 345, pl);
                k = pl;
                it->name[k++] = '/';
            }
            memcpy(it->name + k, b, nl);
            it->name[k + nl] = '\0';
        }
        it->pax_size = -1;
        if (!taas_utf8_valid(it->name, strlen(it->name))) {
            char *clean = taas_utf8_sanitize(it->name, strlen(it->name), NULL);
            if (!clean) return taas_fmt_oom(err, "a tar member name");
            free(it->name);
            it->name = clean;
        }
        m->name = it->name;
        m->offset = data;
        m->size = (uint64_t)size;
        return 1;
    }
}
