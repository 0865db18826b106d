/* The local cache of fetched objects. One file per URL, named by a hash of it; the file
 * starts with the URL and the validator (ETag) it was fetched under, so a hash collision or
 * a changed object is never taken for a hit. Least recently used files go first when the
 * folder grows past the limit (use = the file's mtime, set on store, hit and range read).
 * Files are written under a temporary name and renamed, so processes sharing the folder
 * (loaders on one machine) never read a half-written object; if two evict at once, unlink
 * of a file already gone is harmless. Range reads come from a copy only when this fetcher
 * stored or validated it (the marks below), so they need no request at all. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errnames.h"
#include "fetch_priv.h"
#include "utf8.h"

#define MAGIC "TAASOBJ1"
#define HEADER_LEN 24 /* magic, u32 key length, u32 validator length, u64 size */
#define KEY_MAX 65536
#define STALE_TMP_S 3600
#define MARK_BUCKETS 1024

struct fetch_mark {
    struct fetch_mark *next;
    uint64_t size;
    char validator[128];
    char key[];
};

static uint64_t fnv1a(const char *key) {
    uint64_t a = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) a = (a ^ *p) * 0x100000001b3ull;
    return a;
}

static void hash_name(const char *key, char out[40]) {
    /* Two 64-bit FNV-1a hashes: a file name, not a security boundary (the key inside the
     * file is compared). */
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        a = (a ^ *p) * 0x100000001b3ull;
        b = (b ^ *p) * 0x100000001b3ull;
        b ^= b >> 29;
    }
    snprintf(out, 40, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

static char *entry_path(taas_fetcher *f, const char *key) {
    char h[40];
    hash_name(key, h);
    char *p = NULL;
    if (asprintf(&p, "%s/%s.obj", f->cache_dir, h) < 0) return NULL;
    return p;
}

static int read_full(int fd, void *dst, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = read(fd, (char *)dst + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

static int write_full(int fd, const void *src, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(fd, (const char *)src + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

/* Reads the header of an open entry; 0 when it is key's, with its validator and size. */
static int read_header(int fd, const char *key, char *validator, size_t cap, uint64_t *size,
                       uint64_t *data_off) {
    unsigned char h[HEADER_LEN];
    if (read_full(fd, h, sizeof h) || memcmp(h, MAGIC, 8)) return -1;
    uint32_t kn, vn;
    uint64_t sz;
    memcpy(&kn, h + 8, 4);
    memcpy(&vn, h + 12, 4);
    memcpy(&sz, h + 16, 8);
    if (kn != strlen(key) || kn > KEY_MAX || vn >= cap) return -1;
    char *k = malloc(kn + 1);
    if (!k) return -1;
    int ok = read_full(fd, k, kn) == 0 && memcmp(k, key, kn) == 0 &&
             read_full(fd, validator, vn) == 0;
    free(k);
    if (!ok) return -1;
    validator[vn] = '\0';
    *size = sz;
    *data_off = HEADER_LEN + (uint64_t)kn + vn;
    return 0;
}

/* mtime = now, from the precise clock: the kernel's file times tick coarsely (jiffies), which
 * would make objects used a few ms apart look equally old. */
static void touch(int fd) {
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[1] = ts[0];
    futimens(fd, ts);
}

int fetch_cache_open(taas_fetcher *f, taas_error *err) {
    char *dir = f->cache_dir;
    int e = 0;
    for (char *p = dir + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0700) < 0 && errno != EEXIST) e = errno;
            *p = c;
            if (e || c == '\0') break;
        }
    }
    struct stat st;
    if (!e && stat(dir, &st) < 0) e = errno;
    if (!e && !S_ISDIR(st.st_mode)) e = ENOTDIR;
    if (!e && access(dir, W_OK | X_OK) < 0) e = errno;
    if (!e) return 0;
    char q[400];
    taas_error_set(err, TAAS_ERR_IO, (taas_srcpos){0, 0}, "cannot use the cache folder %s: %s",
                   taas_utf8_clip(q, sizeof q, dir, strlen(dir), 300), strerror(e));
    taas_error_hint(err, "set TAAS_CACHE_DIR to a folder this user can write, or to an empty "
                         "value to turn the cache off");
    return -1;
}

int fetch_cache_peek(taas_fetcher *f, const char *key, char *validator, size_t cap,
                     uint64_t *size) {
    char *path = entry_path(f, key);
    if (!path) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) return 0;
    uint64_t off;
    int rc = read_header(fd, key, validator, cap, size, &off) == 0;
    close(fd);
    return rc;
}

int fetch_cache_read(taas_fetcher *f, const char *key, const char *validator, uint64_t size,
                     taas_blob *out, taas_error *err) {
    char *path = entry_path(f, key);
    if (!path) return 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(path);
        return 1;
    }
    char v[128];
    uint64_t sz, off;
    struct stat st;
    int rc = 1;
    if (read_header(fd, key, v, sizeof v, &sz, &off) || strcmp(v, validator) || sz != size ||
        fstat(fd, &st) || (uint64_t)st.st_size != off + sz || sz > SIZE_MAX / 2) {
        unlink(path);
        goto done;
    }
    out->data = malloc(sz ? (size_t)sz : 1);
    if (!out->data) {
        char q[400];
        taas_error_set(err, TAAS_ERR_MEMORY, (taas_srcpos){0, 0},
                       "out of memory reading the cached copy of %s",
                       taas_utf8_clip(q, sizeof q, key, strlen(key), 300));
        taas_error_hint(err, "use smaller files or fewer decode threads");
        rc = -1;
        goto done;
    }
    if (read_full(fd, out->data, (size_t)sz)) {
        taas_blob_free(out);
        unlink(path);
        goto done;
    }
    out->len = (size_t)sz;
    touch(fd); /* used now: last to be evicted */
    rc = 0;
done:
    close(fd);
    free(path);
    return rc;
}

