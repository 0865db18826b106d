/* The prefetch pipeline. Work items are numbered by position in this loader's sequence
 * ((epoch, k) order, k % L == j). Decode threads claim positions in order from a shared
 * cursor, but only within a window of queue_depth positions past the one the caller takes
 * next, so at most queue_depth batches are being built or waiting (plus the one the caller
 * holds): back-pressure without a separate queue. Each position has a slot in a ring of
 * queue_depth; the caller waits on a condition variable for the slot of the next position,
 * so batches come out in order whatever thread finished first. The first error in sequence
 * order stops the claiming and reaches the caller after every batch before it.
 *
 * epochs == 0 means no epoch limit: the sequence ends when the sampler's units are spent
 * (or never, for a loader that runs until it is freed). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "clock.h"
#include "errnames.h"
#include "utf8.h"

#define NONE UINT64_MAX

typedef enum { SLOT_EMPTY, SLOT_BUILDING, SLOT_READY, SLOT_SKIP, SLOT_ERROR } slot_state;

typedef struct slot {
    slot_state state;
    uint64_t pos, epoch, k;
    taas_batch *batch;
} slot;

struct taas_pipeline {
    taas_pipeline_cfg cfg;
    uint64_t *only;             /* sorted copy of cfg.only_items */
    const taas_dataset_info *info;
    uint64_t items;             /* per epoch */
    uint32_t batch;             /* B */
    int fixed;                  /* every sample has the dataset's shape */
    int oc, oh, ow;             /* the batch's sample shape when fixed */

    pthread_mutex_t mu;
    pthread_cond_t work_cv;     /* a position became claimable, or stop/end */
    pthread_cond_t ready_cv;    /* the next slot changed state, or end */
    slot *ring;
    uint64_t next_claim, next_out, end_pos, err_pos;
    uint64_t cur_epoch, cur_i;  /* the claim cursor: epoch and place in its item list */
    taas_error err;             /* the error at err_pos */
    int failed;                 /* the caller got the error: every later call repeats it */
    atomic_int stop;

    pthread_t *threads;
    int nthreads;
    taas_batch_pool *pool;      /* the batches' buffers, reused once the caller frees them */

    atomic_uint alive, max_alive;
    uint64_t batches, samples, skipped;
    double wait_s;
};

static void note_alive(taas_pipeline *p, int delta) {
    unsigned now = atomic_fetch_add(&p->alive, (unsigned)delta) + (unsigned)delta;
    unsigned m = atomic_load(&p->max_alive);
    while (delta > 0 && now > m && !atomic_compare_exchange_weak(&p->max_alive, &m, now)) {
    }
}

/* The next (epoch, k) of the sequence, or 0 at its end. Called under mu. */
static int cursor_next(taas_pipeline *p, uint64_t *epoch, uint64_t *k) {
    const taas_pipeline_cfg *c = &p->cfg;
    for (;;) {
        if (c->epochs && p->cur_epoch - c->first_epoch >= c->epochs) return 0;
        if (taas_sampler_done(c->sampler, p->cur_epoch)) return 0;
        uint64_t kk = NONE;
        if (p->only && p->cur_epoch == c->first_epoch) {
            if (p->cur_i < c->n_only) kk = p->only[p->cur_i];
        } else {
            uint64_t v = c->loader + p->cur_i * c->loaders;
            if (v < p->items && p->cur_i < p->items) kk = v;
        }
        if (kk == NONE) {
            int only_epoch = p->only && p->cur_epoch == c->first_epoch;
            if (p->cur_epoch == UINT64_MAX || (!only_epoch && c->loader >= p->items)) return 0; /* no share */
            p->cur_epoch++;
            p->cur_i = 0;
            continue;
        }
        p->cur_i++;
        *epoch = p->cur_epoch;
        *k = kk;
        return 1;
    }
}

