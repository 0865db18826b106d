/* ImageFolder: one folder per class under root, as torchvision.datasets.ImageFolder lists
 * it (0.14's find_classes and make_dataset): the class folders are root's folders in sorted
 * order (symlinks followed); each is walked recursively following symlinks, the folders
 * taken in sorted order of their paths and the files of each in sorted order of their
 * names; a file is an image when its name ends with one of torchvision's extensions,
 * whatever their case. The loaders decode JPEG and PNG (told apart by their first bytes,
 * as PIL does) and convert to RGB as torchvision's pil_loader does; a file with another
 * extension torchvision accepts (.webp, .bmp, ...) is refused at open, by name. Paths are
 * read on the loader's host, so errors name the host as well. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "errnames.h"
#include "formats.h"

/* torchvision's IMG_EXTENSIONS; the first three are decoded, the others refused by name. */
static const char *const IMG_EXT[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
#define N_DECODED 3
#define N_IMG_EXT (sizeof IMG_EXT / sizeof IMG_EXT[0])
#define MAX_DEPTH 256 /* folders below a class folder: deeper is a loop or a mistake */

typedef struct if_ds {
    taas_fetcher *f;
    taas_buf paths;      /* NUL-separated full paths of the images */
    size_t *off;         /* each sample's path in paths */
    int64_t *label;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    char host[256];
} if_ds;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* bytes [a, a+an) against [b, b+bn), as strcmp orders the strings */
static int cmp_span(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

/* The order of a class's images, local paths and S3 keys alike: make_dataset's
 * sorted(os.walk(class folder)) puts folders in sorted order of their paths and each
 * folder's files in sorted order of their names; so the first component (the class, for a
 * key), then the folder, then the name, each compared as strcmp does. */
static int cmp_sample(const void *pa, const void *pb) {
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    const char *a1 = strchr(a, '/'), *b1 = strchr(b, '/');
    size_t ac = a1 ? (size_t)(a1 - a) : strlen(a), bc = b1 ? (size_t)(b1 - b) : strlen(b);
    int c = cmp_span(a, ac, b, bc);
    if (c) return c;
    const char *as = strrchr(a, '/'), *bs = strrchr(b, '/');
    size_t ad = as ? (size_t)(as - a) : 0, bd = bs ? (size_t)(bs - b) : 0;
    c = cmp_span(a, ad, b, bd);
    return c ? c : strcmp(as ? as + 1 : a, bs ? bs + 1 : b);
}

/* -1 when name has none of torchvision's extensions, else its index in IMG_EXT. */
static int image_ext(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < N_IMG_EXT; i++) {
        size_t k = strlen(IMG_EXT[i]);
        if (n >= k && strcasecmp(name + n - k, IMG_EXT[i]) == 0) return (int)i;
    }
    return -1;
}

static int io_error(if_ds *ds, const char *path, const char *what, taas_error *err) {
    taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "ImageFolder: %s %s on %s: %s", what, path, ds->host, strerror(errno));
    taas_error_hint(err, "ImageFolder's root is read on each loader's host: the folder must be there and readable");
    return -1;
}

/* The entries of dir (not . and ..), sorted, split into folders (symlinks followed, as
 * os.scandir's is_dir) and the rest. */
static int list_dir(if_ds *ds, const char *dir, taas_strvec *dirs, taas_strvec *files, taas_error *err) {
    DIR *d = opendir(dir);
    if (!d) return io_error(ds, dir, "cannot list", err);
    struct dirent *e;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *full = taas_fmt_join(dir, e->d_name);
        struct stat st;
        int isdir = full && stat(full, &st) == 0 && S_ISDIR(st.st_mode);
        free(full);
        taas_strvec *to = isdir ? dirs : files;
        if (to && taas_strvec_push(to, strdup(e->d_name)) != 0) rc = taas_fmt_oom(err, "a folder listing");
        errno = 0;
    }
    if (rc == 0 && errno) rc = io_error(ds, dir, "cannot list", err);
    closedir(d);
    if (dirs && dirs->n) qsort(dirs->v, dirs->n, sizeof *dirs->v, cmp_str); /* v is NULL when empty */
    if (files && files->n) qsort(files->v, files->n, sizeof *files->v, cmp_str);
    return rc;
}

typedef struct ancestor {
    dev_t dev;
    ino_t ino;
} ancestor;

