/* .npy files (dataloader/npy_header.c, format_npy.c): the header parser and the element
 * conversions on the bytes in memory, a .npy WebDataset member decoded as an image, and
 * NpyDataset opened with the input as its images (labels made to match its first
 * dimension) and as its labels (images made to match), read whole and — with
 * TAAS_NPY_MEMORY_LIMIT=0 — a range read per sample, as a big file is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "fuzz_dataset.h"

/* A version 1.0 .npy file of n elements of descr ('|u1' or '<i8'), shape as given; the
 * data are zeros. Returns its length in buf (cap bytes), 0 when it does not fit. */
static size_t npy_file(char *buf, size_t cap, const char *descr, const char *shape, size_t nbytes) {
    char dict[200];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t hl = strlen(dict) + 1, total = (10 + hl + 63) / 64 * 64, len = total - 10;
    if (total + nbytes > cap) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(len & 0xff);
    buf[9] = (char)(len >> 8);
    memcpy(buf + 10, dict, hl - 1);
    memset(buf + 10 + hl - 1, ' ', total - 10 - hl);
    buf[total - 1] = '\n';
    memset(buf + total, 0, nbytes);
    return total + nbytes;
}

static void open_pair(const char *images, const char *labels) {
    json_t *spec = json_pack("{s:s, s:s, s:s}", "type", "NpyDataset", "images", images, "labels", labels);
    if (!spec) abort();
    fz_dataset_run(spec);
}

#define MADE_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_npy h;
    taas_error err;
    taas_error_clear(&err);
    size_t need = 0;
    int rc = taas_npy_parse(data, size, "fuzz.npy", &h, &need, &err);
    fz_say("npy header: %s", rc < 0 ? err.message : rc ? "too short" : h.descr);
    if (rc == 1 && need <= size) abort(); /* "too short" only when it is */
    if (rc == 0) {
        if (h.data_off > size || h.ndim < 0 || h.ndim > 8) abort();
        /* the elements that are there, converted */
        uint64_t have = (size - h.data_off) / (uint64_t)h.itemsize;
        size_t count = (size_t)(have < h.count ? have : h.count);
        if (count > 1 << 16) count = 1 << 16;
        float *f = malloc((count ? count : 1) * sizeof *f);
        int64_t *i64 = malloc((count ? count : 1) * sizeof *i64);
        taas_npy_to_f32(&h, data + h.data_off, count, f);
        taas_npy_to_i64(&h, data + h.data_off, count, i64);
        free(f);
        free(i64);
    }
    taas_image img;
    taas_error_clear(&err);
    if (taas_npy_decode_image(data, size, "fuzz.npy", &img, &err) == 0) {
        fz_check_image(&img);
        taas_image_free(&img);
    }

    const char *in = fz_write("in.npy", data, size);
    static char made[MADE_MAX + 256];
    char shape[64];
    uint64_t n0 = rc == 0 && h.ndim >= 1 ? h.shape[0] : 1;
    if (n0 > MADE_MAX / 8) n0 = 1;
    /* the input as the images */
    snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)n0);
    size_t len = npy_file(made, sizeof made, "<i8", shape, (size_t)n0 * 8);
    const char *labels = fz_write("labels.npy", made, len);
    /* the input as the labels */
    snprintf(shape, sizeof shape, "(%llu, 2, 3)", (unsigned long long)n0);
    len = npy_file(made, sizeof made, "|u1", shape, (size_t)n0 * 6);
    const char *images = fz_write("images.npy", made, len);

    unsetenv("TAAS_NPY_MEMORY_LIMIT");
    open_pair(in, labels);
    open_pair(images, in);
    setenv("TAAS_NPY_MEMORY_LIMIT", "0", 1);
    open_pair(in, labels);
    return 0;
}
