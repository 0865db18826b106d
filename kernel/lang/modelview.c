/* A model before a job: its plan for a loader's samples, and a weights file against it. */
#include "modelview.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataview.h"
#include "errnames.h"
#include "model_memory.h"
#include "modules.h"
#include "safetensors.h"

/* The model's spec as one walk (interruptible, bounded): NULL with err. */
static json_t *model_spec(const taas_value *model, taas_error *err) {
    taas_walk w;
    taas_walk_begin(&w, "writing the model's spec", err);
    return taas_value_spec_walk(model, &w);
}

int taas_model_plan_for(taas_interp *in, const taas_value *model, const taas_value *loader, const char *what,
                        taas_model_plan *plan, taas_error *err) {
    const taas_value *ds = taas_data_dataset_of(loader);
    const json_t *info;
    if (!ds) {
        taas_error_set(err, TAAS_ERR_TYPE, TAAS_NOPOS, "%s is a %s, not a DataLoader", what, taas_value_type_name(loader));
        taas_error_hint(err, "give a DataLoader(dataset, batch_size=...)");
        return -1;
    }
    if (taas_data_probe(in, ds, &info, err)) return -1;
    const json_t *shape = json_object_get(info, "shape");
    if (!json_is_array(shape) || json_array_size(shape) != 3) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the samples of %s (%s) have no single shape", what,
                       ds->u.obj.def->name);
        taas_error_hint(err, "add Resize and CenterCrop to its transform so every sample has one shape");
        return -1;
    }
    int c = (int)json_integer_value(json_array_get(shape, 0)), h = (int)json_integer_value(json_array_get(shape, 1)),
        w = (int)json_integer_value(json_array_get(shape, 2));
    /* the worker's rule: a (C, 1, 1) sample is a feature vector, a token dataset's (T + 1, 1, 1)
     * T tokens in and T targets */
    if (h == 1 && w == 1) h = w = 0;
    if (json_is_true(json_object_get(info, "tokens")) && c > 1) c--;
    json_t *spec = model_spec(model, err);
    if (!spec) return -1;
    int rc = taas_model_plan_build(plan, spec, c, h, w, err);
    json_decref(spec);
    return rc;
}

/* The model's state_dict table (no buffers; a Lazy layer's inferred size is -1, any), planned
 * without an input: its keys are plan's, which the caller frees after it. NULL with err. */
static taas_st_tensor *model_table(const taas_value *model, const char *path, taas_model_plan *plan, taas_error *err) {
    json_t *spec = model_spec(model, err);
    if (!spec) return NULL;
    int rc = taas_model_plan_build(plan, spec, 0, 0, 0, err);
    json_decref(spec);
    if (rc) return NULL;
    taas_st_tensor *t = taas_param_table_tensors(plan->table, plan->ntable, NULL, NULL, NULL);
    if (!t) {
        taas_model_plan_free(plan);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory checking %s", path);
    }
    return t;
}

int taas_model_check_weights(const taas_value *model, const char *path, taas_error *err) {
    taas_model_plan plan;
    taas_st_tensor *t = model_table(model, path, &plan, err);
    if (!t) return -1;
    int rc = taas_safetensors_read(path, t, plan.ntable, err);  /* data NULL: the header is checked, nothing read */
    free(t);
    taas_model_plan_free(&plan);
    return rc;
}

