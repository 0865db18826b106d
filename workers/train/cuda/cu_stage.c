/* Batches into GPU memory, double-buffered (cu_stage.h). */
#include "cu_stage.h"

#include <string.h>

static const size_t ALIGN = 256;

int taas_cu_stage_init(taas_cu_stage *st, taas_cu *cu, taas_error *err) {
    memset(st, 0, sizeof *st);
    st->cu = cu;
    if (taas_cu_check(cudaStreamCreateWithFlags(&st->copy, cudaStreamNonBlocking), "creating the copy stream", err))
        return -1;
    for (int i = 0; i < 2; i++) {
        taas_cu_slot *s = &st->slot[i];
        if (taas_cu_check(cudaEventCreateWithFlags(&s->copied, cudaEventDisableTiming), "creating an event", err) ||
            taas_cu_check(cudaEventCreateWithFlags(&s->consumed, cudaEventDisableTiming), "creating an event", err)) {
            taas_cu_stage_free(st);
            return -1;
        }
    }
    return 0;
}

static void free_buffers(taas_cu_slot *s) {
    if (s->host) cudaFreeHost(s->host);
    if (s->dev) cudaFree(s->dev);
    s->host = s->dev = NULL;
    s->x = NULL;
    s->y = NULL;
    s->cap = 0;
    s->full = 0;
}

void taas_cu_stage_free(taas_cu_stage *st) {
    for (int i = 0; i < 2; i++) {
        taas_cu_slot *s = &st->slot[i];
        if (s->copied) cudaEventSynchronize(s->copied);
        if (s->consumed) cudaEventSynchronize(s->consumed);
        free_buffers(s);
        if (s->copied) cudaEventDestroy(s->copied);
        if (s->consumed) cudaEventDestroy(s->consumed);
        s->copied = s->consumed = NULL;
    }
    if (st->copy) cudaStreamDestroy(st->copy);
    st->copy = NULL;
}

/* Room for `bytes` in slot s, both sides; the old buffers go once nothing uses them. */
static int reserve(taas_cu_slot *s, size_t bytes, taas_error *err) {
    if (bytes <= s->cap) return 0;
    if (taas_cu_check(cudaEventSynchronize(s->copied), "waiting for a batch's copy", err) ||
        taas_cu_check(cudaEventSynchronize(s->consumed), "waiting for the GPU to use a batch", err))
        return -1;
    free_buffers(s);
    if (taas_cu_check(cudaMallocHost(&s->host, bytes), "allocating pinned memory for batches", err) ||
        taas_cu_alloc(&s->dev, bytes, "a batch", err)) {
        free_buffers(s);
        return -1;
    }
    s->cap = bytes;
    return 0;
}

int taas_cu_stage_put(taas_cu_stage *st, int i, const taas_batch *b, size_t sample_floats, taas_error *err) {
    return taas_cu_stage_put_xy(st, i, b, b->images, (size_t)b->n * sample_floats, b->labels, b->n, err);
}

int taas_cu_stage_put_xy(taas_cu_stage *st, int i, const taas_batch *b, const float *x, size_t nx, const int64_t *y,
                         size_t ny, taas_error *err) {
    taas_cu_slot *s = &st->slot[i];
    s->full = 0;
    size_t xb = nx * sizeof(float), xb_al = (xb + ALIGN - 1) / ALIGN * ALIGN;
    size_t yb = ny * sizeof(int64_t);
    if (reserve(s, xb_al + yb, err)) return -1;
    /* the pinned buffer is rewritten: its last copy to the device must be over */
    if (taas_cu_check(cudaEventSynchronize(s->copied), "waiting for a batch's copy", err)) return -1;
    memcpy(s->host, x, xb);
    memcpy((char *)s->host + xb_al, y, yb);
    s->x = s->dev;
    s->y = (int64_t *)((char *)s->dev + xb_al);
    /* the device buffer too: the compute stream's last reader of it must be done */
    if (taas_cu_check(cudaStreamWaitEvent(st->copy, s->consumed, 0), "ordering a batch's copy", err) ||
        taas_cu_check(cudaMemcpyAsync(s->dev, s->host, xb_al + yb, cudaMemcpyHostToDevice, st->copy),
                      "copying a batch to the GPU", err) ||
        taas_cu_check(cudaEventRecord(s->copied, st->copy), "recording a batch's copy", err))
        return -1;
    s->from = b;
    s->epoch = b->epoch;
    s->k = b->k;
    s->n = b->n;
    s->full = 1;
    return 0;
}

int taas_cu_stage_take(taas_cu_stage *st, const taas_batch *b) {
    for (int i = 0; i < 2; i++) {
        taas_cu_slot *s = &st->slot[i];
        if (s->full && s->from == b && s->epoch == b->epoch && s->k == b->k && s->n == b->n) {
            /* found once: a later batch at the same address (the allocator reuses them) or the
             * same batch with other contents is a new batch, put again */
            s->full = 0;
            return i;
        }
    }
    return -1;
}

int taas_cu_stage_use(taas_cu_stage *st, int i, taas_error *err) {
    return taas_cu_check(cudaStreamWaitEvent(st->cu->stream, st->slot[i].copied, 0), "waiting for a batch's copy",
                         err);
}

int taas_cu_stage_done(taas_cu_stage *st, int i, taas_error *err) {
    return taas_cu_check(cudaEventRecord(st->slot[i].consumed, st->cu->stream), "recording a batch's use", err);
}
