/* Private to the builtin table (value, builtins, args and the table_*.c files).
 * A row is a taas_builtin plus the few hooks that cannot be said declaratively:
 * cross-argument checks, a repr that is not "Name(params)", a known size. Everything
 * about one parameter (type, default, range, how it shows in repr) stays in its
 * taas_param, with the private flag bits below. */
#ifndef TAAS_ROWS_H
#define TAAS_ROWS_H

#include <math.h>
#include <stdint.h>

#include "buf.h"
#include "builtins.h"

/* Private taas_param.flags bits (the public ones in builtins.h use the low bits). */
enum {
    TAAS_PF_POS = 1u << 8,       /* shown positionally in repr: Conv2d(1, 32, ...) */
    TAAS_PF_SHOW_SET = 1u << 9,  /* shown in repr only when it differs from the default */
    TAAS_PF_HIDE = 1u << 10,     /* never shown in repr */
    TAAS_PF_BARE = 1u << 11,     /* shown with str(), not repr(): padding_mode=reflect */
    TAAS_PF_PAIR = 1u << 12,     /* an int is stored as (int, int), as torch's _pair does */
    TAAS_PF_SPEC_PAIR = 1u << 13, /* kept as given for repr, but an int goes to the spec as [n, n] */
    TAAS_PF_IGNORED = 1u << 15,  /* accepted and dropped, as torch's nn.Identity does its
                                    arguments: never in the spec */
};

/* Refinements of a parameter's type (bits 16..23 of flags): the accepted values and
 * their description live once, in args.c, and serve checks, messages and docs. */
typedef enum taas_subtype {
    TAAS_PX_NONE = 0,
    TAAS_PX_CONV_PADDING,   /* int, (int, int), 'valid' or 'same' */
    TAAS_PX_CONV_PADMODE,   /* 'zeros', 'reflect', 'replicate', 'circular' */
    TAAS_PX_CROP_PADDING,   /* int, (int, int) or (int, int, int, int) */
    TAAS_PX_CROP_PADMODE,   /* 'constant', 'edge', 'reflect', 'symmetric' */
    TAAS_PX_FILL,           /* number or tuple of numbers */
    TAAS_PX_REDUCTION,      /* 'mean', 'sum', 'none' */
    TAAS_PX_ANNEAL,         /* 'cos', 'linear' */
    TAAS_PX_INTERP,         /* 'nearest', 'bilinear', 'bicubic' */
    TAAS_PX_GELU,           /* 'none', 'tanh' */
    TAAS_PX_STREAM,         /* 'stdout', 'stderr' */
    TAAS_PX_URLS,           /* str or list of str */
    TAAS_PX_EVERY,          /* int or 'epoch' */
    TAAS_PX_OUTPUT_SIZE,    /* int or (int, int), whose items may be None (refused by the row) */
    TAAS_PX_MODEL,          /* a layer that is the model an action takes: said as "a model (...)" */
    TAAS_PX_GPT2_ACT,       /* 'gelu_new', 'gelu_pytorch_tanh', 'gelu' */
    TAAS_PX_SPLIT,          /* 'train', 'val' */
    TAAS_PX_PARAM_GROUPS,   /* 'nanogpt' */
    TAAS_PX_INTERVAL,       /* 'epoch', 'step' */
    TAAS_PX_PRECISION,      /* 'fp32', 'bf16' */
    TAAS_PX_COUNT
} taas_subtype;

#define TAAS_PX(code) ((unsigned)(code) << 16)
#define TAAS_PX_OF(flags) ((taas_subtype)(((flags) >> 16) & 0xFFu))

typedef struct taas_row taas_row;

/* Cross-argument checks and normalisation after binding (args in table order, each a
 * reference the hook may replace); where[i] is where argument i was written. */
typedef int (*taas_check_fn)(const taas_row *r, taas_value **args, const taas_srcpos *where,
                             taas_error *err);
/* The whole repr of an object whose form is not "Name(params)". */
typedef void (*taas_repr_fn)(const taas_value *v, taas_buf *out);
/* A count known before any data is read: len() of datasets and loaders, parameters of a
 * layer. Returns 1 and sets *n when known, 0 when not. */
typedef int (*taas_count_fn)(const taas_value *v, int64_t *n);

/* A module's children as torch's named_children() lists them: a Sequential's "0", "1",
 * ...; a ResNet's arguments; a block's, made from its arguments (derived: read-only). */
