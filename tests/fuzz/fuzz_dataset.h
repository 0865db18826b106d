/* For the harnesses of the dataset formats: one fetcher with no cache (the inputs are
 * written to this process's own folder and read as local files, as a loader reads a root
 * folder), made by the LLVMFuzzerInitialize defined here, and opening a spec and reading
 * some samples as a loader would. */
#ifndef TAAS_FUZZ_DATASET_H
#define TAAS_FUZZ_DATASET_H

#include <jansson.h>
#include <stdlib.h>

#include "dataset.h"
#include "fetch.h"
#include "fuzz_util.h"

static taas_fetcher *fz_fetcher;

static inline void fz_dataset_init(void) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    o.cache_dir = ""; /* a cache would keep the previous input's bytes */
    o.retries = 0;
    taas_error e;
    taas_error_clear(&e);
    if (!(fz_fetcher = taas_fetcher_new(&o, &e))) abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_dataset_init();
    return 0;
}

static inline void fz_check_image(const taas_image *img) {
    if (img->h <= 0 || img->w <= 0 || img->c <= 0 || !img->data) abort();
    size_t px = (size_t)img->h * img->w * img->c;
    fz_touch(img->data, img->type == TAAS_PIX_U8 ? px : px * sizeof(float));
}

/* Opens the dataset spec (stolen), and reads its first, last and a middle sample; returns
 * how many samples it has, or -1 when it does not open. */
static inline long long fz_dataset_run(json_t *spec) {
    taas_error err;
    taas_error_clear(&err);
    taas_dataset *d = taas_dataset_open(spec, fz_fetcher, &err);
    json_decref(spec);
    if (!d) {
        fz_say("open: %s: %s", err.ename, err.message);
        return -1;
    }
    const taas_dataset_info *info = taas_dataset_info_get(d);
    size_t at[] = {0, info->size / 2, info->size - 1, info->size};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        taas_image img;
        int64_t label;
        taas_error_clear(&err);
        if (taas_dataset_get(d, at[i], &img, &label, &err) == 0) {
            if (at[i] >= info->size) abort(); /* out of range must be refused */
            fz_check_image(&img);
            if (info->h && (img.h != info->h || img.w != info->w || img.c != info->c)) abort();
            if (info->num_classes && (label < 0 || label >= info->num_classes)) abort();
            fz_say("sample %zu: %dx%dx%d, label %lld", at[i], img.h, img.w, img.c, (long long)label);
            taas_image_free(&img);
        } else {
            fz_say("sample %zu: %s: %s", at[i], err.ename, err.message);
        }
    }
    long long n = (long long)info->size;
    taas_dataset_free(d);
    return n;
}

#endif
