/* Values of the cell language. Reference counted; whoever holds a reference drops it
 * with taas_unref. Constructed builtins (layers, datasets, ...) are TAAS_V_OBJECT: the
 * builtin's table row plus its bound arguments, one per parameter, defaults filled in. */
#ifndef TAAS_VALUE_H
#define TAAS_VALUE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Walks over values are bounded: a cell can nest lists through variables (v = [v]) or
 * share them (v = [v, v]) far past what any recursion or output may follow. */
#define TAAS_VALUE_MAX_DEPTH 100                   /* repr shows deeper containers as [...] */
#define TAAS_VALUE_MAX_NODES ((size_t)1 << 22)    /* values in an object's spec, as a tree */
#define TAAS_REPR_MAX_BYTES ((size_t)1 << 20)     /* text of one repr / str, then an elision note */

struct taas_builtin;

typedef enum taas_vtype {
    TAAS_V_NONE,
    TAAS_V_BOOL,
    TAAS_V_INT,
    TAAS_V_FLOAT,
    TAAS_V_STR,
    TAAS_V_TUPLE,
    TAAS_V_LIST,
    TAAS_V_OBJECT,   /* a constructed builtin: Conv2d(...), FashionMNIST(...), ... */
    TAAS_V_BUILTIN,  /* a builtin itself, not called: `Conv2d`, `print` */
    TAAS_V_RESULT,   /* what an action returns: a History from fit(), an Evaluation (result.c) */
} taas_vtype;

typedef struct taas_value {
    int refs;
    taas_vtype type;
    struct taas_value *dead_next;  /* taas_unref's list of values to free */
    union {
        int b;
        int64_t i;
        double f;
        struct { char *s; size_t len; } str;            /* valid UTF-8, NUL-terminated */
        struct { struct taas_value **items; size_t n; } seq; /* TUPLE and LIST */
        struct {
            const struct taas_builtin *def;
            struct taas_value **args;   /* one per parameter of def, in table order */
            size_t nargs;
            char *weights;  /* a model's trained weights (safetensors path, malloc'd) or NULL */
            int weights_owned;  /* the file is the model's own (a fit's job folder, load()'s
                                   copy): it goes, with its folder, when the model lets go */
            int32_t sample[3];  /* a model's input sample once known (C, H, W; H = W = 0: C
                                   features); C == 0: not known yet */
            int requires_grad;  /* a module's requires_grad_(): 0 not set (as its parent's),
                                   1 True, -1 False; the spec carries it when set */
            int depth;     /* height of the object as a tree of values (1: no arguments) */
            size_t nodes;  /* values in that tree, shared ones counted each time (as the
                              spec writes them); both saturate past their bound */
        } obj;
        const struct taas_builtin *fn;
        struct {
            const char *kind;   /* "History" or "Evaluation" (static) */
            json_t *data;       /* History: an array of epoch objects; Evaluation: an object */
        } res;
    } u;
} taas_value;

taas_value *taas_none(void);
taas_value *taas_bool(int b);
taas_value *taas_int(int64_t i);
taas_value *taas_float(double f);
taas_value *taas_str(const char *s, size_t len);   /* copies; sanitizes invalid UTF-8 */
/* Room for bytes more of strings and sequences in the session (half the machine's memory,
 * or of its address-space limit): 0, or -1 with a TaasMemoryError naming what (e.g. "the
 * str") would have taken it. The values made are counted by their constructors. */
int taas_value_reserve(size_t bytes, const char *what, taas_error *err);
/* An allocation a cell needed failed: -1 with a TaasMemoryError "out of memory while <doing>"
 * at pos and what to do. Every constructor below returns NULL when it cannot allocate. */
int taas_value_oom(taas_error *err, taas_srcpos pos, const char *doing);
/* jansson's allocations are counted (taas_json_init, called by taas_interp_new): a JSON
 * document built since taas_json_mark() lost a part when taas_json_lost(mark) (jansson
 * drops what it cannot allocate; a spec that lost a parameter must not reach a worker). */
void taas_json_init(void);
size_t taas_json_mark(void);
int taas_json_lost(size_t mark);
taas_value *taas_str0(const char *s);
/* An empty tuple or list of n slots; the caller fills u.seq.items[i] (each owned). */
taas_value *taas_tuple_new(size_t n);
taas_value *taas_list_new(size_t n);
taas_value *taas_builtin_value(const struct taas_builtin *fn);
/* Takes ownership of args[0..nargs) (not when it returns NULL). Measures the object
 * (u.obj.depth, u.obj.nodes). */
taas_value *taas_object_new(const struct taas_builtin *def, taas_value **args, size_t nargs);
/* 0, or -1 with a TaasValueError at pos when the object nests deeper than
 * TAAS_VALUE_MAX_DEPTH or holds more than TAAS_VALUE_MAX_NODES values: every object is
 * checked when it is made, so walks over objects (spec, summary) stay bounded. */
int taas_object_check_size(const taas_value *obj, taas_srcpos pos, taas_error *err);
/* Measures the object again (u.obj.depth, u.obj.nodes) after its arguments changed (a part
 * of a model replaced, modules.c). */
void taas_object_remeasure(taas_value *obj);

/* Takes the reference to data (NULL data: NULL); kind is a static string (result.c knows the kinds). */
taas_value *taas_result_new(const char *kind, json_t *data);

