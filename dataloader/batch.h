/* Making batches (the pipeline's side; receivers use taas_batch_view in pipeline.h). */
#ifndef TAAS_BATCH_H
#define TAAS_BATCH_H

#include "pipeline.h"

/* A batch for n samples of c x h x w with its header filled and the payload uninitialised
 * (the padding between arrays zeroed). NULL when out of memory or absurdly large. */
taas_batch *taas_batch_alloc(uint64_t epoch, uint64_t k, uint32_t n, uint32_t c, uint32_t h, uint32_t w);

/* Buffers for a pipeline's batches, reused: a batch of a few tens of MB is otherwise mapped
 * fresh for each batch and unmapped when freed, and its first touches page-fault (a fifth of
 * a loader's time on ImageNet-sized batches). A pooled batch's taas_batch_free gives its buffer
 * back, from any thread (ZeroMQ's I/O thread frees the batches it sent); the next batch whose
 * size fits takes it. A buffer is only made when no idle one fits, and then an idle one that
 * does not fit is freed: there are never more buffers than batches were out at once. The pool
 * lives until its owner has released it and every batch from it is freed. */
typedef struct taas_batch_pool taas_batch_pool;
taas_batch_pool *taas_batch_pool_new(void);
void taas_batch_pool_release(taas_batch_pool *p);
/* taas_batch_alloc with a buffer from the pool (p NULL: taas_batch_alloc). */
taas_batch *taas_batch_alloc_pooled(taas_batch_pool *p, uint64_t epoch, uint64_t k, uint32_t n, uint32_t c,
                                    uint32_t h, uint32_t w);
/* Idle buffers held now; buffers allocated so far (the other batches reused one). */
int taas_batch_pool_idle(taas_batch_pool *p);
uint64_t taas_batch_pool_allocated(taas_batch_pool *p);

#endif