/* "<head>: <message>", cut to the message's room. */
static void prefix(taas_error *err, const char *head) {
    char msg[sizeof err->message];
    size_t h = strlen(head), m = strlen(err->message), cap = sizeof msg - 1;
    if (h > cap) h = cap;
    memcpy(msg, head, h);
    size_t n = h;
    if (n + 2 <= cap) memcpy(msg + n, ": ", 2), n += 2;
    if (m > cap - n) m = cap - n;
    memcpy(msg + n, err->message, m);
    n += m;
    msg[n] = '\0';
    while (n > 0 && !taas_utf8_valid(msg, n)) msg[--n] = '\0'; /* a cut UTF-8 sequence */
    memcpy(err->message, msg, sizeof msg);
}

/* Names the sample in an error that does not (a transform's, a shape mismatch). */
static void blame_sample(taas_pipeline *p, uint64_t index, taas_error *err) {
    char head[1200];
    snprintf(head, sizeof head, "sample %llu (%s)", (unsigned long long)index, p->info->source);
    prefix(err, head);
}

/* Fills one item. 1: a batch in *out; 0: an empty item; -1: an error in err; -2: stopped. */
static int build(taas_pipeline *p, uint64_t epoch, uint64_t k, uint64_t *idx, taas_batch **out, taas_error *err) {
    const taas_pipeline_cfg *c = &p->cfg;
    size_t n = taas_sampler_item(c->sampler, epoch, k, idx);
    if (n == 0) return 0;
    taas_batch *b = NULL;
    int oc = p->oc, oh = p->oh, ow = p->ow;
    for (size_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) {
            taas_batch_free(b);
            return -2;
        }
        taas_image img;
        int64_t label;
        memset(&img, 0, sizeof img);
        taas_transform_hint th;
        int hinted = taas_transform_hint_for(c->transform, c->seed, epoch, idx[i], &th), boxed = 0;
        if (taas_dataset_get_hinted(c->dataset, (size_t)idx[i], hinted ? &th.hint : NULL, &img, &label, &boxed, err) < 0)
            goto fail;
        /* a region decoded for the hint comes out as the whole image would */
        int ih = boxed ? img.full_h : img.h, iw = boxed ? img.full_w : img.w;
        int sc, sh, sw;
        if (taas_transform_out_shape(c->transform, ih, iw, img.c, &sc, &sh, &sw, err) < 0) {
            taas_image_free(&img);
            blame_sample(p, idx[i], err);
            goto fail;
        }
        if (!b) {
            if (!p->fixed) oc = sc, oh = sh, ow = sw;
            b = taas_batch_alloc_pooled(p->pool, epoch, k, (uint32_t)n, (uint32_t)oc, (uint32_t)oh, (uint32_t)ow);
            if (!b) {
                taas_image_free(&img);
                taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a batch of %zu samples of %dx%dx%d",
                               n, oc, oh, ow);
                taas_error_hint(err, "use a smaller batch_size or fewer prefetched batches");
                return -1;
            }
            note_alive(p, 1);
        }
        if (sc != oc || sh != oh || sw != ow) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                           "its image of %dx%d with %d channel%s comes out of the transforms as %dx%dx%d, but the "
                           "batch's samples are %dx%dx%d", ih, iw, img.c, img.c == 1 ? "" : "s", sc, sh, sw,
                           oc, oh, ow);
            taas_image_free(&img);
            taas_error_hint(err, "samples of one batch need one shape: add Resize((h, w)) or CenterCrop(size) "
                                 "to the dataset's transform");
            blame_sample(p, idx[i], err);
            goto fail;
        }
        float *dst = b->images + i * (size_t)oc * oh * ow;
        if (taas_transform_apply_boxed(c->transform, &img, boxed, c->seed, epoch, idx[i], dst, err) < 0) {
            blame_sample(p, idx[i], err);
            goto fail;
        }
        b->labels[i] = label;
        b->indices[i] = idx[i];
    }
    *out = b;
    return 1;
fail:
    if (b) {
        taas_batch_free(b);
        note_alive(p, -1);
    }
    return -1;
}