static size_t tensor_bytes(const taas_st_tensor *t) {
    size_t n = t->dtype == TAAS_ST_I64 ? 8 : 4;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

int taas_model_load_some(const taas_value *model, const char *path, const char *dst, json_t *missing,
                         json_t *unexpected, taas_error *err) {
    taas_model_plan plan;
    taas_st_tensor *t = model_table(model, path, &plan, err);
    if (!t) return -1;
    size_t n = plan.ntable, nown = 0, nkept = 0;
    taas_st_tensor *own = calloc(n ? n : 1, sizeof *own), *kept = calloc(n ? n : 1, sizeof *kept);
    unsigned char *here = calloc(n ? n : 1, 2), *mine = here ? here + n : NULL;
    const char *weights = model->u.obj.weights;
    int rc = -1;
    if (!own || !kept || !here) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory loading %s", path);
        goto out;
    }
    /* the header first: every key both have fits, or nothing is read */
    taas_st_read_opts some = {1, 1, here, unexpected};
    if (taas_safetensors_read_opts(path, t, n, &some, err) || taas_safetensors_shapes(path, t, n, err)) goto out;
    for (size_t i = 0; i < n; i++)
        if (!here[i] && !t[i].tied) {  /* a tied tensor is the one it is tied to */
            own[nown++] = t[i];
            if (json_array_append_new(missing, json_string(t[i].key))) {
                taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory loading %s", path);
                goto out;
            }
        }
    /* the model's current tensors for the keys the file lacks (its weights may be partial too) */
    some = (taas_st_read_opts){1, 1, mine, NULL};
    if (weights && nown &&
        (taas_safetensors_read_opts(weights, own, nown, &some, err) || taas_safetensors_shapes(weights, own, nown, err)))
        goto out;
    for (size_t i = 0, j = 0; i < n; i++) {
        int from_own = !here[i] && !t[i].tied, have = here[i] || (from_own && weights && mine[j]);
        if (from_own) {
            t[i] = own[j];
            own[j].data = NULL;
            j++;
        }
        if (!have) continue;
        t[i].data = malloc(tensor_bytes(&t[i]) ? tensor_bytes(&t[i]) : 1);
        if (!t[i].data) {
            taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory loading %s", path);
            goto out;
        }
        kept[nkept] = t[i];
        if (from_own) own[j - 1].data = t[i].data;
        nkept++;
    }
    some = (taas_st_read_opts){1, 1, NULL, NULL};
    if (taas_safetensors_read_opts(path, t, n, &some, err) ||
        (weights && nown && taas_safetensors_read_opts(weights, own, nown, &some, err)))
        goto out;
    const taas_st_meta meta[] = {{"format", "pt"}, {TAAS_ST_PARTIAL_KEY, "1"}};
    rc = taas_safetensors_write(dst, kept, nkept, meta, nkept < n ? 2 : 1, err);
out:
    for (size_t i = 0; i < n; i++) free(t[i].data);
    free(t);
    free(own);
    free(kept);
    free(here);
    taas_model_plan_free(&plan);
    return rc;
}

/* The header of a safetensors file (its JSON object), or NULL with err. */
static json_t *st_header(const char *path, taas_error *err) {
    FILE *f = fopen(path, "rb");
    unsigned char n8[8];
    uint64_t n = 0;
    json_t *h = NULL;
    if (f && fread(n8, 1, 8, f) == 8) {
        for (int i = 7; i >= 0; i--) n = n << 8 | n8[i];
        char *text = n && n < ((uint64_t)1 << 30) ? malloc((size_t)n) : NULL;
        if (text && fread(text, 1, (size_t)n, f) == n) h = json_loadb(text, (size_t)n, 0, NULL);
        free(text);
    }
    if (f) fclose(f);
    if (!json_is_object(h)) {
        json_decref(h);
        taas_error_set(err, TAAS_ERR_DATA, TAAS_NOPOS, "cannot read the header of the model's weights %s", path);
        taas_error_hint(err, "the file was changed or removed: fit or load the model again");
        return NULL;
    }
    return h;
}

