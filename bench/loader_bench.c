/* taas-loader-bench: the C side of bench/loader_bench.py. Runs one loader's prefetch
 * pipeline (taas_dataloader: fetch, decode, transform, batch) over the DataLoader spec it is
 * given, as a loader worker would, and prints one JSON line with the timings:
 *
 *   taas-loader-bench --spec FILE|- [--threads N] [--queue Q] [--epochs E] [--checksum]
 *
 * open_s: opening the dataset (reading headers; a WebDataset fetches and indexes its
 * shards); epochs_s: each epoch, from the first request for a batch to the last batch
 * taken; samples: per epoch. The consumer only takes the batches (as a rank would hand them
 * to the network) unless --checksum, which sums labels and pixels to compare with the peer.
 * Fetch settings come from the TAAS_FETCH_* and TAAS_CACHE_DIR environment variables. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dataset.h"
#include "fetch.h"
#include "pipeline.h"
#include "sampler.h"
#include "transform.h"

static int fail(const taas_error *err) {
    json_t *j = json_pack("{s:{s:s, s:s, s:s}}", "error", "ename", err->ename, "message", err->message, "hint",
                          err->hint);
    char *s = json_dumps(j, JSON_COMPACT);
    printf("%s\n", s ? s : "{\"error\": {}}");
    free(s);
    json_decref(j);
    return 1;
}

static int usage(const char *why) {
    fprintf(stderr, "taas-loader-bench: %s\nusage: taas-loader-bench --spec FILE|- [--threads N] "
                    "[--queue Q] [--epochs E] [--checksum]\n", why);
    return 2;
}

int main(int argc, char **argv) {
    const char *spec_path = NULL;
    int threads = 1, queue = 4, epochs = 1, checksum = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--checksum")) {
            checksum = 1;
            continue;
        }
        if (!v) return usage("an option needs a value");
        if (!strcmp(a, "--spec")) spec_path = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--queue")) queue = atoi(v);
        else if (!strcmp(a, "--epochs")) epochs = atoi(v);
        else return usage("unknown option");
        i++;
    }
    if (!spec_path || threads < 1 || queue < 1 || epochs < 1) return usage("--spec is required; counts are >= 1");
    json_error_t je;
    json_t *spec = strcmp(spec_path, "-") ? json_load_file(spec_path, 0, &je) : json_loadf(stdin, 0, &je);
    if (!spec) return usage(je.text);
    const json_t *ds_spec = json_object_get(spec, "dataset");
    if (!json_is_object(ds_spec)) return usage("the spec is not a DataLoader spec with a dataset");

    taas_error err;
    taas_error_clear(&err);
    taas_fetcher *f = taas_fetcher_new(NULL, &err);
    if (!f) return fail(&err);
    double t0 = taas_now();
    taas_dataset *d = taas_dataset_open(ds_spec, f, &err);
    if (!d) return fail(&err);
    double open_s = taas_now() - t0;
    const json_t *ts = json_object_get(ds_spec, "transform");
    taas_transform *t = NULL;
    if (ts && !json_is_null(ts) && !(t = taas_transform_new(ts, &err))) return fail(&err);
    taas_sampler_cfg sc;
    memset(&sc, 0, sizeof sc);
    sc.size = taas_dataset_info_get(d)->size;
    sc.batch = (uint32_t)json_integer_value(json_object_get(spec, "batch_size"));
    sc.world = 1;
    sc.shuffle = json_is_true(json_object_get(spec, "shuffle"));
    sc.drop_last = json_is_true(json_object_get(spec, "drop_last"));
    taas_sampler *s = taas_sampler_new(&sc, &err);
    if (!s) return fail(&err);

    json_t *times = json_array();
    uint64_t samples = 0, batches = 0;
    double label_sum = 0, pixel_sum = 0;
    for (int e = 0; e < epochs; e++) {
        taas_pipeline_cfg pc;
        memset(&pc, 0, sizeof pc);
        pc.dataset = d;
        pc.transform = t;
        pc.sampler = s;
        pc.first_epoch = (uint64_t)e;
        pc.epochs = 1;
        pc.loaders = 1;
        pc.threads = threads;
        pc.queue_depth = queue;
        double t1 = taas_now();
        taas_pipeline *p = taas_pipeline_new(&pc, &err);
        if (!p) return fail(&err);
        taas_batch *b;
        int rc;
        samples = batches = 0;
        while ((rc = taas_pipeline_next(p, &b, &err)) == 0) {
            samples += b->n;
            batches++;
            if (checksum) {
                size_t px = (size_t)b->n * b->c * b->h * b->w;
                for (uint32_t i = 0; i < b->n; i++) label_sum += (double)b->labels[i];
                for (size_t i = 0; i < px; i++) pixel_sum += b->images[i];
            }
            taas_batch_free(b);
        }
        taas_pipeline_free(p);
        if (rc < 0) return fail(&err);
        json_array_append_new(times, json_real(taas_now() - t1));
    }
    taas_fetch_stats st;
    taas_fetch_stats_get(f, &st);
    json_t *out = json_pack("{s:I, s:I, s:i, s:f, s:o, s:{s:I, s:I, s:I, s:I}}", "samples", (json_int_t)samples,
                            "batches", (json_int_t)batches, "threads", threads, "open_s", open_s, "epochs_s", times,
                            "fetch", "requests", (json_int_t)st.requests, "retries", (json_int_t)st.retries, "bytes",
                            (json_int_t)st.bytes, "cache_hits", (json_int_t)st.cache_hits);
    if (checksum) {
        json_object_set_new(out, "label_sum", json_real(label_sum));
        json_object_set_new(out, "pixel_sum", json_real(pixel_sum));
    }
    char *text = json_dumps(out, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(out);
    json_decref(spec);
    taas_sampler_free(s);
    taas_transform_free(t);
    taas_dataset_free(d);
    taas_fetcher_free(f);
    return 0;
}