static void *worker(void *arg) {
    taas_pipeline *p = arg;
    uint64_t *idx = malloc((size_t)p->batch * sizeof *idx);
    taas_error err;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        if (p->err_pos != NONE || (p->end_pos != NONE && p->next_claim >= p->end_pos)) break;
        if (p->next_claim >= p->next_out + (uint64_t)p->cfg.queue_depth) {
            pthread_cond_wait(&p->work_cv, &p->mu);
            continue;
        }
        uint64_t pos = p->next_claim, epoch, k;
        if (!cursor_next(p, &epoch, &k)) {
            p->end_pos = pos;
            pthread_cond_broadcast(&p->ready_cv);
            pthread_cond_broadcast(&p->work_cv);
            break;
        }
        p->next_claim++;
        slot *s = &p->ring[pos % (uint64_t)p->cfg.queue_depth];
        *s = (slot){SLOT_BUILDING, pos, epoch, k, NULL};
        pthread_mutex_unlock(&p->mu);

        taas_batch *b = NULL;
        taas_error_clear(&err);
        int rc = idx ? build(p, epoch, k, idx, &b, &err) : -1;
        if (!idx)
            taas_error_set(&err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the sample indices of a batch");

        pthread_mutex_lock(&p->mu);
        if (rc == -2) break;
        s->state = rc == 1 ? SLOT_READY : rc == 0 ? SLOT_SKIP : SLOT_ERROR;
        s->batch = b;
        if (rc < 0 && pos < p->err_pos) {
            p->err_pos = pos;
            p->err = err;
            pthread_cond_broadcast(&p->work_cv);
        }
        if (pos == p->next_out) pthread_cond_signal(&p->ready_cv);
    }
    pthread_mutex_unlock(&p->mu);
    free(idx);
    return NULL;
}

static int bad_cfg(taas_error *err, const char *what, const char *hint) {
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "pipeline: %s", what);
    taas_error_hint(err, "%s", hint);
    return -1;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int check_cfg(taas_pipeline *p, const taas_pipeline_cfg *c, taas_error *err) {
    char msg[256];
    if (!c->dataset || !c->sampler) return bad_cfg(err, "a dataset and a sampler are needed", "pass both in the config");
    if (c->threads < 1 || c->threads > 1024) {
        snprintf(msg, sizeof msg, "threads must be between 1 and 1024, got %d", c->threads);
        return bad_cfg(err, msg, "DataLoader(num_workers=...) sets the decode threads; 0 workers means one thread");
    }
    if (c->queue_depth < 1 || c->queue_depth > 65536) {
        snprintf(msg, sizeof msg, "queue_depth must be between 1 and 65536, got %d", c->queue_depth);
        return bad_cfg(err, msg, "DataLoader(prefetch_factor=...) sets the batches prepared ahead per worker");
    }
    if (c->loaders < 1 || c->loader >= c->loaders) {
        snprintf(msg, sizeof msg, "loader %u of %u does not exist (loaders are numbered 0 to L - 1)", c->loader,
                 c->loaders);
        return bad_cfg(err, msg, "give loaders >= 1 and loader < loaders");
    }
    if (c->n_only && !c->only_items) return bad_cfg(err, "n_only is set without only_items", "give both or neither");
    if (!c->only_items) return 0;
    p->only = malloc((c->n_only ? c->n_only : 1) * sizeof *p->only);
    if (!p->only) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
    memcpy(p->only, c->only_items, c->n_only * sizeof *p->only);
    qsort(p->only, c->n_only, sizeof *p->only, cmp_u64);
    for (size_t i = 0; i < c->n_only; i++) {
        if (p->only[i] >= p->items) {
            snprintf(msg, sizeof msg, "only_items names item %llu, but an epoch has %llu items (0 to %llu)",
                     (unsigned long long)p->only[i], (unsigned long long)p->items,
                     (unsigned long long)p->items - 1);
            return bad_cfg(err, msg, "only take over items of the same sampler (same dataset, batch size, ranks)");
        }
        if (i && p->only[i] == p->only[i - 1]) {
            snprintf(msg, sizeof msg, "only_items names item %llu twice", (unsigned long long)p->only[i]);
            return bad_cfg(err, msg, "each item is made once: remove the duplicate");
        }
    }
    return 0;
}

static void free_ring(taas_pipeline *p) {
    for (int i = 0; p->ring && i < p->cfg.queue_depth; i++) taas_batch_free(p->ring[i].batch);
    free(p->ring);
}