int taas_weights_without(const char *src, const char *prefix, int fresh, char **dst, taas_error *err) {
    *dst = NULL;
    json_t *h = st_header(src, err);
    if (!h) return -1;
    size_t n = 0, dropped = 0, plen = strlen(prefix), olen = strlen(TAAS_ST_OPTIMIZER_PREFIX);
    taas_st_tensor *t = calloc(json_object_size(h) + 1, sizeof *t);
    const char *key;
    json_t *info;
    int rc = -1;
    if (!t) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reading %s", src);
        goto out;
    }
    json_object_foreach(h, key, info) {
        if (!strcmp(key, "__metadata__")) continue;
        if (!strncmp(key, prefix, plen)) dropped++;
        if (!strncmp(key, prefix, plen) || !strncmp(key, TAAS_ST_OPTIMIZER_PREFIX, olen)) continue;
        const json_t *shape = json_object_get(info, "shape");
        t[n].key = key;
        const char *dtype = json_string_value(json_object_get(info, "dtype"));
        t[n].dtype = dtype && !strcmp(dtype, "I64") ? TAAS_ST_I64 : TAAS_ST_F32;
        t[n].ndim = json_array_size(shape) <= TAAS_ST_MAX_DIMS ? (int)json_array_size(shape) : TAAS_ST_MAX_DIMS;
        for (int d = 0; d < t[n].ndim; d++) t[n].shape[d] = (int64_t)json_integer_value(json_array_get(shape, (size_t)d));
        if (!(t[n].data = malloc(tensor_bytes(&t[n]) ? tensor_bytes(&t[n]) : 1))) {
            taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reading %s", src);
            goto out;
        }
        n++;
    }
    if (!dropped && !fresh) {
        rc = 0;
        goto out;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX / 2], file[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/taas-job-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= sizeof dir)
        snprintf(dir, sizeof dir, "/tmp/taas-job-XXXXXX");
    if (!mkdtemp(dir)) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot make a folder for the model's weights: %s", strerror(errno));
        taas_error_hint(err, "the temporary folder ($TMPDIR or /tmp) must be writable with free space");
        goto out;
    }
    snprintf(file, sizeof file, "%s/weights.safetensors", dir);
    const taas_st_read_opts some = {0, 1, NULL, NULL};  /* the tensors left out are not read */
    const taas_st_meta meta[] = {{"format", "pt"}, {TAAS_ST_PARTIAL_KEY, "1"}};
    if (taas_safetensors_read_opts(src, t, n, &some, err) || taas_safetensors_write(file, t, n, meta, 2, err)) {
        rmdir(dir);
        goto out;
    }
    if (!(*dst = strdup(file))) {
        taas_weights_drop(strdup(file), 1);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reading %s", src);
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; t && i < n; i++) free(t[i].data);
    free(t);
    json_decref(h);
    return rc;
}

int taas_weights_partial(const char *path, taas_error *err) {
    json_t *meta;
    if (taas_safetensors_metadata(path, &meta, err)) return -1;
    int partial = json_object_get(meta, TAAS_ST_PARTIAL_KEY) != NULL;
    json_decref(meta);
    return partial;
}

/* ---- the summary ------------------------------------------------------------------- */

/* "(N, 32, 26, 26)", "(64, 10)", "?" when the plan does not know it. */
static void shape_text(taas_buf *b, const taas_act_shape *s, int64_t batch) {
    if (s->rank == 0 || s->d[0] == 0 || (s->rank == 3 && (s->d[1] == 0 || s->d[2] == 0))) {
        taas_buf_puts(b, "?");
        return;
    }
    if (batch > 0) taas_buf_printf(b, "(%lld", (long long)batch);
    else taas_buf_puts(b, "(N");
    for (int i = 0; i < s->rank; i++) taas_buf_printf(b, ", %d", s->d[i]);
    taas_buf_putc(b, ')');
}

static size_t numel(const taas_act_shape *s) {
    size_t n = s->rank ? 1 : 0;
    for (int i = 0; i < s->rank; i++) n *= (size_t)s->d[i];
    return n;
}

/* Trainable parameters of layer i from the plan's table; -1 when a size is not known yet. */
static int64_t layer_params(const taas_model_plan *p, int i) {
    char prefix[16];
    int64_t n = 0;
    snprintf(prefix, sizeof prefix, "%d.", i);
    for (size_t k = 0; k < p->ntable; k++) {
        const taas_param_entry *e = &p->table[k];
        if (e->home != TAAS_T_PARAM || e->tied || strncmp(e->key, prefix, strlen(prefix))) continue;
        for (int d = 0; d < e->ndim; d++)
            if (e->shape[d] == 0) return -1;
        n += (int64_t)e->numel;
    }
    return n;
}

static void mib(taas_buf *b, double bytes) {
    taas_buf_printf(b, bytes >= 100 * 1048576.0 ? "%.0f MiB" : "%.2f MiB", bytes / 1048576.0);
}

/* torchinfo's totals: "Total params: 11,689,512", then what trains and what does not. */
static void count_lines(taas_buf *b, int64_t total, int64_t trainable) {
    const char *label[] = {"Total params: ", "\nTrainable params: ", "\nNon-trainable params: "};
    int64_t n[] = {total, trainable, total - trainable};
    for (int i = 0; i < 3; i++) {
        taas_buf_puts(b, label[i]);
        taas_buf_thousands(b, (long long)n[i]);
    }
    taas_buf_putc(b, '\n');
}

#define MAX_TREE 32

/* ---- the tree: torchinfo's table of modules by depth ------------------------------------ */

/* The type of the module at `path` ("layer1.0") in the spec: walking a Sequential by index
 * and a block or a ResNet by child name; "" when the spec does not hold it. */
