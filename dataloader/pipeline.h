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
    void *buf;               /* the whole batch: header copy + payload, 64-byte aligned
                                when made here (a received one: at least 8-byte aligned) */
    size_t buf_len;
    /* Who owns buf when the batch does not (a received message, used in place; a pipeline's
     * buffer, which goes back to its pool): when set, taas_batch_free calls
     * release(release_ctx) instead of free(buf). NULL for batches from taas_batch_alloc and
     * for views. */
    void (*release)(void *ctx);
    void *release_ctx;
} taas_batch;
/* Frees buf (or releases it through the hook) and the batch. */
void taas_batch_free(taas_batch *b);

/* The layout of buf (host byte order), for whoever receives it: a 64-byte header
 * ("TAASBT01", epoch, k as uint64; n, c, h, w as uint32; the byte offsets of images, labels
 * and indices as uint64), then the three arrays, each starting on a 64-byte boundary, the
 * gaps zeroed. taas_batch_view checks such a buffer and points a batch's fields into it
 * (out->buf = buf, no release hook; nothing is copied or owned: do not taas_batch_free the
 * view). -1 with a TaasValueError when it is not a whole batch or not 8-byte aligned. */
int taas_batch_view(const void *buf, size_t len, taas_batch *out, taas_error *err);

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

/* Counters since the pipeline was made, for tests, benchmarks and progress lines. */
typedef struct taas_pipeline_stats {
    uint64_t batches, samples;  /* handed to the caller */
    uint64_t skipped;           /* empty items passed over */
    uint32_t max_alive;         /* most batches allocated at once and not yet handed over */
    double wait_s;              /* time the caller waited in taas_pipeline_next */
    uint64_t buffers;           /* batch buffers allocated; the other batches reused the
                                   buffers of batches the caller had freed */
} taas_pipeline_stats;
void taas_pipeline_stats_get(taas_pipeline *p, taas_pipeline_stats *out);

#endif
