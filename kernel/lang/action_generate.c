/* generate(model, prompt, max_new_tokens=200, temperature=1.0, top_k=None, seed=0): new
 * tokens from a trained model of tokens, in `taas-worker generate` (workers/generate_role.c)
 * while the kernel stays free, as show() waits on its worker: the stop button kills it and
 * ends the cell with KeyboardInterrupt. A byte-level model's (a vocabulary of 256: TextFile's)
 * prompt is a str and so is its result; another's are lists of token ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dataview.h"
#include "errnames.h"
#include "fit.h"
#include "modelview.h"
#include "rows.h"
#include "worker.h"

#define GENERATE_TIMEOUT_S 3600.0
#define MAX_OUT ((size_t)256 << 20)

typedef struct gen_wait {
    taas_waiter base;
    taas_child *child;
    int bytes;           /* a byte-level model: the result is text */
    double timeout;
} gen_wait;

static void gen_free(taas_waiter *w) {
    gen_wait *g = (gen_wait *)w;
    taas_child_free(g->child);
    free(g);
}

/* The worker's {"tokens": [...]}: the cell's value. */
static int gen_result(gen_wait *g, taas_error *err) {
    if (taas_child_finish(g->child, err)) return -1;
    const taas_buf *o = taas_child_output(g->child);
    json_t *j = o->data ? json_loadb(o->data, o->len, 0, NULL) : NULL;
    const json_t *ids = json_object_get(j, "tokens");
    if (!json_is_array(ids)) {
        json_decref(j);
        taas_error_set(err, TAAS_ERR_WORKER, TAAS_NOPOS, "taas-worker generate ended without its tokens");
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        return -1;
    }
    size_t n = json_array_size(ids);
    taas_value *v = NULL;
    if (g->bytes) {
        char *s = malloc(n ? n : 1);
        for (size_t i = 0; s && i < n; i++) s[i] = (char)json_integer_value(json_array_get(ids, i));
        v = s ? taas_str(s, n) : NULL;  /* bytes that are not UTF-8 become U+FFFD */
        free(s);
    } else if ((v = taas_list_new(n))) {
        for (size_t i = 0; i < n; i++)
            if (!(v->u.seq.items[i] = taas_int(json_integer_value(json_array_get(ids, i))))) {
                taas_unref(v);
                v = NULL;
                break;
            }
    }
    json_decref(j);
    if (!v) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for generate()'s tokens");
    g->base.result = v;
    return 0;
}

static int gen_poll(taas_waiter *w, const taas_io *io, int expired, taas_error *err) {
    (void)io;
    gen_wait *g = (gen_wait *)w;
    int r = taas_child_pump(g->child, MAX_OUT, err);
    if (r < 0) return -1;
    if (r == 1) return gen_result(g, err);
    g->base.fd = taas_child_fd(g->child);
    if (!expired) return 1;
    taas_error_set(err, TAAS_ERR_TIMEOUT, TAAS_NOPOS, "generate() took longer than %g s: taas-worker generate was "
                   "stopped", g->timeout);
    taas_error_hint(err, "ask for fewer max_new_tokens, or raise TAAS_GENERATE_TIMEOUT (seconds) in the kernel's "
                         "environment");
    return -1;
}

/* The model's block size and vocabulary: the one it trained with, else a GPT's n_positions. */
static int shape_of(taas_call_ctx *cx, const taas_value *model, int *block, int *vocab) {
    taas_model_plan plan;
    json_t *spec = taas_value_spec(model);
    int c = model->u.obj.sample[0] > 0 && model->u.obj.sample[1] == 0 ? model->u.obj.sample[0] : 0;
    if (!spec || taas_model_plan_build(&plan, spec, c, 0, 0, cx->err)) {
        json_decref(spec);
        cx->err->pos = cx->pos;
        return spec ? -1 : taas_error_set(cx->err, TAAS_ERR_MEMORY, cx->pos, "out of memory in generate()");
    }
    json_decref(spec);
    const taas_model_layer *first = &plan.layers[0], *last = &plan.layers[plan.nlayers - 1];
    int ok = first->kind == TAAS_L_EMBEDDING && plan.in_shape.rank == 1 && last->out.rank == 2;
    *block = ok ? plan.in_shape.d[0] : 0;
    *vocab = ok ? last->out.d[1] : 0;
    taas_model_plan_free(&plan);
    if (ok) return 0;
    taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "generate() needs a model of tokens (an Embedding first, (N, T, V) "
                   "logits out)%s", c ? "" : " whose block size is known");
    taas_error_hint(cx->err, "train a transformers.GPT2LMHeadModel on a TextFile, then generate(net, 'prompt')");
    return -1;
}

