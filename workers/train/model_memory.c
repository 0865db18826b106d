/* Planning a step's memory (model_memory.h): the buffers with their lives, then a greedy
 * packing, largest first, each at the lowest offset free for all of its life. */
#include "model_memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "errnames.h"

typedef struct item {
    size_t bytes, *where;  /* where the offset goes */
    int from, to;          /* alive over [from, to] on the step's clock */
    size_t off;
} item;

static size_t numel(const taas_act_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n = taas_size_mul(n, (size_t)s->d[i]);
    return n;
}

/* Ops whose backward reads their input, or their output (model_memory.h). */
static int needs_x(const taas_model_layer *L) {
    switch (L->kind) {
    case TAAS_L_LINEAR: case TAAS_L_CONV2D: case TAAS_L_LEAKY_RELU: case TAAS_L_GELU:
    case TAAS_L_BATCHNORM1D: case TAAS_L_BATCHNORM2D: case TAAS_L_CONV1D: case TAAS_L_EMBEDDING:
    case TAAS_L_LAYERNORM: case TAAS_L_ATTENTION:
        return 1;
    default:
        return 0;
    }
}

static int needs_y(const taas_model_layer *L) {
    switch (L->kind) {
    case TAAS_L_TANH: case TAAS_L_SIGMOID: case TAAS_L_SOFTMAX: case TAAS_L_LOG_SOFTMAX: case TAAS_L_RELU:
        return !L->in_place;
    case TAAS_L_CONV2D:
        return L->fusion == TAAS_FUSE_RELU;
    case TAAS_L_ATTENTION:
        return 1;
    default:
        return 0;
    }
}

/* An op whose parameters train needs its output's gradient even when its input does not
 * (and BatchNorm cannot skip its input's). */
static int trains(const taas_model_layer *L) { return (L->has_w || L->has_b) && !L->frozen; }

static int find(int *parent, int t) {
    while (parent[t] != t) t = parent[t] = parent[parent[t]];
    return t;
}

static int by_size(const void *a, const void *b) {
    const item *x = *(const item *const *)a, *y = *(const item *const *)b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->from - y->from;
}

