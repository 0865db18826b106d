/* Rows of the actions (module "taas") and what they do. An action writes through the
 * taas_io the interpreter hands it and never blocks: sleep() only sets a deadline. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "clock.h"
#include "dataview.h"
#include "errnames.h"
#include "fit.h"
#include "interp.h"
#include "modelview.h"
#include "modules.h"
#include "rows.h"
#include "utf8.h"

#define END {0}

static int no_io(taas_call_ctx *cx, const char *name) {
    taas_error_set(cx->err, TAAS_ERR_INTERNAL, cx->pos, "%s() has no output to write to here", name);
    taas_error_hint(cx->err, "this is a bug in taas; please report it");
    return -1;
}

/* ---- print ----------------------------------------------------------------------- */

static const taas_param PRINT_P[] = {
    {"values", TAAS_P_ANY, NULL, TAAS_PF_VARARGS, TAAS_NO_RANGE, "what to print, each as str() shows it"},
    {"sep", TAAS_P_STR, "' '", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "between values; None = ' '"},
    {"end", TAAS_P_STR, "'\\n'", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "after the last value; None = '\\n'"},
    {"file", TAAS_P_STR, "'stdout'", TAAS_PX(TAAS_PX_STREAM), TAAS_NO_RANGE, "the stream; sys.stdout and sys.stderr name them too"},
    END,
};

static int print_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (!cx->io || !cx->io->stream) return no_io(cx, "print");
    const taas_value *vals = a[0];
    const char *sep = a[1]->type == TAAS_V_STR ? a[1]->u.str.s : " ";
    const char *end = a[2]->type == TAAS_V_STR ? a[2]->u.str.s : "\n";
    taas_buf b = TAAS_BUF_INIT;
    for (size_t i = 0; i < vals->u.seq.n; i++) {
        if (i) taas_buf_puts(&b, sep);
        taas_str_to(vals->u.seq.items[i], &b);
    }
    taas_buf_puts(&b, end);
    char *text = taas_buf_take(&b);
    if (!text) return taas_value_oom(cx->err, cx->pos, "printing");
    if (text[0]) cx->io->stream(cx->io->ctx, a[3]->u.str.s, text);
    free(text);
    *out = taas_none();
    return 0;
}

/* ---- help ------------------------------------------------------------------------ */

static const taas_param HELP_P[] = {
    {"obj", TAAS_P_ANY, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "a builtin, a value made by one, or a name such as 'Conv2d'; None lists them all"},
    END,
};

static int help_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (!cx->io || !cx->io->page) return no_io(cx, "help");
    const taas_value *o = a[0];
    const taas_builtin *b = NULL;
    char *text = NULL;
    if (o->type == TAAS_V_NONE) {
        text = taas_help_overview();
    } else if (o->type == TAAS_V_BUILTIN) {
        b = o->u.fn;
    } else if (o->type == TAAS_V_OBJECT) {
        b = o->u.obj.def;
    } else if (o->type == TAAS_V_STR) {
        b = taas_builtin_find(o->u.str.s);
        if (!b) {
            taas_error_set(cx->err, TAAS_ERR_NAME, cx->pos, "help(): no builtin is named '%s'", o->u.str.s);
            char sug[128];
            if (taas_builtin_suggest(o->u.str.s, NULL, sug, sizeof sug))
                taas_error_hint(cx->err, "did you mean '%s'? help() lists every builtin", sug);
            else
                taas_error_hint(cx->err, "help() lists every builtin");
            return -1;
        }
    } else {
        const char *t = taas_value_type_name(o);
        taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "help() has nothing to say about %s %s value",
                       strchr("aeiouAEIOU", t[0]) ? "an" : "a", t);
        taas_error_hint(cx->err, "give it a builtin or its name: help(Conv2d), help('Conv2d'), or help() for all");
        return -1;
    }
    if (b) text = taas_builtin_help_text(b, 1);
    json_t *data = text ? json_pack("{s:s}", "text/plain", text) : NULL;
    free(text);
    if (!data) return taas_value_oom(cx->err, cx->pos, "writing the help");
    cx->io->page(cx->io->ctx, data);
    *out = taas_none();
    return 0;
}

