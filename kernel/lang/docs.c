/* Text about the builtins, all read from the table: help() and inspection text, the
 * help() overview, and docs/language.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "rows.h"

static const struct {
    taas_kind kind;
    const char *title;   /* section title */
    const char *noun;    /* "a layer" */
    const char *intro;   /* what the family's values are and how they print */
} FAMILIES[] = {
    {TAAS_K_DATASET, "Datasets", "dataset",
     "A dataset names where samples come from; the loader workers read it, the kernel never "
     "does. Each prints as torchvision prints it: name, number of datapoints (when known "
     "without reading), root or source, split, and its transforms."},
    {TAAS_K_TRANSFORM, "Transforms", "transform",
     "Transforms run in the loader workers, per sample. Random ones draw from a generator "
     "seeded by (seed, epoch, sample index), so every run sees the same augmentations. They "
     "print as torchvision prints them; Compose lists one transform per line."},
    {TAAS_K_LOADER, "Data loading", "data loader",
     "A DataLoader says how a dataset becomes batches: their size, the shuffling, the last "
     "partial batch. A registered one (register(loader)) runs on the CPU loader workers of a "
     "#pragma taas cell; len() gives its batches per epoch when the dataset's size is known."},
    {TAAS_K_LAYER, "Layers", "layer",
     "Layers print exactly as PyTorch prints them, and Sequential lists its layers by index. "
     "A Sequential shown as a cell's result is also a table of its layers with their "
     "trainable parameter counts. Argument ranges (channels >= 1, 0 <= p <= 1, ...) are "
     "checked when the layer is made, before any data is read."},
    {TAAS_K_CONFIG, "Model configurations", "configuration",
     "A configuration holds a model's sizes and settings under Hugging Face's names and defaults, "
     "as transformers.GPT2Config does; the model is built from it: GPT2LMHeadModel(GPT2Config(n_layer=6)). "
     "It prints as a call with the settings that differ from the defaults."},
    {TAAS_K_LOSS, "Losses", "loss",
     "A loss prints as PyTorch prints it, e.g. NLLLoss(), with any setting that differs "
     "from its default added: CrossEntropyLoss(label_smoothing=0.1). Settings that PyTorch "
     "takes after unsupported ones (weight, size_average, reduce) are keyword-only."},
    {TAAS_K_OPTIMIZER, "Optimizers", "optimizer",
     "PyTorch's optimizers without their first argument: fit() gives the optimizer the "
     "model's parameters, so write optimizer=Adadelta(lr=1.0). An optimizer prints as a call "
     "with every setting: Adadelta(lr=1.0, rho=0.9, eps=1e-06, weight_decay=0)."},
    {TAAS_K_SCHEDULER, "Learning-rate schedulers", "scheduler",
     "PyTorch's schedulers without their optimizer argument: fit() attaches the scheduler "
     "to its optimizer. A scheduler prints as a call with every setting: "
     "StepLR(step_size=1, gamma=0.7)."},
    {TAAS_K_ACTION, "Actions", "action",
     "Actions do something rather than make a value; they are in module taas and are found "
     "with or without the taas. prefix."},
};
#define N_FAMILIES (sizeof FAMILIES / sizeof *FAMILIES)

static int family_of(taas_kind k) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (FAMILIES[i].kind == k) return (int)i;
    return 0;
}

/* Greedy wrap at `width` columns; every line starts with `indent` spaces. */
static void wrap(taas_buf *out, const char *text, int indent, int width) {
    int col = 0;
    const char *p = text;
    if (!p) {  /* a text that could not be made: out of memory */
        out->failed = 1;
        return;
    }
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t w = strcspn(p, " ");
        if (col > indent && col + 1 + (int)w > width) {
            taas_buf_putc(out, '\n');
            col = 0;
        }
        if (col == 0) {
            taas_buf_printf(out, "%*s", indent, "");
            col = indent;
        } else {
            taas_buf_putc(out, ' ');
            col++;
        }
        taas_buf_add(out, p, w);
        col += (int)w;
        p += w;
    }
}

/* "int or (int, int), >= 1" */
static void param_summary(const taas_param *p, taas_buf *out) {
    taas_param_type_text(p, out);
    if (p->flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW)) taas_buf_puts(out, ", any number");
    taas_buf r = TAAS_BUF_INIT;
    taas_param_range_text(p, &r);
    if (r.len) taas_buf_printf(out, ", %s", r.data);
    taas_buf_free(&r);
}