static const char *spec_type_at(const json_t *spec, const char *path, size_t len) {
    const json_t *node = spec;
    const char *p = path, *end = path + len;
    while (node && p < end) {
        const json_t *ty = json_object_get(node, "type");
        if (json_is_string(ty) && strcmp(json_string_value(ty), "GPT2LMHeadModel") == 0)
            return taas_gpt2_module_type(p, (size_t)(end - p));  /* its modules come from its config */
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        char comp[64];
        if (n >= sizeof comp) return "";
        memcpy(comp, p, n);
        comp[n] = '\0';
        const json_t *layers = json_object_get(node, "layers");
        node = json_is_array(layers) ? json_array_get(layers, (size_t)strtoul(comp, NULL, 10)) : json_object_get(node, comp);
        p += n + (dot ? 1 : 0);
    }
    const json_t *t = json_object_get(node, "type");
    return json_is_string(t) ? json_string_value(t) : "";
}

/* Ops that are no module of their own: a block's residual sum, ResNet's torch.flatten, the
 * attention inside GPT2Attention's forward. */
static int internal_op(const taas_model_layer *L) {
    const char *last = strrchr(L->path, '.');
    last = last ? last + 1 : L->path;
    return L->kind == TAAS_L_ADD || L->kind == TAAS_L_ATTENTION ||
           (L->kind == TAAS_L_FLATTEN && strcmp(last, "flatten") == 0);
}

/* Parameters under a path prefix ("layer1." or "" for all; a leaf op's own rows when op >= 0). */
static int64_t params_under(const taas_model_plan *p, const char *prefix, int op) {
    int64_t n = 0;
    size_t lo = op >= 0 ? (size_t)p->layers[op].row : 0;
    size_t hi = op >= 0 ? lo + (size_t)p->layers[op].nrows : p->ntable;
    for (size_t k = lo; k < hi; k++) {
        const taas_param_entry *e = &p->table[k];
        if (e->home == TAAS_T_PARAM && !e->tied && strncmp(e->key, prefix, strlen(prefix)) == 0) n += (int64_t)e->numel;
    }
    return n;
}

/* The output of the last op under `prefix.`: a container's output. */
static const taas_act_shape *out_under(const taas_model_plan *p, const char *prefix, size_t len) {
    const taas_act_shape *s = NULL;
    for (int i = 0; i < p->nlayers; i++)
        if (!strncmp(p->layers[i].path, prefix, len) && p->layers[i].path[len] == '.') s = &p->layers[i].out;
    return s;
}

typedef struct tree_out {
    taas_buf *t, *h;
    int64_t batch;
    int idx[34];      /* rows so far at each depth */
} tree_out;

static void tree_row(tree_out *o, int depth, const char *type, const taas_act_shape *shape, int64_t params,
                     int container) {
    taas_buf name = TAAS_BUF_INIT, sh = TAAS_BUF_INIT, num = TAAS_BUF_INIT;
    for (int d = 1; d < depth; d++) taas_buf_puts(&name, "│    ");
    if (depth > 0) taas_buf_puts(&name, depth == 1 ? "├─" : "└─");
    taas_buf_puts(&name, type);
    if (depth > 0 && depth < (int)(sizeof o->idx / sizeof o->idx[0]))
        taas_buf_printf(&name, ": %d-%d", depth, ++o->idx[depth]);
    if (shape) shape_text(&sh, shape, o->batch);
    else taas_buf_puts(&sh, "?");
    if (container || params == 0) taas_buf_puts(&num, "--");
    else taas_buf_thousands(&num, (long long)params);
    /* padded by characters, not bytes: the tree's lines are three bytes each */
    const char *nm = name.data ? name.data : "";
    int cols = 0;
    for (const char *q = nm; *q; q++) cols += ((unsigned char)*q & 0xC0) != 0x80;
    taas_buf_printf(o->t, "%s%*s  %-22s  %12s\n", nm, cols < 48 ? 48 - cols : 0, "", sh.data ? sh.data : "",
                    num.data ? num.data : "");
    taas_buf_puts(o->h, "<tr><td style=\"text-align:left\"><code>");
    taas_buf_html(o->h, name.data ? name.data : "");
    taas_buf_puts(o->h, "</code></td><td style=\"text-align:left\">");
    taas_buf_html(o->h, sh.data ? sh.data : "");
    taas_buf_printf(o->h, "</td><td>%s</td></tr>\n", num.data ? num.data : "");
    taas_buf_free(&name);
    taas_buf_free(&sh);
    taas_buf_free(&num);
}