taas_value *taas_ref(taas_value *v);
/* Drops a reference; what it frees is released without recursion, however deep. */
void taas_unref(taas_value *v);
/* Forgets a model's weights path (malloc'd, taken; may be NULL). A file the model owns (a
 * fit's job folder, load()'s private copy) goes, with its folder (which stays only while
 * something else is in it: a stopped job's checkpoints). A file it does not own (a detached
 * job's, in the jobs folder) stays. Ownership is the value's flag, never a guess from the
 * path. */
void taas_weights_drop(char *path, int owned);

/* A walk over values: every walk a cell can start (argument checks, equality, the spec) takes its
 * steps from one budget, so that a value shared as a DAG (v1 = [v0, v0], ... v40: 2^40
 * items as a tree, 41 in memory) or simply too large cannot hold the kernel: it visits each
 * shared value once where the answer allows, counts every step, stops with a TaasValueError
 * when the budget is spent and with KeyboardInterrupt when the kernel is asked to stop (the
 * stop button's SIGINT, SIGTERM: the fd of taas_walk_set_interrupt_fd becomes readable),
 * which it polls every TAAS_WALK_POLL steps. repr is bounded by its output (TAAS_REPR_MAX_BYTES),
 * an object by taas_object_check_size when made, and taas_unref by the values it frees. */
#define TAAS_WALK_STEPS ((size_t)1 << 25)   /* steps of one walk; TAAS_WALK_STEPS in the environment: another */
#define TAAS_WALK_POLL 4096

typedef struct taas_walk {
    const char *what;   /* the operation, for the error: "checking len() argument 'obj'" */
    size_t steps, budget;
    taas_error *err;
    int failed;         /* a step failed (err says why): the walk ends */
} taas_walk;

void taas_walk_begin(taas_walk *w, const char *what, taas_error *err);
/* Takes n steps: 0, or -1 with w->err set (budget spent, interrupted). */
int taas_walk_step(taas_walk *w, size_t n);
/* The walk could not allocate: -1 with a TaasMemoryError "out of memory while <what>". */
int taas_walk_oom(taas_walk *w);
/* The descriptor that is readable when the kernel is asked to stop (-1: none), and a check
 * that says so (NULL: none; interp.h's taas_interp_set_interrupt_check). */
void taas_walk_set_interrupt_fd(int fd);
void taas_walk_set_interrupt_check(int (*check)(void *ctx), void *ctx);
/* Calls visit once for every distinct value reachable from v through tuples and lists (an
 * object's arguments were checked when it was made), v first; a step per item
 * looked at. visit returns 0 to go on, 1 to stop the walk there. 0: all visited; 1: visit
 * stopped it; -1: the walk failed (w->err: budget, interrupt, out of memory). */
int taas_walk_values(const taas_value *v, int (*visit)(const taas_value *v, void *ctx), void *ctx,
                     taas_walk *w);

/* Python's notion of truth and equality, for the few places the language needs them. */
int taas_value_truthy(const taas_value *v);
/* 1 equal, 0 unequal, -1 when the walk failed (w->err). Each pair of values is compared
 * once, so two equal DAGs cost their sizes, not their sizes as trees; any depth is fine. */
int taas_value_equal_walk(const taas_value *a, const taas_value *b, taas_walk *w);
/* The same with a walk of its own; a walk that fails counts as unequal. */
int taas_value_equal(const taas_value *a, const taas_value *b);

/* Argument of an object by parameter name (borrowed), NULL when there is none. */
taas_value *taas_object_arg(const taas_value *obj, const char *param);

/* Python's type name for builtins values ("int", "str", "tuple"); the builtin's name
 * for objects ("Conv2d"); "builtin" for uncalled builtins; a result's kind ("History"). */
const char *taas_value_type_name(const taas_value *v);

/* repr() as Python/PyTorch prints it: 'a', 1e-05, (3, 3), Conv2d(1, 32, kernel_size=(3, 3),
 * stride=(1, 1)), Sequential listed by index. malloc'd. Bounded: containers deeper than
 * TAAS_VALUE_MAX_DEPTH show as [...] / (...) / Name(...), and the text stops at
 * TAAS_REPR_MAX_BYTES with a note "... (repr cut at 1 MiB; the value is bigger)". */
char *taas_value_repr(const taas_value *v);
/* str(): like repr, but a string is itself (what print shows). malloc'd; bounded alike. */
char *taas_value_str(const taas_value *v);
/* Python's float repr: shortest string that reads back to the same double. */
void taas_float_repr(double f, char *out, size_t n);

/* The Jupyter mime bundle for an execute_result or display_data: always text/plain,
 * text/html where a table reads better. New reference; NULL when out of memory. */
json_t *taas_value_mimebundle(const taas_value *v);

/* The JSON spec the workers receive: {"type": "Conv2d", "in_channels": 1, ...} with
 * every parameter present (defaults filled). Plain values map to JSON scalars/arrays.
 * New reference; NULL when out of memory (never a spec that lost a part). Objects are bounded when made (taas_object_check_size); a plain
 * container deeper than TAAS_VALUE_MAX_DEPTH writes null there rather than recurse. */
json_t *taas_value_spec(const taas_value *v);
/* The same as one walk (taas_walk: its steps, the interrupt): NULL with w->err set. */
json_t *taas_value_spec_walk(const taas_value *v, taas_walk *w);

#endif