char *taas_builtin_help_text(const taas_builtin *b, int detail) {
    taas_buf h = TAAS_BUF_INIT;
    char *sig = taas_builtin_signature(b);
    taas_buf_puts(&h, sig);
    taas_buf_puts(&h, "\n\n");
    free(sig);
    taas_buf_printf(&h, "%s.%s, %s %s.\n\n", b->module, b->name,
                    strchr("aeiou", FAMILIES[family_of(b->kind)].noun[0]) ? "an" : "a",
                    FAMILIES[family_of(b->kind)].noun);
    wrap(&h, b->doc, 0, 78);
    taas_buf_putc(&h, '\n');
    if (detail >= 1 && b->params && b->params[0].name) {
        taas_buf_puts(&h, "\nParameters:\n");
        for (size_t i = 0; b->params[i].name; i++) {
            const taas_param *p = &b->params[i];
            taas_buf_printf(&h, "  %s%s: ", (p->flags & TAAS_PF_VARKW) ? "**" : (p->flags & TAAS_PF_VARARGS) ? "*" : "", p->name);
            param_summary(p, &h);
            if (p->flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW))
                ;
            else if (p->dflt)
                taas_buf_printf(&h, "; default %s", p->dflt);
            else
                taas_buf_puts(&h, "; required");
            if (p->flags & TAAS_PF_KWONLY) taas_buf_puts(&h, "; keyword only");
            taas_buf_putc(&h, '\n');
            wrap(&h, p->doc, 6, 78);
            taas_buf_putc(&h, '\n');
        }
    }
    return taas_buf_take(&h);
}

/* The doc's first sentence: up to ". " (not "e.g. ") or the end. */
static void first_sentence(taas_buf *out, const char *doc) {
    const char *e = strstr(doc, ". ");
    while (e && e - doc >= 3 && (strncmp(e - 3, "e.g", 3) == 0 || strncmp(e - 3, "i.e", 3) == 0))
        e = strstr(e + 1, ". ");
    if (e)
        taas_buf_add(out, doc, (size_t)(e - doc) + 1);
    else
        taas_buf_puts(out, doc);
}

char *taas_help_overview(void) {
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    taas_buf h = TAAS_BUF_INIT;
    taas_buf_puts(&h, "taas builtins, by family. help(name) shows one in full: help(Conv2d) or "
                      "help('Conv2d').\nNames work with or without PyTorch's module prefix: "
                      "Conv2d, nn.Conv2d and\ntorch.nn.Conv2d are one builtin.\n");
    for (size_t f = 0; f < N_FAMILIES; f++) {
        taas_buf_printf(&h, "\n%s\n", FAMILIES[f].title);
        for (size_t i = 0; i < n; i++) {
            if (all[i]->kind != FAMILIES[f].kind) continue;
            taas_buf line = TAAS_BUF_INIT;
            first_sentence(&line, all[i]->doc);
            taas_buf_printf(&h, "  %-22s ", all[i]->name);
            taas_buf wrapped = TAAS_BUF_INIT;
            wrap(&wrapped, line.failed ? NULL : line.data, 25, 100);
            taas_buf_puts(&h, wrapped.failed || wrapped.len < 25 ? NULL : wrapped.data + 25);
            taas_buf_putc(&h, '\n');
            taas_buf_free(&wrapped);
            taas_buf_free(&line);
        }
    }
    return taas_buf_take(&h);
}

/* ---- docs/language.md ------------------------------------------------------------ */

static void md_cell(taas_buf *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|') taas_buf_putc(out, '\\');
        taas_buf_putc(out, *s);
    }
}