/* ---- display, clear_output ------------------------------------------------------- */

static const taas_param DISPLAY_P[] = {
    {"objs", TAAS_P_ANY, NULL, TAAS_PF_VARARGS, TAAS_NO_RANGE, "values to show, each as its rich form (a Sequential as a table)"},
    {"display_id", TAAS_P_STR, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "names the output so that a later display(..., update=True) replaces it"},
    {"update", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "replace the output named display_id instead of adding one"},
    END,
};

static int display_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err) {
    (void)r;
    if (a[2]->u.b && a[1]->type == TAAS_V_NONE) {
        taas_error_set(err, TAAS_ERR_VALUE, w[2], "display() update=True needs a display_id");
        taas_error_hint(err, "name the output when you first show it, display(x, display_id='status'), "
                             "then update it with display(y, display_id='status', update=True)");
        return -1;
    }
    return 0;
}

static int display_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (!cx->io || !cx->io->display) return no_io(cx, "display");
    const char *id = a[1]->type == TAAS_V_STR ? a[1]->u.str.s : NULL;
    for (size_t i = 0; i < a[0]->u.seq.n; i++) {
        /* a dataset or DataLoader asks the probe for what it shows */
        json_t *b = taas_data_mimebundle(cx->interp, a[0]->u.seq.items[i], cx->err);
        if (!b) {
            if (cx->err->pos.line == 0) cx->err->pos = cx->pos;
            return -1;
        }
        cx->io->display(cx->io->ctx, b, json_object(), id, a[2]->u.b);
    }
    *out = taas_none();
    return 0;
}

static const taas_param CLEAR_P[] = {
    {"wait", TAAS_P_BOOL, "False", 0, TAAS_NO_RANGE, "clear only when the next output arrives (avoids flicker)"},
    END,
};

static int clear_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (!cx->io || !cx->io->clear_output) return no_io(cx, "clear_output");
    cx->io->clear_output(cx->io->ctx, a[0]->u.b);
    *out = taas_none();
    return 0;
}

/* ---- sleep, len ------------------------------------------------------------------ */

static const taas_param SLEEP_P[] = {
    {"seconds", TAAS_P_FLOAT, NULL, 0, TAAS_BETWEEN(0, 86400), "how long to wait"},
    END,
};

static int sleep_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    cx->wait_until = taas_now() + taas_value_number(a[0]);
    *out = taas_none();
    return 0;
}

static const taas_param LEN_P[] = {
    {"obj", TAAS_P_ANY, NULL, 0, TAAS_NO_RANGE, "a str, tuple, list, Sequential, Compose, dataset or DataLoader"},
    END,
};

static int len_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    const taas_value *o = a[0];
    int64_t n = 0;
    int known = 1;
    if (o->type == TAAS_V_STR)
        n = (int64_t)taas_utf8_count(o->u.str.s, o->u.str.len);
    else if (o->type == TAAS_V_TUPLE || o->type == TAAS_V_LIST)
        n = (int64_t)o->u.seq.n;
    else if (o->type == TAAS_V_OBJECT) {
        const taas_row *r = taas_row_of(o->u.obj.def);
        if (cx->interp && taas_data_dataset_of(o)) {
            /* the size the value knows, else the probe's: every dataset kind has a len() */
            if (taas_data_len(cx->interp, o, &n, cx->err)) {
                if (cx->err->pos.line == 0) cx->err->pos = cx->pos;
                return -1;
            }
            *out = taas_int(n);
            return 0;
        }
        if (!r || !r->size) {
            taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "object of type '%s' has no len()",
                           taas_value_type_name(o));
            taas_error_hint(cx->err, "len() works on str, tuple, list, Sequential, Compose, datasets and DataLoader");
            return -1;
        }
        known = r->size(o, &n);
    } else {
        taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "object of type '%s' has no len()", taas_value_type_name(o));
        taas_error_hint(cx->err, "len() works on str, tuple, list, Sequential, Compose, datasets and DataLoader");
        return -1;
    }
    if (!known) {
        int loader = taas_value_kind(o) == TAAS_K_LOADER;
        taas_error_set(cx->err, TAAS_ERR_TYPE, cx->pos, "len() of this %s is not known before its data is read",
                       taas_value_type_name(o));
        taas_error_hint(cx->err, "%s", loader ? "its dataset's size is unknown: give WebDataset a length=..., "
                                                "or use a dataset of known size"
                                              : "give WebDataset a length=...; an NpyDataset's size is read by the loaders");
        return -1;
    }
    *out = taas_int(n);
    return 0;
}