static int by_off(const void *a, const void *b) {
    const item *x = *(const item *const *)a, *y = *(const item *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Offsets for every item; the arena's size. */
static size_t pack(item *it, size_t n, item **order, item **live) {
    for (size_t i = 0; i < n; i++) order[i] = &it[i];
    qsort(order, n, sizeof *order, by_size);
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
        item *a = order[i];
        size_t nl = 0, at = 0;
        for (size_t j = 0; j < i; j++)
            if (order[j]->from <= a->to && a->from <= order[j]->to) live[nl++] = order[j];
        qsort(live, nl, sizeof *live, by_off);
        for (size_t j = 0; j < nl; j++) {
            if (live[j]->off >= taas_size_add(at, a->bytes)) break;
            size_t end = taas_size_add(live[j]->off, live[j]->bytes);
            if (end > at) at = end;
        }
        a->off = at;
        *a->where = at;
        if (taas_size_add(at, a->bytes) > top) top = taas_size_add(at, a->bytes);
    }
    return top;
}

void taas_model_memory_free(taas_model_memory *mm) {
    free(mm->act);
    free(mm->grad);
    free(mm->aux);
    free(mm->tmp);
    free(mm->acc);
    memset(mm, 0, sizeof *mm);
}

static size_t aligned(size_t floats) {
    size_t b = taas_size_mul(floats, sizeof(float));
    return taas_size_mul(taas_size_add(b, TAAS_MEM_ALIGN - 1) / TAAS_MEM_ALIGN, TAAS_MEM_ALIGN);
}

int taas_model_memory_plan(taas_model_memory *mm, const taas_model_layer *layers, int nlayers, taas_act_shape in,
                           int n, int nrun, size_t scratch_bytes, int input_outside, taas_error *err) {
    memset(mm, 0, sizeof *mm);
    size_t nt = (size_t)nlayers + 1, nn = (size_t)n;
    int end = 2 * nrun + 1;  /* after the last backward */
    int *parent = malloc(nt * sizeof *parent), *from = malloc(nt * sizeof *from), *to = malloc(nt * sizeof *to);
    int *first = malloc(nt * sizeof *first), *last = malloc(nt * sizeof *last);
    unsigned char *written = calloc(nt, 1), *wants = calloc(nt, 1);
    /* at most: a value and a gradient per tensor, an aux and a tmp per op, the scratch */
    size_t cap = 2 * nt + 2 * (size_t)nlayers + 1, k = 0;
    item *it = calloc(cap, sizeof *it), **order = calloc(cap, sizeof *order), **live = calloc(cap, sizeof *live);
    mm->act = malloc(nt * sizeof *mm->act);
    mm->grad = malloc(nt * sizeof *mm->grad);
    mm->aux = malloc((size_t)(nlayers ? nlayers : 1) * sizeof *mm->aux);
    mm->tmp = malloc((size_t)(nlayers ? nlayers : 1) * sizeof *mm->tmp);
    mm->acc = calloc(2 * (size_t)(nlayers ? nlayers : 1), 1);
    int rc = -1;
    if (!parent || !from || !to || !first || !last || !written || !wants || !it || !order || !live || !mm->act || !mm->grad ||
        !mm->aux || !mm->tmp || !mm->acc) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory planning the model's memory");
        taas_error_hint(err, "use a smaller model");
        goto out;
    }
    mm->n = n;
    mm->nrun = nrun;
    for (size_t t = 0; t < nt; t++) {
        parent[t] = (int)t;
        mm->act[t] = mm->grad[t] = TAAS_MEM_NONE;
        first[t] = end;
        last[t] = -1;
    }
    for (int i = 0; i < nlayers; i++) mm->aux[i] = mm->tmp[i] = TAAS_MEM_NONE;
    /* values that share memory: a group, named by its first tensor */
    for (int i = 0; i < nrun; i++)
        if (layers[i].in_place || layers[i].overwrite) parent[i + 1] = find(parent, layers[i].src[0]);
    for (int t = 0; t <= nrun; t++) {
        int g = find(parent, t);
        if (g == t) from[g] = t == 0 ? 0 : t - 1, to[g] = from[g];
    }
    /* a tensor's gradient is wanted when a parameter that trains went into it: an op upstream
     * trains (a group's when one of its tensors' is; never the input's) */
    for (int i = 0; i < nrun; i++) {
        int v = trains(&layers[i]);
        for (int s = 0; s < layers[i].nsrc; s++) v |= wants[find(parent, layers[i].src[s])];
        if (v) wants[find(parent, i + 1)] = 1;
    }
    /* an op's backward runs when its output's gradient is wanted: only then does it read
     * its input, its output or its aux after its forward */
    for (int i = 0; i < nrun; i++) {
        const taas_model_layer *L = &layers[i];
        int bwd = wants[find(parent, i + 1)] ? 2 * nrun - i : i;
        for (int s = 0; s < L->nsrc; s++) {
            int g = find(parent, L->src[s]);
            if (to[g] < i) to[g] = i;
            if (s == 0 && needs_x(L) && to[g] < bwd) to[g] = bwd;
        }
        int g = find(parent, i + 1);
        if (needs_y(L) && to[g] < bwd) to[g] = bwd;
    }
    to[find(parent, nrun)] = end;  /* the output is read after the step */
    /* gradients: written first by the backward of a consumer (or the copy of dout), read last
     * by the backward of the op that wrote the group's first tensor */
    int og = find(parent, nrun);
    written[og] = wants[og];
    first[og] = nrun;
    for (int i = nrun - 1; i >= 0; i--) {
        const taas_model_layer *L = &layers[i];
        if (L->in_place) continue;
        int bwd = 2 * nrun - i;
        for (int s = 0; s < L->nsrc; s++) {
            int g = find(parent, L->src[s]);
            if ((s == 0 && L->overwrite) || !wants[g]) continue;  /* in its own memory, or none */
            mm->acc[2 * i + s] = written[g];
            written[g] = 1;
            if (first[g] > bwd) first[g] = bwd;
        }
    }
    for (int t = 1; t <= nrun; t++) {
        int g = find(parent, t);
        if (g == t && wants[g]) last[g] = 2 * nrun - (t - 1);
    }
    for (int t = 0; t <= nrun; t++) {
        if (find(parent, t) != t) continue;
        taas_act_shape sh = taas_plan_tensor_shape(layers, in, t);
        size_t b = aligned(taas_size_mul(numel(&sh), nn));
        mm->act_bytes = taas_size_add(mm->act_bytes, b);
        if (!(t == 0 && input_outside)) it[k++] = (item){b, &mm->act[t], from[t], to[t], 0};
        if (last[t] >= 0 && written[t]) it[k++] = (item){b, &mm->grad[t], first[t], last[t], 0};
    }
    for (int i = 0; i < nrun; i++) {
        const taas_model_layer *L = &layers[i];
        int bwd = 2 * nrun - i;
        size_t c = L->in.rank ? (size_t)L->in.d[0] : 0, x = taas_size_mul(numel(&L->in), nn), a = 0;
        if (L->kind == TAAS_L_BATCHNORM1D || L->kind == TAAS_L_BATCHNORM2D) a = 2 * c;
        if (L->kind == TAAS_L_DROPOUT && !L->in_place) a = x;
        if (L->kind == TAAS_L_DROPOUT2D && !L->in_place) a = taas_size_mul(nn, c);
        if (L->kind == TAAS_L_MAXPOOL2D) a = taas_size_mul(numel(&L->out), nn);  /* int32 argmax */
        if (L->kind == TAAS_L_LAYERNORM && L->in.rank) a = 2 * (x / (size_t)L->lin_in);  /* mean, rstd a row */
        if (L->kind == TAAS_L_ATTENTION && L->in.rank) a = taas_size_mul(taas_size_mul(nn, (size_t)L->heads), (size_t)L->in.d[0]);
        if (a) it[k++] = (item){aligned(a), &mm->aux[i], i, wants[find(parent, i + 1)] ? bwd : i, 0};
        int g = find(parent, L->src[0]), grad = last[g] >= 0;
        /* its input gradient goes aside when it must be added, or when only its parameters
         * need gradients and it cannot skip its input's (Linear and Conv2d can) */
        int sink = !grad && trains(L) && L->kind != TAAS_L_LINEAR && L->kind != TAAS_L_CONV2D &&
                   L->kind != TAAS_L_CONV1D && L->kind != TAAS_L_EMBEDDING && L->kind != TAAS_L_POS_EMBEDDING &&
                   L->kind != TAAS_L_LAYERNORM;
        if (!L->in_place && L->kind != TAAS_L_ADD && ((grad && mm->acc[2 * i]) || sink))
            it[k++] = (item){aligned(x), &mm->tmp[i], bwd, bwd, 0};
    }
    if (scratch_bytes) it[k++] = (item){aligned((scratch_bytes + sizeof(float) - 1) / sizeof(float)), &mm->scratch, 0,
                                        end, 0};
    mm->bytes = pack(it, k, order, live);
    if (mm->bytes == SIZE_MAX) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "a batch of %d needs more memory than can be addressed", n);
        taas_error_hint(err, "use a smaller batch_size");
        goto out;
    }
    /* every tensor takes its group's memory */
    for (int t = 0; t <= nrun; t++) {
        int g = find(parent, t);
        mm->act[t] = mm->act[g];
        mm->grad[t] = mm->grad[g];
    }
    rc = 0;
out:
    free(parent), free(from), free(to), free(first), free(last), free(written), free(wants);
    free(it), free(order), free(live);
    if (rc) taas_model_memory_free(mm);
    return rc;
}
