/* A model's plan: the module tree of a spec (Sequential, BasicBlock, Bottleneck, ResNet and
 * the leaf layers) lowered once to a graph of ops over tensors, each op's shapes inferred
 * from its sources', and the state_dict table (key, shape, dtype, where each tensor lives in
 * the parameter and statistics buffers). No memory for numbers is taken, so the kernel links
 * this (with shape.c) to find shape errors before a job starts and to check a weights file
 * against a model; taas_model_new builds on it, model_memory.h plans a step's memory.
 *
 * The graph is a list of ops in execution order (a topological order: the tree's own). Op i
 * reads one or two tensors (src) and writes tensor i + 1; tensor 0 is the model's input.
 * A tensor may feed several ops (a residual connection's input): its gradient is then the
 * sum of what each consumer sends back. */
#ifndef TAAS_MODEL_PLAN_H
#define TAAS_MODEL_PLAN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum taas_layer_kind {
    TAAS_L_LINEAR, TAAS_L_CONV2D, TAAS_L_MAXPOOL2D, TAAS_L_AVGPOOL2D, TAAS_L_RELU,
    TAAS_L_LEAKY_RELU, TAAS_L_TANH, TAAS_L_SIGMOID, TAAS_L_GELU, TAAS_L_DROPOUT,
    TAAS_L_DROPOUT2D, TAAS_L_BATCHNORM1D, TAAS_L_BATCHNORM2D, TAAS_L_FLATTEN,
    TAAS_L_LOG_SOFTMAX, TAAS_L_SOFTMAX, TAAS_L_ADAPTIVE_AVGPOOL2D, TAAS_L_IDENTITY,
    TAAS_L_ADD,                     /* a residual connection: src[0] + src[1] */
    TAAS_L_CONV1D,                  /* Hugging Face's Conv1D: Linear with its weight stored (in, out) */
    TAAS_L_EMBEDDING, TAAS_L_LAYERNORM,
    TAAS_L_POS_EMBEDDING,           /* GPT-2's wpe: y[t] = x[t] + weight[t] */
    TAAS_L_ATTENTION,               /* GPT-2's causal self-attention on c_attn's q, k, v (layers.h) */
} taas_layer_kind;

/* An activation's shape without the batch dimension: rank 1 (F, or T token ids), rank 2
 * (T, C) for sequences, or rank 3 (C, H, W). */
typedef struct taas_act_shape {
    int rank;
    int d[3];
} taas_act_shape;

/* Ops that a runner computes as one, decided once by the plan (taas_model_plan_build) for
 * the CPU and the CUDA runners alike: a Conv2d whose output only a ReLU reads applies the
 * ReLU to its own output (y = max(conv + b, 0); backward masks dy by y's sign), and the ReLU
 * then runs nothing, its output being its input's buffer. */
typedef enum taas_layer_fusion {
    TAAS_FUSE_NONE,
    TAAS_FUSE_RELU,    /* a Conv2d that computes the ReLU after it */
    TAAS_FUSED,        /* that ReLU */
} taas_layer_fusion;

/* One op of the graph (historically a layer of a Sequential, hence the name). */
typedef struct taas_model_layer {
    taas_layer_kind kind;
    taas_layer_fusion fusion;
    int in_place;                   /* its output is its input's buffer, nothing to run either way:
                                     * Flatten, Identity, a fused ReLU, Dropout with p = 0 */
    int overwrite;                  /* runs, writing its output over src[0]'s memory, which nothing
                                     * else reads (torchvision's ReLU(inplace=True), `out += identity`);
                                     * its input gradient is its output gradient's memory too */
    char name[32];                  /* the spec's type, "LazyLinear" included */
    char path[64];                  /* the module's path in the tree, its state_dict prefix:
                                     * "3", "layer3.1.conv2" */
    int src[2], nsrc;               /* the tensors it reads */
    taas_act_shape in, out;         /* src[0]'s shape, and its output's */
    size_t w_off, b_off;            /* in the parameter buffer; b_off SIZE_MAX when no bias */
    size_t rm_off, rv_off;          /* BatchNorm running stats in the stats buffer */
    int counter;                    /* BatchNorm: index into num_batches_tracked */
    int has_w, has_b;
    int oc, kh, kw, sh, sw, ph, pw; /* Conv2d / pools */
    int groups;                     /* Conv2d */
    int frozen;                     /* requires_grad is False: its parameters neither change nor
                                     * get gradients or optimizer state */
    int row, nrows;                 /* its rows in the state_dict table */
    int init_fan_out;               /* Conv2d in a ResNet: kaiming_normal_(mode='fan_out'), as torchvision */
    int init_zero;                  /* BatchNorm ending a block under zero_init_residual: weight 0 */
    int lin_in, lin_out;            /* Linear, Conv1D; Embedding: num_embeddings, embedding_dim */
    int heads;                      /* attention */
    int gelu_tanh;                  /* GELU(approximate='tanh') */
    int tie;                        /* a Linear whose weight is op `tie`'s (GPT-2's lm_head and wte), or -1 */
    float init_std;                 /* > 0: weight normal(0, init_std) and bias 0 (Embedding, GPT-2's init) */
    float p, slope, eps, momentum;  /* Dropout (attention's too), LeakyReLU, BatchNorm, LayerNorm */
} taas_model_layer;