/* ---- show ------------------------------------------------------------------------ */

static const taas_param GENERATE_P[] = {
    {"model", TAAS_P_LAYER, NULL, TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "a trained model of tokens (GPT2LMHeadModel, ...) with weights"},
    {"prompt", TAAS_P_ANY, NULL, 0, TAAS_NO_RANGE, "a str for a byte-level model (a vocabulary of 256), else a list of token ids"},
    {"max_new_tokens", TAAS_P_INT, "200", 0, TAAS_BETWEEN(0, 1 << 20), "how many tokens to add"},
    {"temperature", TAAS_P_FLOAT, "1.0", 0, TAAS_AT_LEAST(1e-6), "the logits are divided by it: below 1 sharper, above 1 flatter"},
    {"top_k", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(1), "draw among the k likeliest tokens only; None: all"},
    {"seed", TAAS_P_INT, "0", 0, TAAS_AT_LEAST(0), "the draws' seed: the same seed gives the same text"},
    END,
};

static const taas_param SHOW_P[] = {
    {"data", TAAS_P_ANY, NULL, 0, TAAS_NO_RANGE, "a dataset, or a DataLoader (its dataset is shown)"},
    {"n", TAAS_P_INT, "16", 0, TAAS_BETWEEN(1, 256), "how many samples, 8 to a row"},
    {"seed", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(0), "None: the first n samples; an int: the first n of epoch 0's shuffled order with this seed (also the seed of random transforms)"},
    END,
};

/* ---- register, unregister -------------------------------------------------------- */

static const taas_param LOADER_ARG_P[] = {
    {"loader", TAAS_P_LOADER, NULL, 0, TAAS_NO_RANGE, "a DataLoader"},
    END,
};

/* The session reports without a place; the call is the place. */
static int placed(taas_call_ctx *cx) {
    if (cx->err->pos.line == 0) cx->err->pos = cx->pos;
    return -1;
}

static int register_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (taas_need_session(cx, "register")) return -1;
    if (taas_interp_register_loader(cx->interp, a[0], cx->err)) return placed(cx);
    *out = taas_none();
    return 0;
}

static int unregister_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    if (taas_need_session(cx, "unregister")) return -1;
    if (taas_interp_unregister_loader(cx->interp, a[0], cx->err)) return placed(cx);
    *out = taas_none();
    return 0;
}

/* ---- fit, evaluate, save, load (action_fit.c, action_weights.c) ------------------ */

