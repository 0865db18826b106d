/* The prefetch pipeline of one loader: decode threads fetch, decode, transform and batch the
 * work items this loader owns, into a bounded queue (back-pressure: never more than
 * queue_depth batches ready, never unbounded memory); the caller takes them in item order.
 * DataLoader's num_workers and prefetch_factor map onto threads and queue_depth. */
#ifndef TAAS_PIPELINE_H
#define TAAS_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "error.h"
#include "sampler.h"
#include "transform.h"

/* One batch, in one contiguous allocation ready to send: a fixed header, the images (float32
 * NCHW) and the labels (int64), and the sample indices (uint64) for checksums. */
typedef struct taas_batch {
    uint64_t epoch, k;       /* work item */
    uint32_t n, c, h, w;     /* samples and image shape */
    float *images;           /* n * c * h * w, inside buf */
    int64_t *labels;         /* n, inside buf */
    uint64_t *indices;       /* n, inside buf */
    void *buf;               /* the whole batch: header copy + payload, 64-byte aligned */
    size_t buf_len;
} taas_batch;
void taas_batch_free(taas_batch *b);

typedef struct taas_pipeline_cfg {
    taas_dataset *dataset;       /* borrowed */
    taas_transform *transform;   /* borrowed; NULL = implicit ToTensor */
    taas_sampler *sampler;       /* borrowed */
    uint64_t seed;               /* for the random transforms */
    uint64_t first_epoch, epochs;
    uint32_t loader, loaders;    /* this is loader j of L: items with k % L == j */
    const uint64_t *only_items;  /* optional: exactly these items of first_epoch (a loader
                                    taking over a dead one's work), n_only of them */
    size_t n_only;
    int threads;                 /* decode threads, >= 1 */
    int queue_depth;             /* batches ready ahead, >= 1 */
} taas_pipeline_cfg;

typedef struct taas_pipeline taas_pipeline;

taas_pipeline *taas_pipeline_new(const taas_pipeline_cfg *cfg, taas_error *err);
/* Stops the threads (promptly, even mid-batch) and frees what is queued. */
void taas_pipeline_free(taas_pipeline *p);

/* The next batch in (epoch, k) order: 0 and *out; 1 at the end; -1 with the first error a
 * decode thread met (it names the sample index and its source). Empty items are skipped. */
int taas_pipeline_next(taas_pipeline *p, taas_batch **out, taas_error *err);

#endif