int taas_generate_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (taas_need_session(cx, "generate") || taas_need_weights(cx, a[0])) return -1;
    int block = 0, vocab = 0;
    if (shape_of(cx, a[0], &block, &vocab)) return -1;
    int bytes = vocab == 256;
    json_t *prompt = json_array();
    if (bytes && a[1]->type == TAAS_V_STR) {
        for (size_t i = 0; i < a[1]->u.str.len; i++)
            json_array_append_new(prompt, json_integer((unsigned char)a[1]->u.str.s[i]));
    } else if (!bytes && a[1]->type == TAAS_V_LIST) {
        for (size_t i = 0; i < a[1]->u.seq.n; i++) {
            const taas_value *t = a[1]->u.seq.items[i];
            if (t->type != TAAS_V_INT || t->u.i < 0 || t->u.i >= vocab) {
                json_decref(prompt);
                taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "generate() prompt[%zu] is not a token id in [0, %d)",
                               i, vocab);
                taas_error_hint(cx->err, "give the prompt as token ids of the model's vocabulary");
                return -1;
            }
            json_array_append_new(prompt, json_integer(t->u.i));
        }
    } else {
        json_decref(prompt);
        taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "generate() prompt must be %s for this model (a vocabulary of "
                       "%d), not %s", bytes ? "a str" : "a list of token ids", vocab, taas_value_type_name(a[1]));
        taas_error_hint(cx->err, bytes ? "generate(net, 'Once upon a time')" : "generate(net, [464, 3290])");
        return -1;
    }
    if (json_array_size(prompt) == 0) {
        json_decref(prompt);
        taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "generate() needs a prompt of at least one token");
        taas_error_hint(cx->err, bytes ? "generate(net, '\\n')" : "generate(net, [50256])");
        return -1;
    }
    json_t *spec = json_pack("{s:o, s:s, s:i, s:o, s:I, s:f, s:I, s:I, s:i}", "model", taas_value_spec(a[0]), "weights",
                             a[0]->u.obj.weights, "block_size", block, "prompt", prompt, "max_new_tokens",
                             (json_int_t)a[2]->u.i, "temperature", taas_value_number(a[3]), "top_k",
                             (json_int_t)(a[4]->type == TAAS_V_INT ? a[4]->u.i : 0), "seed", (json_int_t)a[5]->u.i,
                             "threads", 1);
    char *text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
    json_decref(spec);
    gen_wait *g = calloc(1, sizeof *g);
    if (!text || !g) {
        free(text);
        free(g);
        return taas_error_set(cx->err, TAAS_ERR_MEMORY, cx->pos, "out of memory in generate()");
    }
    const char *args[] = {"--spec", "-", NULL};
    g->child = taas_child_start("generate", args, text, strlen(text), cx->err);
    free(text);
    if (!g->child) {
        free(g);
        cx->err->pos = cx->pos;
        return -1;
    }
    g->bytes = bytes;
    g->timeout = taas_worker_timeout("TAAS_GENERATE_TIMEOUT", GENERATE_TIMEOUT_S);
    g->base.fd = taas_child_fd(g->child);
    g->base.poll = gen_poll;
    g->base.free = gen_free;
    taas_interp_wait_on(cx->interp, &g->base);
    cx->wait_until = taas_now() + g->timeout;
    *out = taas_none();
    return 0;
}