static const taas_param FIT_P[] = {
    {"model", TAAS_P_LAYER, NULL, TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "the model to train (Sequential, ResNet, ...); it keeps the trained weights"},
    {"loader", TAAS_P_LOADER, NULL, 0, TAAS_NO_RANGE, "the training DataLoader"},
    {"epochs", TAAS_P_INT, "1", 0, TAAS_BETWEEN(1, TAAS_MAX_EPOCHS), "passes over the training data"},
    {"loss", TAAS_P_LOSS, NULL, 0, TAAS_NO_RANGE, "NLLLoss() after LogSoftmax, or CrossEntropyLoss()"},
    {"optimizer", TAAS_P_OPTIMIZER, NULL, 0, TAAS_NO_RANGE, "e.g. SGD(lr=0.1) or Adadelta(lr=1.0)"},
    {"scheduler", TAAS_P_SCHEDULER, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "a learning rate schedule, stepped as scheduler_interval says"},
    {"validate", TAAS_P_LOADER, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "a DataLoader evaluated after each epoch (val loss, val accuracy)"},
    {"seed", TAAS_P_INT, "0", 0, TAAS_AT_LEAST(0), "seeds the initial weights, shuffling and random transforms"},
    {"units", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(1), "samples to draw in all (a quick run); None: every epoch in full"},
    {"checkpoint_every", TAAS_P_ANY, "None", TAAS_PF_NONE_OK | TAAS_PX(TAAS_PX_EVERY), TAAS_AT_LEAST(1), "steps between checkpoints, or 'epoch'; None: by time, at most about 1 % of it"},
    {"resume", TAAS_P_STR, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "a checkpoint to go on from exactly (a path a stopped or failed fit printed)"},
    {"max_restarts", TAAS_P_INT, "3", 0, TAAS_AT_LEAST(0), "times a job resumes from its last checkpoint when a rank or its host dies"},
    {"clip_grad_norm", TAAS_P_FLOAT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(0),
     "torch.nn.utils.clip_grad_norm_'s max_norm, on the gradients summed over every rank; None: no clipping"},
    {"max_steps", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_BETWEEN(1, 1e15),
     "optimizer steps to train, as many epochs as they take (epochs is then ignored, as Hugging Face's Trainer does); None: epochs decide"},
    {"scheduler_interval", TAAS_P_STR, "None", TAAS_PF_NONE_OK | TAAS_PX(TAAS_PX_INTERVAL), TAAS_NO_RANGE,
     "'step': the scheduler steps after every optimizer step; 'epoch': after every epoch; None: 'step' for OneCycleLR, else 'epoch'"},
    {"accumulate", TAAS_P_INT, "1", 0, TAAS_BETWEEN(1, 1 << 20),
     "batches whose gradients add up to one optimizer step (gradient accumulation): the step's batch is accumulate x batch_size x ranks"},
    {"precision", TAAS_P_STR, "'fp32'", TAAS_PX(TAAS_PX_PRECISION), TAAS_NO_RANGE,
     "'bf16': a GPU's matrix products in bfloat16 on its tensor cores, summing in FP32, the weights and values FP32 in memory; the CPU computes in FP32"},
    END,
};

static const taas_param EVALUATE_P[] = {
    {"model", TAAS_P_LAYER, NULL, TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "a model with weights (from fit() or load())"},
    {"loader", TAAS_P_LOADER, NULL, 0, TAAS_NO_RANGE, "the DataLoader to measure on"},
    {"loss", TAAS_P_LOSS, "None", TAAS_PF_NONE_OK, TAAS_NO_RANGE, "None: NLLLoss() after a LogSoftmax, else CrossEntropyLoss()"},
    {"units", TAAS_P_INT, "None", TAAS_PF_NONE_OK, TAAS_AT_LEAST(1), "samples to use at most; None: all"},
    END,
};

static const taas_param FROM_PRETRAINED_P[] = {
    {"pretrained_model_name_or_path", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE,
     "a folder of config.json and model.safetensors, or a hub name found in Hugging Face's cache"},
    END,
};

static const taas_param SAVE_P[] = {
    {"model", TAAS_P_LAYER, NULL, TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "a model with weights"},
    {"path", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "the file to write, relative to the kernel's working directory"},
    END,
};

static const taas_param LOAD_P[] = {
    {"path", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "a safetensors file"},
    {"into", TAAS_P_LAYER, NULL, TAAS_PF_KWONLY | TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "the model that takes the weights"},
    {"strict", TAAS_P_BOOL, "True", TAAS_PF_KWONLY, TAAS_NO_RANGE,
     "True: the file has exactly the model's keys; False: the keys both have are loaded"},
    END,
};

static const taas_param JOBS_P[] = {
    END,
};

static const taas_param ATTACH_P[] = {
    {"job", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "the job's id as jobs() lists it, or the start of exactly one"},
    {"into", TAAS_P_ANY, "None", TAAS_PF_NONE_OK | TAAS_PF_KWONLY, TAAS_NO_RANGE, "the model that gets the trained weights; None: none does"},
    END,
};

static const taas_param CANCEL_P[] = {
    {"job", TAAS_P_STR, NULL, 0, TAAS_NO_RANGE, "the job's id as jobs() lists it, or the start of exactly one"},
    END,
};

/* ---- summary ---------------------------------------------------------------------- */

