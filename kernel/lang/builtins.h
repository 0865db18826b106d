/* The builtin table: one row per builtin, the one source of truth for argument checks,
 * completion, inspection, help() and docs/language.md. Nothing about a builtin is
 * written anywhere else. */
#ifndef TAAS_BUILTINS_H
#define TAAS_BUILTINS_H

#include <stddef.h>

#include "error.h"
#include "value.h"

typedef enum taas_kind {
    TAAS_K_ACTION,      /* print, help, sleep, register, ... */
    TAAS_K_LAYER,       /* nn.Conv2d, nn.Sequential, ... */
    TAAS_K_LOSS,        /* nn.NLLLoss, ... */
    TAAS_K_OPTIMIZER,   /* optim.Adadelta, ... */
    TAAS_K_SCHEDULER,   /* optim.lr_scheduler.StepLR, ... */
    TAAS_K_DATASET,     /* datasets.FashionMNIST, ... */
    TAAS_K_TRANSFORM,   /* transforms.ToTensor, transforms.Compose, ... */
    TAAS_K_LOADER,      /* torch.utils.data.DataLoader */
    TAAS_K_CONFIG,      /* transformers.GPT2Config */
} taas_kind;

typedef enum taas_ptype {
    TAAS_P_ANY,
    TAAS_P_BOOL,
    TAAS_P_INT,
    TAAS_P_FLOAT,        /* accepts int too, kept as written (repr weight_decay=0); specs send a real */
    TAAS_P_STR,
    TAAS_P_INT_PAIR,     /* int or (int, int), e.g. kernel_size; stored as given */
    TAAS_P_FLOAT_SEQ,    /* float or tuple/list of floats, e.g. Normalize mean */
    TAAS_P_FLOAT_PAIR,   /* (float, float), e.g. Adam betas */
    TAAS_P_INT_SEQ,      /* list/tuple of ints, e.g. MultiStepLR milestones */
    TAAS_P_LAYER,
    TAAS_P_LOSS,
    TAAS_P_OPTIMIZER,
    TAAS_P_SCHEDULER,
    TAAS_P_DATASET,
    TAAS_P_TRANSFORM,
    TAAS_P_LOADER,
    TAAS_P_TRANSFORM_LIST, /* list of transforms: Compose([...]) */
    TAAS_P_CONFIG,       /* a model's configuration: GPT2Config(...) */
    TAAS_P_SCHEDULER_LIST, /* list of schedulers: SequentialLR([...]) */
} taas_ptype;

enum {
    TAAS_PF_NONE_OK = 1 << 0,  /* None is accepted besides the type */
    TAAS_PF_VARARGS = 1 << 1,  /* *args: collects the remaining positionals into a tuple */
    TAAS_PF_KWONLY = 1 << 2,   /* keyword only */
    TAAS_PF_VARKW = 1 << 3,    /* **kwargs: unknown keywords are accepted and dropped (nn.Identity) */
};

typedef struct taas_param {
    const char *name;
    taas_ptype type;
    const char *dflt;   /* default as cell source ("1", "None", "(0.9, 0.999)"); NULL = required */
    unsigned flags;
    double min, max;    /* inclusive numeric range checked by TaasValueError; min > max = none */
    const char *doc;    /* one line */
} taas_param;

struct taas_call_ctx;
typedef int (*taas_action_fn)(struct taas_call_ctx *cx, taas_value **args, taas_value **out);

typedef struct taas_builtin {
    const char *name;          /* "Conv2d" */
    const char *module;        /* "nn", "optim", "optim.lr_scheduler", "datasets", "transforms",
                                  "torch.utils.data", "models", "models.resnet", "taas" */
    taas_kind kind;
    const taas_param *params;  /* terminated by a row with name == NULL */
    const char *doc;           /* one paragraph */
    taas_action_fn action;     /* actions only */
    int waits;                 /* 1 when the action may suspend the cell (sleep, fit) */
    int bare;                  /* a statement of its name alone calls it (exit, quit), as
                                  IPython's autocall does for them */
    int method;                /* also a method of its first argument, PyTorch's spelling:
                                  net.requires_grad_(False) is requires_grad_(net, False) */
} taas_builtin;

/* All rows, in table order. */
const taas_builtin *const *taas_builtins_all(size_t *n);

/* Looks up a name as typed in a cell, with or without its module prefixes
 * (nn., torch.nn., optim., torch.optim., optim.lr_scheduler., datasets.,
 * torchvision.datasets., transforms., torchvision.transforms., torch.utils.data., models.,
 * torchvision.models., models.resnet., torchvision.models.resnet., taas.).
 * NULL when there is none. */
const taas_builtin *taas_builtin_find(const char *dotted);

/* Known names closest to `name` (edit distance), for "did you mean": writes up to one
 * suggestion into out; returns 1 when there is one. `extra` (may be NULL, NULL-terminated)
 * adds candidates such as session variables and keywords. */
int taas_builtin_suggest(const char *name, const char *const *extra, char *out, size_t n);

/* "Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, ...)" (malloc'd) */
char *taas_builtin_signature(const taas_builtin *b);
/* Signature, doc and (detail >= 1) the parameter table, as plain text (malloc'd). */
char *taas_builtin_help_text(const taas_builtin *b, int detail);
/* Markdown for docs/language.md, the whole table. */
char *taas_builtins_markdown(void);

/* What an action may touch while it runs; filled in by the interpreter. */
typedef struct taas_io taas_io;
typedef struct taas_call_ctx {
    const taas_io *io;          /* streams, displays, pager */
    struct taas_interp *interp; /* session state (registered loaders, variables) */
    taas_srcpos pos;            /* the call, for errors */
    double wait_until;          /* an action that suspends sets a monotonic deadline here */
    taas_error *err;
} taas_call_ctx;

/* One argument as written in the cell. */
typedef struct taas_arg {
    const char *keyword;   /* NULL for a positional argument */
    taas_value *value;     /* borrowed */
    taas_srcpos pos;       /* where the argument starts, for the caret */
} taas_arg;

/* Binds args to b's parameters (Python's rules: positionals, then keywords, defaults,
 * *args), checks types and ranges, then constructs the object or runs the action.
 * Errors: TaasTypeError for a missing/unknown/duplicate/ill-typed argument (with
 * "did you mean" for a misspelt keyword), TaasValueError for an out-of-range value;
 * the error points at the offending argument. Returns 0 and a new reference in *out. */
int taas_builtin_call(const taas_builtin *b, const taas_arg *args, size_t nargs,
                      taas_call_ctx *cx, taas_value **out);

#endif