/* A row for every module: the containers as their first op opens them, then each op. */
static void tree_rows(tree_out *o, const taas_model_plan *p, const json_t *spec, const char *root) {
    char open[MAX_TREE][80];
    int nopen = 0;
    const taas_act_shape *out = p->nlayers ? &p->layers[p->nlayers - 1].out : NULL;
    tree_row(o, 0, root, out, 0, 1);
    for (int i = 0; i < p->nlayers; i++) {
        const taas_model_layer *L = &p->layers[i];
        if (internal_op(L)) continue;
        /* the path's containers, outermost first */
        int depth = 0;
        const char *c = L->path;
        for (const char *dot = strchr(c, '.'); dot; dot = strchr(dot + 1, '.')) {
            size_t len = (size_t)(dot - L->path);
            if (depth < nopen && strlen(open[depth]) == len && !strncmp(open[depth], L->path, len)) {
                depth++;
                continue;
            }
            nopen = depth;
            if (depth >= MAX_TREE || len >= sizeof open[0]) break;
            memcpy(open[depth], L->path, len);
            open[depth][len] = '\0';
            nopen = ++depth;
            tree_row(o, depth, spec_type_at(spec, L->path, len), out_under(p, L->path, len), 0, 1);
        }
        if (depth < nopen) nopen = depth;
        tree_row(o, depth + 1, L->name, &L->out, params_under(p, "", i), 0);
    }
}

/* The planned peak of a training step for the batch (or one sample): "a training step: ..." */
static void peak_line(taas_buf *b, const taas_model_plan *p, int64_t batch) {
    taas_model_memory mm;
    taas_error e;
    int n = batch > 0 && batch < INT_MAX ? (int)batch : 1;
    if (taas_model_memory_plan(&mm, p->layers, p->nlayers, p->in_shape, n, p->nlayers, 0, 0, &e)) return;
    taas_buf_puts(b, "a training step: ");
    mib(b, (double)mm.bytes);
    taas_buf_printf(b, " of activations and gradients at the peak, %s (planned; the convolutions' scratch "
                       "apart)", batch > 0 ? "for the batch" : "a sample");
    taas_model_memory_free(&mm);
}

/* torchinfo's summary of a tree: a row a module, by depth, with its output shape and its own
 * parameters; the totals, what trains, and the planned peak of a step. */
static json_t *tree_summary(const taas_value *model, const json_t *spec, const taas_model_plan *p, int known,
                            int64_t batch, taas_error *err) {
    taas_buf t = TAAS_BUF_INIT, h = TAAS_BUF_INIT, head = TAAS_BUF_INIT, foot = TAAS_BUF_INIT;
    const char *root = model->u.obj.def->name;
    taas_buf_printf(&head, "%s: input ", root);
    if (known) shape_text(&head, &p->in_shape, batch);
    else taas_buf_puts(&head, "not known yet");
    taas_buf_printf(&t, "%s\n%-48s  %-22s  %12s\n", head.data ? head.data : "", "Layer (type:depth-idx)",
                    "Output Shape", "Param #");
    taas_buf_puts(&h, "<table class=\"taas-model\">\n<caption style=\"text-align:left\">");
    taas_buf_html(&h, head.data ? head.data : "");
    taas_buf_puts(&h, "</caption>\n<thead><tr><th style=\"text-align:left\">Layer (type:depth-idx)</th>"
                      "<th style=\"text-align:left\">Output Shape</th><th>Param #</th></tr></thead>\n<tbody>\n");
    tree_out o = {&t, &h, batch, {0}};
    tree_rows(&o, p, spec, root);
    count_lines(&foot, (int64_t)p->nparams, (int64_t)p->ntrain);
    taas_buf_puts(&foot, "parameters: ");
    mib(&foot, 4.0 * (double)p->nparams);
    taas_buf_puts(&foot, " as float32");
    if (p->nstats) taas_buf_printf(&foot, ", and %zu BatchNorm statistics", p->nstats);
    taas_buf_putc(&foot, '\n');
    if (known) peak_line(&foot, p, batch);
    else taas_buf_puts(&foot, "output shapes and memory come with the input: fit or evaluate the model, or "
                              "summary(model, input_size=(C, H, W))");
    taas_buf_puts(&t, foot.data ? foot.data : "");
    taas_buf_puts(&h, "</tbody>\n</table>\n<div class=\"taas-model-totals\"><pre>");
    taas_buf_html(&h, foot.data ? foot.data : "");
    taas_buf_puts(&h, "</pre></div>");
    json_t *b = NULL;
    if (!t.failed && !h.failed && !head.failed && !foot.failed)
        b = json_pack("{s:s, s:s}", "text/plain", t.data, "text/html", h.data);
    if (!b) taas_value_oom(err, TAAS_NOPOS, "summing up the model");
    taas_buf_free(&t);
    taas_buf_free(&h);
    taas_buf_free(&head);
    taas_buf_free(&foot);
    return b;
}

