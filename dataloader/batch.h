/* Making batches (the pipeline's side; receivers use taas_batch_view in pipeline.h). */
#ifndef TAAS_BATCH_H
#define TAAS_BATCH_H

#include "pipeline.h"

/* A batch for n samples of c x h x w with its header filled and the payload uninitialised
 * (the padding between arrays zeroed). NULL when out of memory or absurdly large. */
taas_batch *taas_batch_alloc(uint64_t epoch, uint64_t k, uint32_t n, uint32_t c, uint32_t h, uint32_t w);

#endif