void fetch_cache_remove(taas_fetcher *f, const char *key) {
    char *path = entry_path(f, key);
    if (path) unlink(path);
    free(path);
}

typedef struct entry {
    char name[64];
    uint64_t size;
    struct timespec mtime;
} entry;

static int older(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Removes least recently used entries (never `keep`) until the folder fits the limit. */
static void evict(taas_fetcher *f, const char *keep) {
    pthread_mutex_lock(&f->cache_lock);
    int dfd = open(f->cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0) close(dfd);
        pthread_mutex_unlock(&f->cache_lock);
        return;
    }
    entry *es = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        int obj = len > 4 && len < sizeof es->name && !strcmp(de->d_name + len - 4, ".obj");
        int tmp = strstr(de->d_name, ".tmp.") != NULL;
        if (!obj && !tmp) continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) continue;
        if (tmp) {
            /* left behind by a process that died while writing */
            if (now - st.st_mtim.tv_sec > STALE_TMP_S) unlinkat(dfd, de->d_name, 0);
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            entry *p = realloc(es, nc * sizeof *p);
            if (!p) break;
            es = p;
            cap = nc;
        }
        memcpy(es[n].name, de->d_name, len + 1); /* len < sizeof name, checked above */
        es[n].size = (uint64_t)st.st_size;
        es[n].mtime = st.st_mtim;
        total += (uint64_t)st.st_size;
        n++;
    }
    if (total > f->o.cache_limit && n > 0) {
        qsort(es, n, sizeof *es, older);
        for (size_t i = 0; i < n && total > f->o.cache_limit; i++) {
            if (keep && !strcmp(es[i].name, keep)) continue;
            if (unlinkat(dfd, es[i].name, 0) == 0 || errno == ENOENT) total -= es[i].size;
        }
    }
    free(es);
    closedir(d);
    pthread_mutex_unlock(&f->cache_lock);
}

static void warn_once(taas_fetcher *f, const char *what, int e) {
    if (atomic_exchange(&f->cache_warned, 1)) return;
    fprintf(stderr, "taas: the fetch cache in %s is not used: %s: %s (set TAAS_CACHE_DIR to a "
                    "writable folder with room, or to an empty value to turn it off)\n",
            f->cache_dir, what, strerror(e));
}