json_t *taas_model_summary(const taas_value *model, const int32_t *sample, int64_t batch, taas_error *err) {
    const int32_t *s = sample ? sample : model->u.obj.sample;
    taas_model_plan plan;
    taas_error e;
    json_t *spec = model_spec(model, err);
    if (!spec) return NULL;
    int known = s[0] > 0;
    int rc = taas_model_plan_build(&plan, spec, known ? s[0] : 0, known ? s[1] : 0, known ? s[2] : 0, &e);
    if (rc && known && sample) {  /* the input asked for does not fit: say where */
        json_decref(spec);
        *err = e;
        return NULL;
    }
    if (rc && known) {  /* the data changed shape since: the summary without it */
        rc = taas_model_plan_build(&plan, spec, 0, 0, 0, &e) ? -1 : 1;
        known = 0;
    }
    const taas_value *layers = taas_value_is(model, "Sequential") ? taas_object_arg(model, "layers") : NULL;
    /* the table below lists a Sequential's layers, an op each; a tree of modules gets torchinfo's */
    int flat = rc >= 0 && layers && (size_t)plan.nlayers == layers->u.seq.n;
    for (int i = 0; flat && i < plan.nlayers; i++) flat = strchr(plan.layers[i].path, '.') == NULL;
    if (rc >= 0 && !flat) {
        json_t *b = tree_summary(model, spec, &plan, known, batch, err);
        json_decref(spec);
        taas_model_plan_free(&plan);
        return b;
    }
    json_decref(spec);
    if (rc < 0) {  /* a spec the trainer cannot plan (an option it refuses, a tree): its repr and counts */
        taas_buf t = TAAS_BUF_INIT;
        char *r = taas_value_repr(model);
        taas_buf_puts(&t, r ? r : "");
        free(r);
        int64_t total, trainable;
        if (taas_module_count(model, &total, &trainable)) {
            taas_buf_puts(&t, "\n");
            count_lines(&t, total, trainable);
        }
        json_t *b = !t.failed && t.data ? json_pack("{s:s}", "text/plain", t.data) : NULL;
        taas_buf_free(&t);
        if (!b) taas_value_oom(err, TAAS_NOPOS, "summing up the model");
        return b;
    }
    taas_buf t = TAAS_BUF_INIT, h = TAAS_BUF_INIT, in = TAAS_BUF_INIT;
    if (known) shape_text(&in, &plan.in_shape, batch);
    taas_buf head = TAAS_BUF_INIT;
    taas_buf_printf(&head, "Sequential: %d layer%s, input %s", plan.nlayers, plan.nlayers == 1 ? "" : "s",
                    known ? in.data : "not known yet");
    taas_buf_printf(&t, "%s\n", head.data);
    int ok = !head.failed && !in.failed;  /* 0: out of memory, the summary is lost */
    /* Notebook right-aligns every cell of an output's table: the layers and shapes read from the left */
    taas_buf_puts(&h, "<table class=\"taas-model\">\n<caption style=\"text-align:left\">");
    taas_buf_html(&h, head.data);
    taas_buf_free(&head);
    taas_buf_puts(&h, "</caption>\n<thead><tr><th>#</th><th style=\"text-align:left\">Layer</th>"
                      "<th style=\"text-align:left\">Output shape</th><th>Parameters</th></tr></thead>\n<tbody>\n");
    int64_t total = 0;
    int all_known = 1;
    size_t acts = known ? numel(&plan.in_shape) : 0;
    char **reprs = calloc((size_t)plan.nlayers, sizeof *reprs), **shapes = calloc((size_t)plan.nlayers, sizeof *shapes);
    size_t wl = 5, ws = 12;
    ok = ok && reprs && shapes;
    for (int i = 0; ok && i < plan.nlayers; i++) {
        taas_buf sh = TAAS_BUF_INIT;
        shape_text(&sh, &plan.layers[i].out, batch);
        shapes[i] = taas_buf_take(&sh);
        reprs[i] = taas_value_repr(layers->u.seq.items[i]);
        if (!(ok = shapes[i] && reprs[i])) break;
        char *nl = strchr(reprs[i], '\n');
        if (nl) *nl = '\0';
        if (strlen(reprs[i]) > wl) wl = strlen(reprs[i]);
        if (strlen(shapes[i]) > ws) ws = strlen(shapes[i]);
        acts += numel(&plan.layers[i].out);
    }
    taas_buf_printf(&t, "%3s  %-*s  %-*s  %12s\n", "#", (int)wl, "layer", (int)ws, "output shape", "parameters");
    for (int i = 0; ok && i < plan.nlayers; i++) {
        int64_t n = layer_params(&plan, i);
        char num[32] = "?";
        if (n >= 0) {
            taas_buf b = TAAS_BUF_INIT;
            taas_buf_thousands(&b, (long long)n);
            snprintf(num, sizeof num, "%s", n ? b.data : "-");
            taas_buf_free(&b);
            total += n;
        } else {
            all_known = 0;
        }
        taas_buf_printf(&t, "%3d  %-*s  %-*s  %12s\n", i, (int)wl, reprs[i], (int)ws, shapes[i], num);
        taas_buf_printf(&h, "<tr><td>%d</td><td style=\"text-align:left\"><code>", i);
        taas_buf_html(&h, reprs[i]);
        taas_buf_puts(&h, "</code></td><td style=\"text-align:left\">");
        taas_buf_html(&h, shapes[i]);
        taas_buf_printf(&h, "</td><td>%s</td></tr>\n", num);
    }
    for (int i = 0; reprs && shapes && i < plan.nlayers; i++) {
        free(reprs[i]);
        free(shapes[i]);
    }
    free(reprs);
    free(shapes);
    taas_buf foot = TAAS_BUF_INIT;
    taas_buf_puts(&foot, "parameters: ");
    taas_buf_thousands(&foot, (long long)total);
    taas_buf_puts(&foot, " (");
    mib(&foot, 4.0 * (double)total);
    taas_buf_puts(&foot, " as float32)");
    if (!all_known) taas_buf_puts(&foot, " and the Lazy layers', which come with the input");
    if (plan.nstats) taas_buf_printf(&foot, ", and %zu BatchNorm statistics", plan.nstats);
    taas_buf_puts(&foot, "\n");
    int64_t tree_total, trainable;
    if (all_known && taas_module_count(model, &tree_total, &trainable) && trainable != tree_total)
        count_lines(&foot, tree_total, trainable);  /* a frozen part: say what trains */
    if (known) {
        int64_t n = batch > 0 ? batch : 1;
        taas_buf_printf(&foot, "activations: ");
        mib(&foot, 4.0 * (double)acts * (double)n);
        taas_buf_printf(&foot, " %s forward\n", batch > 0 ? "for the batch" : "a sample");
        peak_line(&foot, &plan, batch);
    } else {
        taas_buf_puts(&foot, "output shapes and memory come with the input: fit or evaluate the model, or "
                             "summary(model, input_size=(C, H, W))");
    }
    taas_error unread;  /* a weights file that cannot be read is save()'s to name */
    if (model->u.obj.weights && taas_weights_partial(model->u.obj.weights, &unread) == 1)
        taas_buf_puts(&foot, "\nweights: partial (load(strict=False)): the tensors the file lacked are "
                             "initialised from the seed when it trains");
    taas_buf_puts(&t, foot.data);
    taas_buf_puts(&h, "</tbody>\n</table>\n<div class=\"taas-model-totals\"><pre>");
    taas_buf_html(&h, foot.data);
    taas_buf_puts(&h, "</pre></div>");
    taas_buf_free(&foot);
    taas_buf_free(&in);
    taas_model_plan_free(&plan);
    json_t *b = NULL;
    if (ok && !t.failed && !h.failed)  /* else out of memory: NULL */
        b = json_pack("{s:s, s:s}", "text/plain", t.data, "text/html", h.data);
    if (!b) taas_value_oom(err, TAAS_NOPOS, "summing up the model");
    taas_buf_free(&t);
    taas_buf_free(&h);
    return b;
}