/* The loss rule beside the layers': NLLLoss after a final LogSoftmax over features is
 * cross-entropy on the LogSoftmax's input, which a runner may compute in one (the CUDA engine
 * does, and skips the layer in training; the CPU engine runs both as PyTorch does, as its
 * step-by-step tests against PyTorch compare). */
static inline int taas_layers_fold_into_nll(const taas_model_layer *layers, int n) {
    return n > 0 && layers[n - 1].kind == TAAS_L_LOG_SOFTMAX && layers[n - 1].in.rank == 1 &&
           layers[n - 1].src[0] == n - 1;
}

/* The shape of tensor t: the input's, or op t - 1's output. */
static inline taas_act_shape taas_plan_tensor_shape(const taas_model_layer *layers, taas_act_shape in, int t) {
    return t == 0 ? in : layers[t - 1].out;
}

typedef enum taas_tensor_home { TAAS_T_PARAM, TAAS_T_STAT, TAAS_T_COUNTER } taas_tensor_home;

/* One row of the state_dict: key, shape, dtype ("F32" or "I64") and where it lives:
 * a float offset into params (TAAS_T_PARAM) or stats (TAAS_T_STAT), or an index into the
 * int64 counters (TAAS_T_COUNTER). */
typedef struct taas_param_entry {
    char key[96];
    int tied;                       /* another row's tensor under a second key (lm_head.weight is
                                     * transformer.wte.weight): saved, counted and loaded once */
    int alias_off;                  /* > 0: key + alias_off is a name files may give it too
                                     * (Hugging Face's GPT2Model's, "wte.weight") */
    int ndim;
    int64_t shape[4];
    const char *dtype;
    taas_tensor_home home;
    size_t offset;
    size_t numel;
} taas_param_entry;

typedef struct taas_model_plan {
    taas_model_layer *layers;       /* the ops in execution order */
    int nlayers, cap;
    taas_act_shape in_shape;        /* rank 0: planned without an input shape */
    taas_param_entry *table;        /* state_dict order */
    size_t ntable;
    size_t nparams, nstats;         /* floats in the parameter and statistics buffers */
    size_t ntrain;                  /* the trainable parameters: the buffer's first ntrain floats
                                     * (the frozen ones follow), so that gradients, the optimizer
                                     * and its state cover one span */
    int ncounters;                  /* int64 num_batches_tracked entries */
} taas_model_plan;

/* Plans the model for inputs (N, c, h, w), or (N, c) when h == 0 and w == 0. Errors
 * (TaasValueError) name the module's path ("layer 3" in a Sequential, "layer3.1.conv2" in a
 * ResNet), the layer, the shape it expects and the one it gets, and where that comes from;
 * the hint gives the line to write.
 * With c == 0 the input shape is unknown: each layer's tensors get the shapes its spec
 * gives, and a dimension that only the input could tell (a Lazy layer's in_features or
 * in_channels) is 0 in the table. 0, or -1 with err (the plan is then empty). */
int taas_model_plan_build(taas_model_plan *p, const json_t *sequential_spec, int c, int h, int w,
                          taas_error *err);
void taas_model_plan_free(taas_model_plan *p);
/* The model's parameters, gradients and statistics fit this machine's memory: 0, or -1
 * with a TaasMemoryError naming what they need, what there is and the largest tensor. */
int taas_model_plan_check_memory(const taas_model_plan *p, taas_error *err);

/* The table as safetensors tensors (malloc'd, n rows; NULL when out of memory), each
 * pointing into the buffers (params, stats, counters), or with data NULL when the buffers
 * are NULL: a table to check a file against. A size the plan does not know (0) accepts
 * any. */
struct taas_st_tensor *taas_param_table_tensors(const taas_param_entry *table, size_t n, float *params,
                                                float *stats, int64_t *counters);

/* The type Hugging Face gives GPT2LMHeadModel's module at `path` (len bytes; "transformer.h.0.attn"):
 * GPT2Model, ModuleList, GPT2Block, GPT2Attention, GPT2MLP; "" for another. */
const char *taas_gpt2_module_type(const char *path, size_t len);

/* The table row with this key, or NULL. */
const taas_param_entry *taas_model_plan_find(const taas_model_plan *p, const char *key);

#endif