int fetch_cache_store(taas_fetcher *f, const char *key, const char *validator,
                      const unsigned char *data, size_t len) {
    size_t kn = strlen(key), vn = strlen(validator);
    if (kn > KEY_MAX || vn >= 128) return 0;
    uint64_t need = HEADER_LEN + (uint64_t)kn + vn + len;
    if (need > f->o.cache_limit) return 0; /* would evict everything else and still not fit */
    char *path = entry_path(f, key), *tmp = NULL;
    int stored = 0;
    if (!path) return 0;
    static const char *const suffix = ".obj";
    uint64_t r = atomic_fetch_add(&f->rng, 1);
    if (asprintf(&tmp, "%.*s.tmp.%ld.%llx", (int)(strlen(path) - strlen(suffix)), path,
                 (long)getpid(), (unsigned long long)r) < 0) {
        free(path);
        return 0;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        warn_once(f, "cannot create a file", errno);
        goto done;
    }
    unsigned char h[HEADER_LEN];
    uint32_t k32 = (uint32_t)kn, v32 = (uint32_t)vn;
    uint64_t sz = len;
    memcpy(h, MAGIC, 8);
    memcpy(h + 8, &k32, 4);
    memcpy(h + 12, &v32, 4);
    memcpy(h + 16, &sz, 8);
    int ok = write_full(fd, h, sizeof h) == 0 && write_full(fd, key, kn) == 0 &&
             write_full(fd, validator, vn) == 0 && write_full(fd, data, len) == 0;
    int e = errno;
    if (ok) touch(fd);
    if (close(fd) < 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok || rename(tmp, path) < 0) {
        if (ok) e = errno;
        unlink(tmp);
        warn_once(f, "cannot write a file", e);
        goto done;
    }
    evict(f, strrchr(path, '/') + 1);
    stored = 1;
done:
    free(tmp);
    free(path);
    return stored;
}

/* ---- range reads of objects known to be current ---- */

void fetch_cache_mark(taas_fetcher *f, const char *key, const char *validator, uint64_t size) {
    size_t kn = strlen(key);
    pthread_mutex_lock(&f->marks_lock);
    if (!f->marks) f->marks = calloc(MARK_BUCKETS, sizeof *f->marks);
    if (!f->marks) goto done;
    struct fetch_mark **b = &f->marks[fnv1a(key) % MARK_BUCKETS], *m;
    for (m = *b; m; m = m->next)
        if (!strcmp(m->key, key)) break;
    if (!m) {
        m = calloc(1, sizeof *m + kn + 1);
        if (!m) goto done;
        memcpy(m->key, key, kn + 1);
        m->next = *b;
        *b = m;
    }
    m->size = size;
    snprintf(m->validator, sizeof m->validator, "%s", validator);
done:
    pthread_mutex_unlock(&f->marks_lock);
}

int fetch_cache_range(taas_fetcher *f, const char *key, uint64_t off, size_t len, void *dst) {
    char want[128] = "";
    uint64_t size = 0;
    pthread_mutex_lock(&f->marks_lock);
    struct fetch_mark *m = f->marks ? f->marks[fnv1a(key) % MARK_BUCKETS] : NULL;
    for (; m; m = m->next)
        if (!strcmp(m->key, key)) {
            snprintf(want, sizeof want, "%s", m->validator);
            size = m->size;
            break;
        }
    pthread_mutex_unlock(&f->marks_lock);
    if (!m || off > size || len > size - off) return 1;
    char *path = entry_path(f, key);
    if (!path) return 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) return 1; /* evicted since: the server has it */
    char v[128];
    uint64_t sz, data_off;
    int rc = 1;
    if (read_header(fd, key, v, sizeof v, &sz, &data_off) == 0 && !strcmp(v, want) && sz == size) {
        size_t done = 0;
        while (done < len) {
            ssize_t k = pread(fd, (char *)dst + done, len - done, (off_t)(data_off + off + done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            done += (size_t)k;
        }
        if (done == len) {
            rc = 0;
            touch(fd);
        }
    }
    close(fd);
    return rc;
}

void fetch_cache_close(taas_fetcher *f) {
    if (!f->marks) return;
    for (int i = 0; i < MARK_BUCKETS; i++)
        for (struct fetch_mark *m = f->marks[i], *next; m; m = next) {
            next = m->next;
            free(m);
        }
    free(f->marks);
    f->marks = NULL;
}
