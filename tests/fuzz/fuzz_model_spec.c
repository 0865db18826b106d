/* A model's spec (workers/train/model_plan.c): the tree of modules a job carries, which every
 * rank lowers to a graph before anything runs. The input is the spec's JSON text: it is
 * planned for images (3, 16, 16), for features (16) and without an input shape, and each
 * plan's step memory is planned (model_memory.c) for 2 samples through all its ops and all
 * but the last. A plan that builds must hold what the runners read: sources before their
 * op, shapes of the rank the op needs, state_dict rows inside the buffers, a memory plan
 * that gives every wanted value and gradient a place inside its arena, else the harness
 * aborts. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "model_memory.h"
#include "model_plan.h"

static void must(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz_model_spec: a plan that built has %s\n", what);
    abort();
}

static size_t numel(const taas_act_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

static void check_memory(const taas_model_plan *p, int nrun) {
    taas_model_memory mm;
    taas_error e;
    if (taas_model_memory_plan(&mm, p->layers, p->nlayers, p->in_shape, 2, nrun, 64, 0, &e)) return;
    for (int t = 0; t <= nrun; t++) {
        size_t bytes = 2 * numel(t ? &p->layers[t - 1].out : &p->in_shape) * sizeof(float);
        must(mm.act[t] != TAAS_MEM_NONE && mm.act[t] + bytes <= mm.bytes, "a value outside the arena");
        must(mm.grad[t] == TAAS_MEM_NONE || mm.grad[t] + bytes <= mm.bytes, "a gradient outside the arena");
    }
    taas_model_memory_free(&mm);
}

static void check(const taas_model_plan *p) {
    for (int i = 0; i < p->nlayers; i++) {
        const taas_model_layer *L = &p->layers[i];
        must(L->nsrc >= 1 && L->nsrc <= 2, "an op with no source");
        for (int s = 0; s < L->nsrc; s++) must(L->src[s] >= 0 && L->src[s] <= i, "a source after its op");
        must(L->path[sizeof L->path - 1] == '\0', "an unterminated path");
    }
    for (size_t k = 0; k < p->ntable; k++) {
        const taas_param_entry *t = &p->table[k];
        if (t->home == TAAS_T_PARAM) must(t->offset + t->numel <= p->nparams, "a parameter outside the buffer");
        if (t->home == TAAS_T_STAT) must(t->offset + t->numel <= p->nstats, "a statistic outside the buffer");
    }
    must(p->ntrain <= p->nparams, "more trainable parameters than parameters");
    if (p->in_shape.rank && p->nlayers) {
        check_memory(p, p->nlayers);
        check_memory(p, p->nlayers - 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *spec = json_loadb((const char *)data, size, 0, NULL);
    if (!spec) return 0;
    static const int shapes[3][3] = {{3, 16, 16}, {16, 0, 0}, {0, 0, 0}};
    for (int k = 0; k < 3; k++) {
        taas_model_plan p;
        taas_error e;
        if (taas_model_plan_build(&p, spec, shapes[k][0], shapes[k][1], shapes[k][2], &e) == 0) {
            check(&p);
            taas_model_plan_free(&p);
        }
    }
    json_decref(spec);
    return 0;
}
