/* The builtin table: the families' rows gathered in one order, lookup by name with or
 * without PyTorch's module prefixes, "did you mean" and signatures. */
#include "builtins.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "rows.h"
#include "suggest.h"

#define MAX_BUILTINS 256

/* The one global the design allows: the table, gathered once from the family files. */
static const taas_builtin *table[MAX_BUILTINS];
static size_t table_n;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void gather(const taas_row *rows, size_t n) {
    for (size_t i = 0; i < n && table_n < MAX_BUILTINS; i++) table[table_n++] = &rows[i].b;
}

static void build_table(void) {
    gather(taas_rows_data, taas_rows_data_n);
    gather(taas_rows_layers, taas_rows_layers_n);
    gather(taas_rows_optim, taas_rows_optim_n);
    gather(taas_rows_actions, taas_rows_actions_n);
}

const taas_builtin *const *taas_builtins_all(size_t *n) {
    pthread_once(&table_once, build_table);
    if (n) *n = table_n;
    return table;
}

const taas_row *taas_row_of(const taas_builtin *b) {
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i] == b) return (const taas_row *)b; /* b is the first member of its row */
    return NULL;
}

const taas_row *taas_row_named(const char *name) {
    size_t n;
    const taas_builtin *const *all = taas_builtins_all(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return (const taas_row *)all[i];
    return NULL;
}

size_t taas_param_count(const taas_builtin *b) {
    size_t n = 0;
    while (b->params && b->params[n].name) n++;
    return n;
}

int taas_param_index(const taas_builtin *b, const char *name) {
    for (size_t i = 0; b->params && b->params[i].name; i++)
        if (strcmp(b->params[i].name, name) == 0) return (int)i;
    return -1;
}

/* How a cell may spell each module (docs/design.md §2). */
static const struct {
    const char *module;
    const char *prefixes[4];
} ALIASES[] = {
    {"nn", {"nn.", "torch.nn.", NULL}},
    {"optim", {"optim.", "torch.optim.", NULL}},
    {"optim.lr_scheduler", {"optim.lr_scheduler.", "torch.optim.lr_scheduler.", "lr_scheduler.", NULL}},
    {"datasets", {"datasets.", "torchvision.datasets.", NULL}},
    {"transforms", {"transforms.", "torchvision.transforms.", NULL}},
    {"torch.utils.data", {"torch.utils.data.", NULL}},
    {"models", {"models.", "torchvision.models.", NULL}},
    {"models.resnet", {"models.resnet.", "torchvision.models.resnet.", NULL}},
    {"transformers", {"transformers.", NULL}},
    {"transformers.GPT2LMHeadModel", {"transformers.GPT2LMHeadModel.", "GPT2LMHeadModel.", NULL}},
    {"taas", {"taas.", NULL}},
};
#define N_ALIASES (sizeof ALIASES / sizeof *ALIASES)

/* The prefix of `dotted` naming a known module: its length, and the module. */
static size_t known_prefix(const char *dotted, const char **module) {
    size_t best = 0;
    for (size_t a = 0; a < N_ALIASES; a++)
        for (size_t k = 0; ALIASES[a].prefixes[k]; k++) {
            size_t l = strlen(ALIASES[a].prefixes[k]);
            if (l > best && strncmp(dotted, ALIASES[a].prefixes[k], l) == 0) {
                best = l;
                *module = ALIASES[a].module;
            }
        }
    return best;
}

const taas_builtin *taas_builtin_find(const char *dotted) {
    if (!dotted) return NULL;
    const char *module = NULL;
    size_t pl = known_prefix(dotted, &module);
    if (pl == 0 && strchr(dotted, '.')) return NULL;
    const taas_row *r = taas_row_named(dotted + pl);
    if (!r) return NULL;
    if (pl && strcmp(r->b.module, module) != 0) return NULL; /* nn.Adam is not a thing */
    return &r->b;
}

int taas_builtin_suggest(const char *name, const char *const *extra, char *out, size_t n) {
    if (!name || !out || n == 0) return 0;
    const char *module = NULL;
    size_t pl = known_prefix(name, &module);
    size_t nb;
    const taas_builtin *const *all = taas_builtins_all(&nb);
    size_t ne = 0;
    if (!pl)
        while (extra && extra[ne]) ne++;
    const char **cands = calloc(ne + nb + 1, sizeof *cands);
    if (!cands) return 0;
    size_t k = 0;
    for (size_t i = 0; i < ne; i++) cands[k++] = extra[i];
    for (size_t i = 0; i < nb; i++)
        if (!pl || strcmp(all[i]->module, module) == 0) cands[k++] = all[i]->name;
    int i = taas_suggest(name + pl, strlen(name + pl), cands, k);
    if (i >= 0 && strcmp(name + pl, cands[i]) == 0) i = -1; /* never "did you mean" itself */
    if (i >= 0) snprintf(out, n, "%.*s%s", (int)pl, name, cands[i]);
    free(cands);
    return i >= 0;
}

char *taas_builtin_signature(const taas_builtin *b) {
    taas_buf s = TAAS_BUF_INIT;
    taas_buf_printf(&s, "%s(", b->name);
    int star = 0;
    for (size_t i = 0; b->params && b->params[i].name; i++) {
        const taas_param *p = &b->params[i];
        if (i) taas_buf_puts(&s, ", ");
        if (p->flags & (TAAS_PF_VARARGS | TAAS_PF_VARKW)) {
            taas_buf_printf(&s, "%s%s", p->flags & TAAS_PF_VARKW ? "**" : "*", p->name);
            star = 1;
            continue;
        }
        if ((p->flags & TAAS_PF_KWONLY) && !star) {
            taas_buf_puts(&s, "*, ");
            star = 1;
        }
        taas_buf_puts(&s, p->name);
        if (p->dflt) taas_buf_printf(&s, "=%s", p->dflt);
    }
    taas_buf_putc(&s, ')');
    return taas_buf_take(&s);
}

void taas_fmt_number(double x, char *out, size_t n) {
    if (x == floor(x) && fabs(x) < 1e15)
        snprintf(out, n, "%.0f", x);
    else
        taas_float_repr(x, out, n);
}

void taas_param_range_text(const taas_param *p, taas_buf *out) {
    if (p->min > p->max) return;
    char lo[64], hi[64];
    taas_fmt_number(p->min, lo, sizeof lo);
    taas_fmt_number(p->max, hi, sizeof hi);
    if (isinf(p->max))
        taas_buf_printf(out, ">= %s", lo);
    else if (isinf(p->min))
        taas_buf_printf(out, "<= %s", hi);
    else
        taas_buf_printf(out, "%s to %s", lo, hi);
}

void taas_sig_hint(taas_error *err, const taas_builtin *b, const char *lead) {
    char *sig = taas_builtin_signature(b);
    if (!sig) {  /* out of memory: the hint without it */
        if (lead && lead[0]) taas_error_hint(err, "%s", lead);
        return;
    }
    if (lead && lead[0]) {
        size_t n = strlen(lead);
        int stop = lead[n - 1] == '?' || lead[n - 1] == '.' || lead[n - 1] == '!';
        taas_error_hint(err, "%s%s Signature: %s", lead, stop ? "" : ".", sig);
    } else {
        taas_error_hint(err, "Signature: %s", sig);
    }
    free(sig);
}