taas_pipeline *taas_pipeline_new(const taas_pipeline_cfg *cfg, taas_error *err) {
    taas_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory making the pipeline");
        return NULL;
    }
    p->cfg = *cfg;
    p->cfg.only_items = NULL; /* borrowed only until this returns: p->only is the copy */
    if (cfg->sampler) {
        p->items = taas_sampler_items(cfg->sampler);
        p->batch = taas_sampler_batch(cfg->sampler);
    }
    if (check_cfg(p, cfg, err) < 0) {
        free(p->only);
        free(p);
        return NULL;
    }
    p->info = taas_dataset_info_get(cfg->dataset);
    if (p->info->h > 0 && p->info->w > 0 && p->info->c > 0) {
        /* a dataset of one shape: check the transforms against it now, not at the first sample */
        if (taas_transform_out_shape(cfg->transform, p->info->h, p->info->w, p->info->c, &p->oc, &p->oh, &p->ow,
                                     err) < 0) {
            char head[128];
            snprintf(head, sizeof head, "%s's samples (%dx%d, %d channel%s)", p->info->type, p->info->h,
                     p->info->w, p->info->c, p->info->c == 1 ? "" : "s");
            prefix(err, head);
            free(p->only);
            free(p);
            return NULL;
        }
        p->fixed = 1;
    }
    p->ring = calloc((size_t)cfg->queue_depth, sizeof *p->ring);
    p->threads = calloc((size_t)cfg->threads, sizeof *p->threads);
    p->pool = taas_batch_pool_new();
    if (!p->ring || !p->threads || !p->pool) {
        free(p->ring);
        free(p->threads);
        taas_batch_pool_release(p->pool);
        free(p->only);
        free(p);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory making the pipeline");
        return NULL;
    }
    p->end_pos = p->err_pos = NONE;
    p->cur_epoch = cfg->first_epoch;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->ready_cv, NULL);
    for (int i = 0; i < cfg->threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "could not start decode thread %d of %d", i + 1, cfg->threads);
            taas_error_hint(err, "use fewer threads (num_workers), or raise the process's thread limit");
            taas_pipeline_free(p);
            return NULL;
        }
        p->nthreads++;
    }
    return p;
}

void taas_pipeline_free(taas_pipeline *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->work_cv);
    pthread_cond_broadcast(&p->ready_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    free_ring(p);
    taas_batch_pool_release(p->pool); /* batches still out free their buffers when they are freed */
    free(p->threads);
    free(p->only);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->ready_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int taas_pipeline_next(taas_pipeline *p, taas_batch **out, taas_error *err) {
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    double t0 = taas_now();
    int rc;
    for (;;) {
        if (p->failed || (p->err_pos != NONE && p->next_out == p->err_pos)) {
            p->failed = 1;
            *err = p->err;
            rc = -1;
            break;
        }
        if (p->end_pos != NONE && p->next_out >= p->end_pos) {
            rc = 1;
            break;
        }
        slot *s = &p->ring[p->next_out % (uint64_t)p->cfg.queue_depth];
        if (s->pos != p->next_out || (s->state != SLOT_READY && s->state != SLOT_SKIP)) {
            pthread_cond_wait(&p->ready_cv, &p->mu);
            continue;
        }
        taas_batch *b = s->batch;
        int ready = s->state == SLOT_READY;
        memset(s, 0, sizeof *s);
        p->next_out++;
        pthread_cond_signal(&p->work_cv);
        if (!ready) {
            p->skipped++;
            continue;
        }
        note_alive(p, -1);
        p->batches++;
        p->samples += b->n;
        *out = b;
        rc = 0;
        break;
    }
    p->wait_s += taas_now() - t0;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void taas_pipeline_stats_get(taas_pipeline *p, taas_pipeline_stats *out) {
    pthread_mutex_lock(&p->mu);
    out->batches = p->batches;
    out->samples = p->samples;
    out->skipped = p->skipped;
    out->max_alive = atomic_load(&p->max_alive);
    out->wait_s = p->wait_s;
    pthread_mutex_unlock(&p->mu);
    out->buffers = taas_batch_pool_allocated(p->pool);
}