typedef struct taas_child {
    char name[24];
    taas_value *v;    /* a reference of the list's own */
    int derived;      /* made from the parent's arguments, not stored in it */
} taas_child;
typedef struct taas_children {
    taas_child *item;
    size_t n, cap;
    int failed;       /* out of memory: the list is short */
} taas_children;
/* Adds a child (v taken; NULL counts as out of memory). */
void taas_children_add(taas_children *c, const char *name, taas_value *v, int derived);
typedef void (*taas_children_fn)(const taas_value *v, taas_children *out);

struct taas_row {
    taas_builtin b;          /* first, so a row is found from its taas_builtin */
    taas_check_fn check;     /* NULL: nothing beyond each parameter's own checks */
    taas_repr_fn repr;       /* NULL: Name(params) by the parameter flags */
    taas_count_fn size;      /* len(); NULL: has no length */
    taas_count_fn nparams;   /* trainable parameters of a layer; NULL: none */
    taas_children_fn children; /* a module that holds modules (modules.c); NULL: a leaf */
    int modules;             /* shown as the summary of its modules, which its arguments make
                              * rather than hold (GPT-2's, from its config) */
};

/* The families, in table (and docs) order. */
extern const taas_row taas_rows_data[];
extern const size_t taas_rows_data_n;
extern const taas_row taas_rows_layers[];
extern const size_t taas_rows_layers_n;
extern const taas_row taas_rows_optim[];
extern const size_t taas_rows_optim_n;
extern const taas_row taas_rows_actions[];
extern const size_t taas_rows_actions_n;

/* The row of a builtin from the table; NULL for one that is not in it. */
const taas_row *taas_row_of(const taas_builtin *b);
size_t taas_param_count(const taas_builtin *b);
int taas_param_index(const taas_builtin *b, const char *name);
/* "int or (int, int)", "float or None": what a parameter accepts, in words. */
void taas_param_type_text(const taas_param *p, taas_buf *out);
/* The allowed strings of a parameter with a choice subtype, NULL-terminated, or NULL. */
const char *const *taas_param_choices(const taas_param *p);

/* Reads a default as written in the table ("(0.9, 0.999)", "'zeros'", "None"): numbers,
 * strings, True/False/None and tuples/lists of those. NULL when the text is not one. */
taas_value *taas_literal_parse(const char *src);
/* The value a parameter takes when not given, normalised as a given one would be; NULL
 * when out of memory (every default of the table reads: test_builtins). */
taas_value *taas_param_default(const taas_param *p);
/* Applies TAAS_PF_PAIR: 3 -> (3, 3). Takes v, returns a new reference (NULL: out of memory). */
taas_value *taas_param_normalize(const taas_param *p, taas_value *v);

/* The object's kind, or -1 when v is not a constructed builtin. */
int taas_value_kind(const taas_value *v);
int taas_value_is(const taas_value *v, const char *builtin_name);
/* Appends repr(v) / str(v). */
void taas_repr_to(const taas_value *v, taas_buf *out);
void taas_str_to(const taas_value *v, taas_buf *out);
/* The parameters of an object as its repr shows them: "1, 32, kernel_size=(3, 3)". */
void taas_repr_params(const taas_value *v, taas_buf *out);
/* A number (int or float) as a double; 0 when v is neither. */
double taas_value_number(const taas_value *v);
int taas_value_is_number(const taas_value *v);

/* Sets the error's hint to "<lead>. Signature: Name(...)" (lead may be NULL). */
void taas_sig_hint(taas_error *err, const taas_builtin *b, const char *lead);

/* Calls the builtin `name` from C, as a cell would (defaults, checks, normalisation):
 * positional arguments have kw NULL. Takes every value (a NULL one is out of memory).
 * NULL with err. */
typedef struct taas_karg {
    const char *kw;
    taas_value *v;
} taas_karg;
taas_value *taas_construct(const char *name, const taas_karg *a, size_t n, taas_error *err);

/* help(): every builtin by family with its first sentence (malloc'd). */
char *taas_help_overview(void);

/* A builtin's row, by name (table rows only). */
const taas_row *taas_row_named(const char *name);

/* 3 for 3.0, else Python's float repr: bounds in messages and docs. */
void taas_fmt_number(double x, char *out, size_t n);
/* ">= 1", "0 to 1", or nothing for a parameter without a range. */
void taas_param_range_text(const taas_param *p, taas_buf *out);

/* Ranges for taas_param.min/max. */
#define TAAS_NO_RANGE 1, 0
#define TAAS_AT_LEAST(x) (x), INFINITY
#define TAAS_BETWEEN(a, b) (a), (b)

#endif
