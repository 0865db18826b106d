/* Batches into GPU memory, double-buffered: two slots, each a pinned host buffer and a device
 * buffer for a batch's images and labels. Putting a batch in a slot copies it into the
 * pinned buffer on the host and queues the copy to the device on a stream of its own, so
 * that the next step's batch travels while this step's kernels run. Events order the slot's
 * uses: the copy waits until the compute stream is done with the slot's last batch, and the
 * compute stream waits for the copy before it reads the batch. */
#ifndef TAAS_CU_STAGE_H
#define TAAS_CU_STAGE_H

#include <stdint.h>

#include "cu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "pipeline.h"

typedef struct taas_cu_slot {
    void *host, *dev;           /* pinned; device: images (float), then labels (int64) */
    size_t cap;                 /* bytes of each */
    float *x;                   /* device: the images */
    int64_t *y;                 /* device: the labels */
    cudaEvent_t copied;         /* on the copy stream: the slot's batch is on the device */
    cudaEvent_t consumed;       /* on the compute stream: its last reader is done */
    /* what it holds: the batch it was put from, for the next step to recognise */
    const taas_batch *from;
    uint64_t epoch, k;
    uint32_t n;
    int full;
} taas_cu_slot;

typedef struct taas_cu_stage {
    taas_cu *cu;
    cudaStream_t copy;
    taas_cu_slot slot[2];
} taas_cu_stage;

int taas_cu_stage_init(taas_cu_stage *st, taas_cu *cu, taas_error *err);
/* Waits for both slots' copies and readers, then frees everything. */
void taas_cu_stage_free(taas_cu_stage *st);
/* Copies b (n samples of sample_floats floats, and their labels) into slot i and queues its
 * copy to the device. The host part (waiting for the slot's previous copy, the memcpy into
 * pinned memory) happens now; b may be freed when this returns. */
int taas_cu_stage_put(taas_cu_stage *st, int i, const taas_batch *b, size_t sample_floats, taas_error *err);
/* The same with b's inputs and targets given apart (a token model's, cut from b's windows):
 * nx floats of x and ny labels of y, found afterwards as b's. */
int taas_cu_stage_put_xy(taas_cu_stage *st, int i, const taas_batch *b, const float *x, size_t nx, const int64_t *y,
                         size_t ny, taas_error *err);
/* The slot that holds b (put from it ahead of its step, with its epoch, item and size), or
 * -1; the slot is found for b only once. */
int taas_cu_stage_take(taas_cu_stage *st, const taas_batch *b);
/* Makes the compute stream wait for slot i's copy before what is queued next. */
int taas_cu_stage_use(taas_cu_stage *st, int i, taas_error *err);
/* After the compute stream's last work that reads slot i: the slot may be refilled once it
 * is done. */
int taas_cu_stage_done(taas_cu_stage *st, int i, taas_error *err);

#ifdef __cplusplus
}
#endif

#endif