static const char MD_INTRO[] =
    "<!-- Generated by `taas-kernel --doc` from the builtin table (kernel/lang/table_*.c).\n"
    "     Do not edit: change the table and regenerate. -->\n"
    "# The taas language: builtins\n"
    "\n"
    "Every builtin of the cell language is one row of one table: its name, module, "
    "parameters (type, default, range) and doc. Argument checking, completion, inspection "
    "(Shift+Tab), `help()` and this page all read that table.\n"
    "\n"
    "**Names.** A builtin is found by its name alone or with its PyTorch module prefix: "
    "`Conv2d`, `nn.Conv2d` and `torch.nn.Conv2d` are the same builtin, as are `StepLR`, "
    "`optim.lr_scheduler.StepLR` and `torch.optim.lr_scheduler.StepLR`. The prefixes are "
    "`nn.`, `torch.nn.`, `optim.`, `torch.optim.`, `optim.lr_scheduler.`, "
    "`torch.optim.lr_scheduler.`, `lr_scheduler.`, `datasets.`, `torchvision.datasets.`, "
    "`transforms.`, `torchvision.transforms.`, `torch.utils.data.`, `models.`, "
    "`torchvision.models.`, `models.resnet.`, `torchvision.models.resnet.` and `taas.`; a "
    "prefix must be the builtin's own module (`nn.Adam` is an error).\n"
    "\n"
    "**Calls.** Arguments bind by Python's rules: positionals in order, then keywords, "
    "then defaults; a parameter marked *keyword only* must be named; `*name` collects the "
    "remaining positionals. Too many positionals, a missing or unknown argument (with a "
    "\"did you mean\"), an argument given twice or of the wrong type is a `TaasTypeError`; "
    "a value outside its range or choices is a `TaasValueError`. The error points at the "
    "argument and its hint gives the signature. A *float* parameter accepts an int and "
    "keeps it as written, so that reprs match PyTorch's (`weight_decay=0`).\n"
    "\n"
    "**Values.** A call to a builtin makes a value that prints like its PyTorch "
    "counterpart (see each family below) and that the workers receive as a JSON spec: "
    "`{\"type\": \"Conv2d\", \"in_channels\": 1, ...}` with every parameter present and "
    "defaults filled in; float parameters are JSON reals, float tuples and `(int, int)` "
    "pairs of layers are arrays, a `Sequential` is `{\"type\": \"Sequential\", "
    "\"layers\": [...]}`, a `ResNet` `{\"type\": \"ResNet\", \"conv1\": {...}, ..., "
    "\"fc\": {...}}` and a `Compose` is `{\"type\": \"Compose\", \"transforms\": "
    "[...]}`. A module frozen by `requires_grad_(False)` (or unfrozen) also carries "
    "`\"requires_grad\": false` (`true`).\n";

char *taas_builtins_markdown(void) {
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    taas_buf m = TAAS_BUF_INIT;
    taas_buf_puts(&m, MD_INTRO);
    taas_buf_puts(&m, "\n## Contents\n\n");
    for (size_t f = 0; f < N_FAMILIES; f++) {
        taas_buf_printf(&m, "- [%s](#", FAMILIES[f].title);
        for (const char *c = FAMILIES[f].title; *c; c++)
            taas_buf_putc(&m, *c == ' ' ? '-' : (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c));
        taas_buf_puts(&m, "):");
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            if (all[i]->kind != FAMILIES[f].kind) continue;
            taas_buf_printf(&m, "%s `%s`", first ? "" : ",", all[i]->name);
            first = 0;
        }
        taas_buf_putc(&m, '\n');
    }
    for (size_t f = 0; f < N_FAMILIES; f++) {
        taas_buf_printf(&m, "\n## %s\n\n%s\n", FAMILIES[f].title, FAMILIES[f].intro);
        for (size_t i = 0; i < n; i++) {
            const taas_builtin *b = all[i];
            if (b->kind != FAMILIES[f].kind) continue;
            char *sig = taas_builtin_signature(b);
            taas_buf_printf(&m, "\n### %s\n\n`%s.%s` · %s%s\n\n```python\n%s\n```\n\n%s\n", b->name, b->module,
                            b->name, FAMILIES[f].noun, b->waits ? " · waits (the kernel stays responsive)" : "",
                            sig, b->doc);
            free(sig);
            if (!b->params || !b->params[0].name) {
                taas_buf_puts(&m, "\nNo parameters.\n");
                continue;
            }
            taas_buf_puts(&m, "\n| Parameter | Type | Default | Range | Description |\n"
                              "| --- | --- | --- | --- | --- |\n");
            for (size_t k = 0; b->params[k].name; k++) {
                const taas_param *p = &b->params[k];
                taas_buf t = TAAS_BUF_INIT, r = TAAS_BUF_INIT;
                taas_param_type_text(p, &t);
                taas_param_range_text(p, &r);
                taas_buf_printf(&m, "| `%s%s` | ", (p->flags & TAAS_PF_VARKW) ? "**" : (p->flags & TAAS_PF_VARARGS) ? "*" : "", p->name);
                md_cell(&m, t.data);
                taas_buf_puts(&m, " | ");
                if (p->flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW)) {
                    taas_buf_puts(&m, "(any number)");
                } else if (p->dflt) {
                    taas_buf_putc(&m, '`');
                    md_cell(&m, p->dflt);
                    taas_buf_putc(&m, '`');
                } else {
                    taas_buf_puts(&m, "required");
                }
                if (p->flags & TAAS_PF_KWONLY) taas_buf_puts(&m, ", keyword only");
                taas_buf_puts(&m, " | ");
                md_cell(&m, r.len ? r.data : "");
                taas_buf_puts(&m, " | ");
                md_cell(&m, p->doc);
                taas_buf_puts(&m, " |\n");
                taas_buf_free(&t);
                taas_buf_free(&r);
            }
        }
    }
    return taas_buf_take(&m);
}