static const taas_param SUMMARY_P[] = {
    {"model", TAAS_P_LAYER, NULL, TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "a model (Sequential, ResNet, ...)"},
    {"input_size", TAAS_P_INT_SEQ, "None", TAAS_PF_NONE_OK, TAAS_BETWEEN(1, TAAS_MAX_DIM),
     "(C, H, W) or (N, C, H, W) for images, (F,) or (N, F) for features; None: the input the model has seen"},
    END,
};

static int summary_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    int32_t sample[3] = {0, 0, 0};
    int64_t batch = 0;
    const taas_value *in = a[1];
    if (in->type != TAAS_V_NONE) {
        size_t n = in->u.seq.n;
        if (n < 1 || n > 4) {
            taas_error_set(cx->err, TAAS_ERR_VALUE, cx->pos, "summary() input_size has %zu sizes; it takes 1 to 4",
                           n);
            taas_error_hint(cx->err, "give (C, H, W) or (N, C, H, W) for images, (F,) or (N, F) for features");
            return -1;
        }
        int64_t v[4];
        for (size_t i = 0; i < n; i++) v[i] = in->u.seq.items[i]->u.i;
        size_t first = n == 4 || n == 2 ? 1 : 0;  /* a leading batch size, as torchinfo takes it */
        if (first) batch = v[0];
        sample[0] = (int32_t)v[first];
        if (n - first == 3) {
            sample[1] = (int32_t)v[first + 1];
            sample[2] = (int32_t)v[first + 2];
        }
    }
    json_t *b = taas_model_summary(a[0], in->type == TAAS_V_NONE ? NULL : sample, batch, cx->err);
    if (!b) {
        cx->err->pos = cx->pos;
        /* without an input_size it fails only as a walk or an allocation does */
        if (in->type == TAAS_V_NONE || !strcmp(cx->err->ename, TAAS_ERR_MEMORY) ||
            !strcmp(cx->err->ename, TAAS_ERR_INTERRUPT))
            return -1;
        char *r = taas_value_repr(in);
        taas_error_prefix(cx->err, "summary() with input_size=%s: ", r);
        free(r);
        return -1;
    }
    if (cx->io && cx->io->display) cx->io->display(cx->io->ctx, b, json_object(), NULL, 0);
    else json_decref(b);
    *out = taas_none();
    return 0;
}

/* ---- requires_grad_ --------------------------------------------------------------- */

static const taas_param REQUIRES_GRAD_P[] = {
    {"module", TAAS_P_LAYER, NULL, TAAS_PX(TAAS_PX_MODEL), TAAS_NO_RANGE, "the model or layer (self, called as net.requires_grad_(...))"},
    {"requires_grad", TAAS_P_BOOL, "True", 0, TAAS_NO_RANGE, "False freezes its parameters; True lets them train"},
    END,
};

static int requires_grad_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    taas_module_requires_grad(a[0], a[1]->u.b);
    *out = taas_ref(a[0]);
    return 0;
}

/* ---- exit, quit ------------------------------------------------------------------- */

static const taas_param EXIT_P[] = {END};

static int exit_action(taas_call_ctx *cx, taas_value **a, taas_value **out) {
    (void)a;
    if (!cx->io || !cx->io->ask_exit) return no_io(cx, "exit");
    cx->io->ask_exit(cx->io->ctx);
    *out = taas_none();
    return 0;
}

#define ACTION(name_, params_, doc_, fn_, waits_) .b = {.name = name_, .module = "taas", .kind = TAAS_K_ACTION, .params = params_, .doc = doc_, .action = fn_, .waits = waits_}
#define EXIT_ROW(name_) \
    .b = {.name = name_, .module = "taas", .kind = TAAS_K_ACTION, .params = EXIT_P, .doc = EXIT_DOC, \
          .action = exit_action, .bare = 1}
#define EXIT_DOC "Ends the session in a console: the cell's reply asks the front end to end it, " \
    "and jupyter console then shuts the kernel down. Typed alone, without (), it is called, " \
    "as in IPython. Notebook and JupyterLab ignore that request: there, Kernel > Shut Down " \
    "ends the kernel."