/* Every folder under dir (dir included), depth first, into out: os.walk's roots. */
static int walk(if_ds *ds, const char *dir, ancestor *up, int depth, taas_strvec *out, taas_error *err) {
    struct stat st;
    if (stat(dir, &st) != 0) return io_error(ds, dir, "cannot read", err);
    for (int i = 0; i < depth; i++)
        if (up[i].dev == st.st_dev && up[i].ino == st.st_ino) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                           "ImageFolder: %s on %s is a symbolic link to a folder above it: walking it would "
                           "never end", dir, ds->host);
            taas_error_hint(err, "remove the link, or make it point outside the class folder");
            return -1;
        }
    if (depth == MAX_DEPTH) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "ImageFolder: %s on %s is more than %d folders deep", dir,
                       ds->host, MAX_DEPTH);
        taas_error_hint(err, "keep the images at most %d folders below their class folder", MAX_DEPTH);
        return -1;
    }
    up[depth].dev = st.st_dev;
    up[depth].ino = st.st_ino;
    char *self = strdup(dir);
    if (taas_strvec_push(out, self) != 0) return taas_fmt_oom(err, "a folder listing");
    taas_strvec sub = {0};
    int rc = list_dir(ds, dir, &sub, NULL, err);
    for (size_t i = 0; rc == 0 && i < sub.n; i++) {
        char *p = taas_fmt_join(dir, sub.v[i]);
        rc = p ? walk(ds, p, up, depth + 1, out, err) : taas_fmt_oom(err, "a path");
        free(p);
    }
    taas_strvec_clear(&sub);
    return rc;
}

static int add_sample(if_ds *ds, const char *path, int64_t label, taas_error *err) {
    if (ds->n == ds->cap) {
        size_t cap = ds->cap ? 2 * ds->cap : 256;
        size_t *o = realloc(ds->off, cap * sizeof *o);
        if (o) ds->off = o;
        int64_t *l = o ? realloc(ds->label, cap * sizeof *l) : NULL;
        if (!l) return taas_fmt_oom(err, "the list of images");
        ds->label = l;
        ds->cap = cap;
    }
    ds->off[ds->n] = ds->paths.len;
    ds->label[ds->n++] = label;
    taas_buf_add(&ds->paths, path, strlen(path) + 1);
    return ds->paths.failed ? taas_fmt_oom(err, "the list of images") : 0;
}

/* An image file's path: -1 with the error for an extension the loaders do not decode, 0
 * for a decoded one, 1 when it is no image. */
static int check_image(if_ds *ds, const char *p, taas_error *err) {
    int x = image_ext(p);
    if (x < 0) return 1;
    if (x < N_DECODED) return 0;
    taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "ImageFolder: %s on %s is a %s image: the loaders decode JPEG and PNG only",
                   p, ds->host, IMG_EXT[x] + 1);
    taas_error_hint(err, "convert it to JPEG or PNG (PIL: Image.open(p).convert('RGB').save('x.jpg', "
                         "quality=90)), or move it out of the class folder");
    return -1;
}

/* The images among paths (sorted here by cmp_sample), as samples of class k. */
static int add_class_samples(if_ds *ds, taas_strvec *paths, size_t k, taas_error *err) {
    if (paths->n) qsort(paths->v, paths->n, sizeof *paths->v, cmp_sample);
    for (size_t i = 0; i < paths->n; i++) {
        int x = check_image(ds, paths->v[i], err);
        if (x < 0) return -1;
        if (x == 0 && add_sample(ds, paths->v[i], (int64_t)k, err) != 0) return -1;
    }
    return 0;
}

/* make_dataset for one class folder. */
static int list_class(if_ds *ds, const char *root, size_t k, taas_error *err) {
    char *top = taas_fmt_join(root, ds->classes[k]);
    if (!top) return taas_fmt_oom(err, "a path");
    taas_strvec dirs = {0}, paths = {0};
    ancestor up[MAX_DEPTH];
    int rc = walk(ds, top, up, 0, &dirs, err);
    free(top);
    for (size_t i = 0; rc == 0 && i < dirs.n; i++) {
        taas_strvec files = {0};
        rc = list_dir(ds, dirs.v[i], NULL, &files, err);
        for (size_t j = 0; rc == 0 && j < files.n; j++)
            if (taas_strvec_push(&paths, taas_fmt_join(dirs.v[i], files.v[j])) != 0) rc = taas_fmt_oom(err, "a path");
        taas_strvec_clear(&files);
    }
    if (rc == 0) rc = add_class_samples(ds, &paths, k, err);
    taas_strvec_clear(&dirs);
    taas_strvec_clear(&paths);
    return rc;
}