const taas_row taas_rows_actions[] = {
    {ACTION("print", PRINT_P,
            "Writes the values, as str() shows them, separated by sep and followed by end, to "
            "the cell's stdout or stderr.", print_action, 0)},
    {ACTION("help", HELP_P,
            "Shows a builtin's signature, doc and parameters in the pager; help() lists every "
            "builtin by family.", help_action, 0)},
    {ACTION("display", DISPLAY_P,
            "Shows each value as a rich output, as a cell's last expression is shown; with a "
            "display_id, a later display(..., update=True) replaces it in place.", display_action, 0),
     .check = display_check},
    {ACTION("clear_output", CLEAR_P, "Clears the cell's output so far.", clear_action, 0)},
    {EXIT_ROW("exit")},
    {EXIT_ROW("quit")},
    {ACTION("sleep", SLEEP_P,
            "Waits, without blocking the kernel: the stop button ends the wait with "
            "KeyboardInterrupt.", sleep_action, 1)},
    {ACTION("len", LEN_P,
            "The number of items: code points of a str, items of a tuple or list, layers of a "
            "Sequential, transforms of a Compose, samples of a dataset, batches per epoch of a "
            "DataLoader (rounded up, or down with drop_last=True).", len_action, 0)},
    {ACTION("show", SHOW_P,
            "Shows n samples of a dataset as one PNG image, each with its label (the class "
            "name where the dataset has them) under it, and a text/plain list of the labels. "
            "Images pass through the dataset's transform with a trailing Normalize left out "
            "(which undoes it exactly); where a Normalize sits earlier in the chain they are "
            "shown as decoded. A taas-worker process reads the data while the kernel stays "
            "free: the stop button ends the wait with KeyboardInterrupt.", taas_show_action, 1),
     .check = taas_show_check},
    {ACTION("generate", GENERATE_P,
            "New tokens from a trained model of tokens, as nanoGPT samples: the context's last block_size "
            "tokens in, the next drawn from the softmax of the last position's logits over temperature, among "
            "the top_k likeliest when given. A byte-level model (trained on a TextFile) takes and returns a "
            "str (the prompt followed by nothing: the result is the new text alone); another takes and "
            "returns token ids. It runs in a taas-worker process while the kernel stays free: the stop button "
            "ends it with KeyboardInterrupt. The same seed gives the same text.", taas_generate_action, 1)},
    {ACTION("register", LOADER_ARG_P,
            "Registers a DataLoader: cells with #pragma taas then run it on CPU loader workers "
            "(--cpus per loader) that stream its batches to the GPU ranks. Registering the "
            "same loader twice does nothing.", register_action, 0)},
    {ACTION("unregister", LOADER_ARG_P,
            "Undoes register(): the ranks prepare this loader's batches themselves again.",
            unregister_action, 0)},
    {ACTION("fit", FIT_P,
            "Trains the model on a taas-worker process and returns its History: per epoch the "
            "train loss, val loss, val accuracy, time and samples/s, shown as a table. Before "
            "anything starts, the model is checked against the loader's samples: a shape error "
            "names the layer, and a classifier needs an output for every class. While it runs, "
            "a line per epoch and a step line about once a second. The model keeps the trained "
            "weights (a safetensors file in a temporary job folder). The stop button ends "
            "training after the step in progress (within about 1 s): the model keeps the weights "
            "of the last completed step, the cell ends with KeyboardInterrupt and an assignment "
            "such as h = fit(...) is not made. A nan or inf loss stops it with an error naming "
            "the epoch and step. In a #pragma taas --detach cell the job outlives the kernel: it "
            "runs under a coordinator of its own, the cell shows it as attach() does, and the "
            "stop button only stops the showing.", taas_fit_action, 1),
     .check = taas_fit_check},
    {ACTION("evaluate", EVALUATE_P,
            "Measures a model with weights on a DataLoader, on a taas-worker process, and returns "
            "an Evaluation: the mean loss, the accuracy (share of samples whose highest output is "
            "the label) and the number of samples. A model without weights is a TaasValueError: "
            "fit it first, or load weights.", taas_evaluate_action, 1),
     .check = taas_fit_check},
    {ACTION("jobs", JOBS_P,
            "Lists this user's detached jobs (fits of #pragma taas --detach cells), the newest "
            "first: id, state (starting, running, done, failed, cancelled, or lost when its "
            "coordinator is gone), progress, model, start time (UTC) and plan (the backend, its "
            "hosts or Slurm job id).", taas_jobs_action, 0)},
    {ACTION("attach", ATTACH_P,
            "Shows a detached job in this cell: everything it has printed, its training display "
            "where it stands, and what comes until it ends; then returns its History, and into= "
            "gets its trained weights (also a job that ended long ago: its weights and History "
            "stay in its folder). A job that failed or was cancelled is an error that says how. "
            "The stop button only stops the showing: the job keeps running.", taas_attach_action, 1)},
    {ACTION("cancel", CANCEL_P,
            "Stops a detached job as the stop button stops an attached fit: it ends after the "
            "step in progress, keeping the weights of its last completed step, and every process "
            "of the job ends. A job that has already ended is an error.", taas_cancel_action, 1)},
    {ACTION("save", SAVE_P,
            "Copies the model's trained weights, a safetensors file with PyTorch's state_dict "
            "names, to path: torch.nn.Sequential.load_state_dict reads it. A model without "
            "trained weights is a TaasValueError (\"net has no trained weights yet: fit it "
            "first, or load weights\").", taas_save_action, 0),
     .check = taas_fit_check},
    {ACTION("summary", SUMMARY_P,
            "Shows the model's summary, as torchinfo's summary(): each layer with its output shape "
            "and parameters, the totals and the memory of the parameters and activations. The "
            "output shapes need the input's: input_size gives it, else the one the model was "
            "fitted or evaluated on. Displaying a Sequential shows the same summary.",
            summary_action, 0),
     .check = taas_fit_check},
    {ACTION("requires_grad_", REQUIRES_GRAD_P,
            "PyTorch's Module.requires_grad_, called as a method: net.requires_grad_(False) freezes "
            "the model's parameters (fit() neither updates them nor gives them optimizer state) "
            "and returns the model. The flag goes on the module and on every module it holds, so "
            "a part assigned afterwards (net.fc = Linear(512, 10)) trains, as in PyTorch; "
            "net.fc.requires_grad_(True) unfreezes a part. The model's summary counts the "
            "parameters that train. requires_grad_(net, False) is the same call.",
            requires_grad_action, 0),
     .b.method = 1},
    {.b = {.name = "from_pretrained", .module = "transformers.GPT2LMHeadModel", .kind = TAAS_K_ACTION,
           .params = FROM_PRETRAINED_P, .action = taas_from_pretrained_action,
           .doc = "transformers.GPT2LMHeadModel.from_pretrained(name_or_path): GPT-2 with the weights of a "
                  "folder that Hugging Face's save_pretrained() wrote (config.json, model.safetensors), "
                  "or of Hugging Face's local cache by the hub's name ('gpt2', 'distilgpt2'; "
                  "$HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub, the snapshot refs/main "
                  "names). Nothing is downloaded: a model that is not at hand is a TaasIOError saying "
                  "where it was looked for. config.json's keys that change nothing for training "
                  "(architectures, task_specific_params, ...) are passed over."}},
    {ACTION("load", LOAD_P,
            "Gives the model the weights of a safetensors file (from save(), or a PyTorch "
            "state_dict saved with safetensors), as torch's load_state_dict: every tensor name, "
            "dtype and shape is checked against the model first, and a file that does not fit is "
            "an error naming the keys. With strict=False the keys both have are loaded (their "
            "shapes must match), the file's other keys are ignored and the model's others keep "
            "its weights, or without any are initialised from the seed when it trains (its "
            "weights are partial: save() refuses them until fit()). Returns the keys as torch "
            "does: _IncompatibleKeys(missing_keys=[...], unexpected_keys=[...]), or "
            "<All keys matched successfully>. The next fit() starts from these weights.",
            taas_load_action, 0),
     .check = taas_load_check},
};
const size_t taas_rows_actions_n = sizeof taas_rows_actions / sizeof *taas_rows_actions;