static int list_root(if_ds *ds, const char *root, taas_error *err) {
    taas_strvec cls = {0};
    if (list_dir(ds, root, &cls, NULL, err) != 0) {
        taas_strvec_clear(&cls);
        return -1;
    }
    ds->classes = cls.v;
    ds->nclasses = cls.n;
    if (cls.n == 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "ImageFolder: found no class folder in %s on %s", root,
                       ds->host);
        taas_error_hint(err, "root holds one folder per class, the images under it: root/cat/1.jpg, root/dog/2.jpg");
        return -1;
    }
    for (size_t k = 0; k < cls.n; k++) {
        size_t before = ds->n;
        if (list_class(ds, root, k, err) != 0) return -1;
        if (ds->n == before) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                           "ImageFolder: found no image in the class folder %s of %s on %s", cls.v[k], root,
                           ds->host);
            taas_error_hint(err, "each class folder needs at least one .jpg, .jpeg or .png file (any case); remove "
                                 "the empty folder or add its images");
            return -1;
        }
    }
    return 0;
}

/* ---- an s3://bucket/prefix/ root -------------------------------------------------- */

#define S3_MAX_KEYS 10000000 /* objects under the prefix: more is a clear error, not hours of listing */

/* 1 when a component of key is "." or "..". */
static int dot_segment(const char *key) {
    for (const char *c = key; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL) {
        size_t n = strcspn(c, "/");
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) return 1;
    }
    return 0;
}

/* The keys under the prefix (ListObjectsV2, every page) as a folder tree: a class is the
 * first component below the prefix (a key "cls/" that marks an empty folder makes one too);
 * keys directly under the prefix are files of root, which ImageFolder ignores. */
static int list_s3(if_ds *ds, const char *root, taas_error *err) {
    /* the prefix names a folder: s3://b/train is listed as s3://b/train/, not train2/ */
    size_t rn = strlen(root);
    char *url = malloc(rn + 2);
    if (!url) return taas_fmt_oom(err, "a URL");
    snprintf(url, rn + 2, "%s%s", root, root[rn - 1] == '/' ? "" : "/");
    size_t bucket_len = (size_t)(strchr(url + 5, '/') - url) + 1; /* "s3://bucket/" */
    size_t pre_len = strlen(url) - bucket_len;
    taas_strvec keys = {0}, rel = {0};
    int rc = taas_fetch_s3_list(ds->f, url, 0, S3_MAX_KEYS, &keys, err);
    if (rc != 0) taas_fmt_prefix(err, "ImageFolder: cannot list %s on %s", url, ds->host);
    /* the part below the prefix; keys at root's level are no class's */
    for (size_t i = 0; rc == 0 && i < keys.n; i++) {
        if (strncmp(keys.v[i], url + bucket_len, pre_len)) continue; /* a store that ignored the prefix */
        const char *r = keys.v[i] + pre_len;
        if (!strchr(r, '/') || r[0] == '/') continue;
        if (dot_segment(r)) {
            /* libcurl resolves "." and ".." in a URL's path: another object would be read */
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                           "ImageFolder: the key %s%s has a '.' or '..' folder, which an S3 URL cannot name", url, r);
            taas_error_hint(err, "rename the key (aws s3 mv) without the '.' or '..' part");
            rc = -1;
        } else if (taas_strvec_push(&rel, strdup(r)) != 0) {
            rc = taas_fmt_oom(err, "an S3 listing");
        }
    }
    taas_strvec_clear(&keys);
    if (rc == 0 && rel.n) qsort(rel.v, rel.n, sizeof *rel.v, cmp_sample);
    taas_strvec cls = {0};
    for (size_t i = 0; rc == 0 && i < rel.n;) {
        size_t cn = (size_t)(strchr(rel.v[i], '/') - rel.v[i]);
        taas_strvec paths = {0};
        size_t j = i;
        for (; rc == 0 && j < rel.n && !strncmp(rel.v[j], rel.v[i], cn + 1); j++) {
            if (rel.v[j][strlen(rel.v[j]) - 1] == '/') continue; /* a folder marker */
            char *p = malloc(bucket_len + pre_len + strlen(rel.v[j]) + 1);
            if (p) sprintf(p, "%.*s%s", (int)(bucket_len + pre_len), url, rel.v[j]);
            if (taas_strvec_push(&paths, p) != 0) rc = taas_fmt_oom(err, "an S3 listing");
        }
        if (rc == 0 && taas_strvec_push(&cls, strndup(rel.v[i], cn)) != 0) rc = taas_fmt_oom(err, "an S3 listing");
        size_t before = ds->n;
        if (rc == 0) rc = add_class_samples(ds, &paths, cls.n - 1, err);
        if (rc == 0 && ds->n == before) {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS,
                           "ImageFolder: found no image in the class folder %.*s of %s, listed on %s", (int)cn,
                           rel.v[i], url, ds->host);
            taas_error_hint(err, "each class prefix needs at least one .jpg, .jpeg or .png key (any case); delete "
                                 "the other keys under it or add its images");
            rc = -1;
        }
        taas_strvec_clear(&paths);
        i = j;
    }
    ds->classes = cls.v;
    ds->nclasses = cls.n;
    taas_strvec_clear(&rel);
    if (rc == 0 && cls.n == 0) {
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "ImageFolder: found no class folder under %s, listed on %s",
                       url, ds->host);
        taas_error_hint(err, "the prefix holds one folder per class, the images under it: %scat/1.jpg, %sdog/2.jpg",
                        url, url);
        rc = -1;
    }
    free(url);
    return rc;
}

/* ---- samples ----------------------------------------------------------------------- */

/* pil_loader's img.convert("RGB"): grey is repeated, alpha dropped. */
static int to_rgb(taas_image *img, taas_error *err) {
    if (img->c == 3) return 0;
    size_t px = (size_t)img->w * img->h;
    unsigned char *o = malloc(px * 3), *s = img->data;
    if (!o) return taas_fmt_oom(err, "an RGB image");
    int c = img->c;
    for (size_t i = 0; i < px; i++) {
        const unsigned char *p = s + i * c;
        o[3 * i] = p[0];
        o[3 * i + 1] = c >= 3 ? p[1] : p[0];
        o[3 * i + 2] = c >= 3 ? p[2] : p[0];
    }
    free(img->data);
    img->data = o;
    img->c = 3;
    return 0;
}

static int if_get_hinted(void *impl, size_t index, const taas_crop_hint *hint, taas_image *img, int64_t *label,
                         int *boxed, taas_error *err) {
    if_ds *ds = impl;
    const char *path = ds->paths.data + ds->off[index];
    taas_blob b = {0};
    int rc = taas_fetch(ds->f, path, &b, err);
    if (rc == 0) {
        if (b.len >= 8 && memcmp(b.data, "\x89PNG", 4) == 0) {
            rc = taas_decode_png(b.data, b.len, img, err);
        } else if (b.len >= 2 && b.data[0] == 0xFF && b.data[1] == 0xD8) {
            rc = taas_decode_jpeg_hinted(b.data, b.len, hint, img, boxed, err);
        } else {
            taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "neither a JPEG nor a PNG image (%zu bytes)", b.len);
            taas_error_hint(err, "the loaders decode JPEG and PNG files: convert the image, or move it out of root");
            rc = -1;
        }
        if (rc == 0) rc = to_rgb(img, err);
    }
    taas_blob_free(&b);
    if (rc != 0) {
        taas_fmt_prefix(err, "sample %zu (%s on %s)", index, path, ds->host);
        return -1;
    }
    *label = ds->label[index];
    return 0;
}

static int if_get(void *impl, size_t index, taas_image *img, int64_t *label, taas_error *err) {
    int boxed;
    return if_get_hinted(impl, index, NULL, img, label, &boxed, err);
}

static void if_free(void *impl) {
    if_ds *ds = impl;
    if (!ds) return;
    taas_buf_free(&ds->paths);
    free(ds->off);
    free(ds->label);
    for (size_t i = 0; i < ds->nclasses; i++) free(ds->classes[i]);
    free(ds->classes);
    free(ds);
}

static const taas_format_ops IF_OPS = {if_get, if_free, if_get_hinted};

int taas_format_imagefolder_open(taas_dataset *d, const json_t *spec, taas_fetcher *f, taas_error *err) {
    const char *root = taas_fmt_spec_str(spec, "root");
    if (!root || !root[0]) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "ImageFolder: root is not a folder path");
        taas_error_hint(err, "give root='/data/train', the folder holding one folder per class");
        return -1;
    }
    if (!strncasecmp(root, "http://", 7) || !strncasecmp(root, "https://", 8)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "ImageFolder: root %s is an HTTP URL, and an HTTP server cannot be listed", root);
        taas_error_hint(err, "pack the images into tar shards and read them with WebDataset(urls='%s/train-{000000.."
                             "000099}.tar'), or copy the folder to each loader's host", root);
        return -1;
    }
    int s3 = !strncmp(root, "s3://", 5);
    if (!strncmp(root, "file://", 7)) root += 7;
    if_ds *ds = calloc(1, sizeof *ds);
    if (!ds) return taas_fmt_oom(err, "a dataset");
    ds->f = f;
    if (gethostname(ds->host, sizeof ds->host - 1) != 0) snprintf(ds->host, sizeof ds->host, "this host");
    if ((s3 ? list_s3(ds, root, err) : list_root(ds, root, err)) != 0) {
        if_free(ds);
        return -1;
    }
    d->info.size = ds->n;
    d->info.num_classes = (int)ds->nclasses;
    d->info.classes = (const char *const *)ds->classes;
    snprintf(d->info.source, sizeof d->info.source, "%s on %s", root, ds->host);
    d->ops = &IF_OPS;
    d->impl = ds;
    return 0;
}
