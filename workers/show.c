/* taas-worker show: a PNG grid of samples with their labels under them, for show() in the
 * notebook. Which samples: the first n, or with --seed S the first n of epoch 0's shuffled
 * order with seed S (the sampler the loaders use). How they look: after the dataset's
 * transform when a trailing Normalize is all that keeps the values from being an image
 * (it is left out, which undoes it exactly), else as decoded. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "dataset.h"
#include "errnames.h"
#include "grid.h"
#include "role.h"
#include "sampler.h"
#include "transform.h"

#define MAX_N 256
#define CAPTION_MAX 18     /* characters under a cell */
#define PAD 4              /* pixels around and between cells */
#define GAP 3              /* between an image and its label */
#define SMALL 64           /* smaller images are scaled up by a whole factor towards this */
#define LARGE 160          /* larger ones are reduced by a whole factor to at most 128 */
#define COLS 8             /* cells per row, as torchvision's make_grid */
#define TEXT_MAX 64        /* bytes of a text window in the text fallback */

typedef struct cell {
    unsigned char *px;     /* 8-bit HWC, c 1 or 3 */
    int h, w, c;
    int up, down;          /* scale factors for the grid */
    uint64_t index;
    int64_t label;
    char caption[CAPTION_MAX + 1];
    char text[TEXT_MAX + 1];  /* a token dataset's window as text, for the text fallback */
} cell;

typedef struct view {
    taas_transform *t;     /* NULL: as decoded */
    int undone;            /* Normalize steps left out */
} view;

static int is_type(const json_t *t, const char *name) {
    const char *s = json_string_value(json_object_get(t, "type"));
    return s && strcmp(s, name) == 0;
}

/* The transform to show with: the dataset's, less its trailing Normalize steps. NULL
 * (show as decoded) when there is none, or when a Normalize sits earlier in the chain,
 * where leaving it out would not give the image back exactly. */
static int make_view(const json_t *tspec, view *v, taas_error *err) {
    memset(v, 0, sizeof *v);
    if (!tspec || json_is_null(tspec)) return 0;
    if (!is_type(tspec, "Compose")) {
        if (is_type(tspec, "Normalize")) {
            v->undone = 1;
            return 0;
        }
        v->t = taas_transform_new(tspec, err);
        return v->t ? 0 : -1;
    }
    const json_t *list = json_object_get(tspec, "transforms");
    size_t n = json_array_size(list), keep = n;
    while (keep > 0 && is_type(json_array_get(list, keep - 1), "Normalize")) keep--;
    for (size_t i = 0; i < keep; i++)
        if (is_type(json_array_get(list, i), "Normalize")) return 0;
    if (keep == 0) {
        v->undone = (int)n;
        return 0;
    }
    json_t *copy = json_deep_copy(tspec);
    json_t *cl = json_object_get(copy, "transforms");
    while (json_array_size(cl) > keep) json_array_remove(cl, json_array_size(cl) - 1);
    v->undone = (int)(n - keep);
    v->t = taas_transform_new(copy, err);
    json_decref(copy);
    return v->t ? 0 : -1;
}

/* Values in [0, 1] are scaled by 255; anything else is stretched from its min to its max
 * (a float image that is not 0..1). src is HWC when hwc, else CHW. */
static void floats_to_u8(const float *src, int h, int w, int c, int hwc, cell *out) {
    int oc = c >= 3 ? 3 : 1;
    size_t plane = (size_t)h * (size_t)w;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < plane * (size_t)c; i++) {
        if (src[i] < lo) lo = src[i];
        if (src[i] > hi) hi = src[i];
    }
    int unit = lo >= -1e-6f && hi <= 1.0f + 1e-6f;
    float scale = unit ? 255.0f : (hi > lo ? 255.0f / (hi - lo) : 0.0f), base = unit ? 0.0f : lo;
    for (size_t p = 0; p < plane; p++) {
        for (int k = 0; k < oc; k++) {
            float x = hwc ? src[p * (size_t)c + (size_t)k] : src[(size_t)k * plane + p];
            float y = (x - base) * scale + 0.5f;
            if (!(y >= 0)) y = 0;  /* also NaN */
            if (y > 255) y = 255;
            out->px[p * (size_t)oc + (size_t)k] = (unsigned char)y;
        }
    }
    out->h = h;
    out->w = w;
    out->c = oc;
}

static int alloc_px(cell *out, int h, int w, int c, taas_error *err) {
    out->px = malloc((size_t)h * (size_t)w * (size_t)(c >= 3 ? 3 : 1));
    if (!out->px) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a %dx%d sample", h, w);
    return 0;
}

/* A decoded image as it is: grey, grey + alpha and RGB(A) lose their alpha. */
static int raw_cell(taas_image *img, cell *out, taas_error *err) {
    if (alloc_px(out, img->h, img->w, img->c, err)) return -1;
    if (img->type == TAAS_PIX_F32) {
        floats_to_u8(img->data, img->h, img->w, img->c, 1, out);
        return 0;
    }
    int oc = img->c >= 3 ? 3 : 1;
    const unsigned char *s = img->data;
    size_t plane = (size_t)img->h * (size_t)img->w;
    for (size_t p = 0; p < plane; p++)
        for (int k = 0; k < oc; k++) out->px[p * (size_t)oc + (size_t)k] = s[p * (size_t)img->c + (size_t)k];
    out->h = img->h;
    out->w = img->w;
    out->c = oc;
    return 0;
}

static int transformed_cell(const view *v, taas_image *img, uint64_t seed, uint64_t index, cell *out,
                            taas_error *err) {
    int oc, oh, ow;
    float *f = NULL;
    if (taas_transform_out_shape(v->t, img->h, img->w, img->c, &oc, &oh, &ow, err) ||
        !(f = malloc((size_t)oc * (size_t)oh * (size_t)ow * sizeof *f))) {
        if (!taas_error_is_set(err))
            taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a %dx%d sample", oh, ow);
        taas_image_free(img);  /* not handed to the transform */
        return -1;
    }
    int rc = taas_transform_apply(v->t, img, seed, 0, index, f, err);
    if (!rc && !(rc = alloc_px(out, oh, ow, oc, err))) floats_to_u8(f, oh, ow, oc, 0, out);
    free(f);
    return rc;
}

/* A token dataset's sample (TextFile's bytes, TokenShards' ids): the cell is the window's
 * tokens as a strip of grey levels (id mod 256), its caption and text the window read as
 * bytes, the unprintable ones as '.' (the font is ASCII; UTF-8 is not decoded). */
static int token_cell(const taas_image *img, cell *c, taas_error *err) {
    const float *v = img->data;
    int n = img->c;
    if (alloc_px(c, 1, n, 1, err)) return -1;
    for (int i = 0; i < n; i++) c->px[i] = (unsigned char)((long long)v[i] & 0xff);
    c->h = 1, c->w = n, c->c = 1;
    int k = 0;
    for (int i = 0; i < n && k < TEXT_MAX; i++, k++) {
        long long t = (long long)v[i];
        c->text[k] = t >= 32 && t < 127 ? (char)t : '.';
    }
    c->text[k] = '\0';
    snprintf(c->caption, sizeof c->caption, "%.*s", CAPTION_MAX, c->text);
    return 0;
}

static void caption(cell *c, const taas_dataset_info *info) {
    char full[256];
    if (info->classes && c->label >= 0 && c->label < info->num_classes && info->classes[c->label])
        snprintf(full, sizeof full, "%s", info->classes[c->label]);
    else
        snprintf(full, sizeof full, "%lld", (long long)c->label);
    size_t n = strlen(full);
    if (n > CAPTION_MAX) {
        memcpy(full + CAPTION_MAX - 2, "..", 3);
        n = CAPTION_MAX;
    }
    memcpy(c->caption, full, n + 1);
}

static int draw(cell *cells, int n, taas_grid *g, taas_error *err) {
    int cw = 1, ch = 1, channels = 1;
    for (int i = 0; i < n; i++) {
        cell *c = &cells[i];
        int side = c->h > c->w ? c->h : c->w;
        c->up = side < SMALL ? SMALL / side : 1;
        c->down = side > LARGE ? (side + 127) / 128 : 1;
        int dw = c->down > 1 ? c->w / c->down : c->w * c->up;
        int dh = c->down > 1 ? c->h / c->down : c->h * c->up;
        int tw = taas_text_width(c->caption);
        if (dw > cw) cw = dw;
        if (tw > cw) cw = tw;
        if (dh > ch) ch = dh;
        if (c->c == 3) channels = 3;
    }
    int cols = n < COLS ? n : COLS, rows = (n + cols - 1) / cols;
    int cell_h = ch + GAP + TAAS_GLYPH_H + GAP;
    if (taas_grid_init(g, cols * cw + (cols + 1) * PAD, rows * cell_h + (rows + 1) * PAD, channels, 255, err))
        return -1;
    for (int i = 0; i < n; i++) {
        cell *c = &cells[i];
        int x0 = PAD + (i % cols) * (cw + PAD), y0 = PAD + (i / cols) * (cell_h + PAD);
        int dw = c->down > 1 ? c->w / c->down : c->w * c->up;
        int dh = c->down > 1 ? c->h / c->down : c->h * c->up;
        taas_grid_blit(g, x0 + (cw - dw) / 2, y0 + (ch - dh) / 2, c->px, c->h, c->w, c->c, c->up, c->down);
        taas_grid_text(g, x0 + (cw - taas_text_width(c->caption)) / 2, y0 + ch + GAP, c->caption, 0);
    }
    return 0;
}

/* The sidecar: a text/plain fallback and what was drawn. */
static json_t *sidecar(const taas_dataset_info *info, const cell *cells, int n, const view *v, const taas_grid *g,
                       int seeded, uint64_t seed) {
    char how[96];
    if (!v->t)
        snprintf(how, sizeof how, "as decoded");
    else if (v->undone)
        snprintf(how, sizeof how, "after the transform, Normalize undone");
    else
        snprintf(how, sizeof how, "after the transform");
    taas_buf tb = TAAS_BUF_INIT;
    taas_buf_printf(&tb, "%s: %d of %zu samples", info->type, n, info->size);
    if (seeded)
        taas_buf_printf(&tb, " (seed %llu)", (unsigned long long)seed);
    else
        taas_buf_printf(&tb, " (the first %d)", n);
    taas_buf_printf(&tb, ", %s", how);
    json_t *idx = json_array(), *labels = json_array(), *caps = json_array();
    int cols = n < COLS ? n : COLS;
    for (int i = 0; i < n; i++) {
        if (info->tokens) {  /* a window a line: its text reads better whole */
            taas_buf_printf(&tb, "\n  #%llu %s", (unsigned long long)cells[i].index, cells[i].text);
        } else {
            taas_buf_puts(&tb, i % cols ? " | " : "\n  ");
            taas_buf_printf(&tb, "#%llu %s", (unsigned long long)cells[i].index, cells[i].caption);
        }
        json_array_append_new(idx, json_integer((json_int_t)cells[i].index));
        json_array_append_new(labels, json_integer((json_int_t)cells[i].label));
        json_array_append_new(caps, taas_cli_text(cells[i].caption));
    }
    char *text = taas_buf_take(&tb);
    json_t *j = json_object();
    json_object_set_new(j, "text", taas_cli_text(text ? text : "(out of memory for the text)"));
    free(text);
    json_object_set_new(j, "type", taas_cli_text(info->type));
    json_object_set_new(j, "size", json_integer((json_int_t)info->size));
    json_object_set_new(j, "width", json_integer(g->w));
    json_object_set_new(j, "height", json_integer(g->h));
    json_object_set_new(j, "indices", idx);
    json_object_set_new(j, "labels", labels);
    json_object_set_new(j, "captions", caps);
    json_object_set_new(j, "transformed", json_boolean(v->t != NULL));
    json_object_set_new(j, "normalize_undone", json_boolean(v->t != NULL && v->undone > 0));
    return j;
}

/* Indices to show: the first n, or the first n of epoch 0's permutation for seed. */
static int pick(size_t size, int n, int seeded, uint64_t seed, uint64_t *out, taas_error *err) {
    if (!seeded) {
        for (int i = 0; i < n; i++) out[i] = (uint64_t)i;
        return 0;
    }
    taas_sampler_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.size = size;
    cfg.batch = (uint32_t)n;
    cfg.world = 1;
    cfg.seed = seed;
    cfg.shuffle = 1;
    taas_sampler *s = taas_sampler_new(&cfg, err);
    if (!s) return -1;
    size_t got = taas_sampler_item(s, 0, 0, out);
    taas_sampler_free(s);
    if (got != (size_t)n) {
        taas_error_set(err, TAAS_ERR_INTERNAL, TAAS_NOPOS, "the sampler gave %zu samples for a batch of %d", got, n);
        taas_error_hint(err, "this is a bug in taas; please report it");
        return -1;
    }
    return 0;
}

static int show(const json_t *spec, int n, int seeded, uint64_t seed, taas_error *err) {
    const json_t *dspec = taas_cli_dataset_spec(spec, err);
    if (!dspec) return -1;
    view v;
    if (make_view(json_object_get(dspec, "transform"), &v, err)) return -1;
    taas_fetcher *f = taas_cli_fetcher(err);
    taas_dataset *d = f ? taas_dataset_open(dspec, f, err) : NULL;
    cell *cells = NULL;
    taas_grid g;
    memset(&g, 0, sizeof g);
    unsigned char *png = NULL;
    size_t png_len = 0;
    int rc = -1, done = 0;
    if (!d) goto out;
    const taas_dataset_info *info = taas_dataset_info_get(d);
    if (info->size == 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "%s has no samples to show (%s)", info->type, info->source);
        taas_error_hint(err, "check that the dataset's files hold samples");
        goto out;
    }
    if ((size_t)n > info->size) n = (int)info->size;
    uint64_t idx[MAX_N];
    cells = calloc((size_t)n, sizeof *cells);
    if (!cells) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory");
        goto out;
    }
    if (pick(info->size, n, seeded, seed, idx, err)) goto out;
    for (; done < n; done++) {
        cell *c = &cells[done];
        taas_image img;
        c->index = idx[done];
        if (taas_dataset_get(d, (size_t)c->index, &img, &c->label, err)) goto out;
        if (info->tokens) {
            int r = token_cell(&img, c, err);
            taas_image_free(&img);
            if (r) goto out;
            continue;
        }
        int r = v.t ? transformed_cell(&v, &img, seed, c->index, c, err) : raw_cell(&img, c, err);
        if (!v.t) taas_image_free(&img);
        if (r) goto out;
        caption(c, info);
    }
    if (draw(cells, n, &g, err) || taas_grid_png(&g, &png, &png_len, err)) goto out;
    if (fwrite(png, 1, png_len, stdout) != png_len || fflush(stdout) != 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot write the PNG to stdout");
        taas_error_hint(err, "redirect stdout to a file: taas-worker show --spec s.json > grid.png");
        goto out;
    }
    json_t *side = sidecar(info, cells, n, &v, &g, seeded, seed);
    taas_cli_print_json(stderr, side);
    json_decref(side);
    rc = 0;
out:
    for (int i = 0; cells && i < n; i++) free(cells[i].px);
    free(cells);
    free(png);
    taas_grid_free(&g);
    taas_dataset_free(d);
    taas_fetcher_free(f);
    taas_transform_free(v.t);
    return rc;
}

int taas_role_show(int argc, char **argv) {
    const char *spec_path = NULL, *n_text = NULL, *seed_text = NULL, *help = NULL;
    const taas_opt opts[] = {{"spec", 1, &spec_path}, {"n", 1, &n_text}, {"seed", 1, &seed_text},
                             {"help", 0, &help}, {NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    long long n = 16, seed = 0;
    if (taas_cli_parse(argc, argv, opts, &err) || (n_text && taas_cli_int("n", n_text, 1, MAX_N, &n, &err)) ||
        (seed_text && taas_cli_int("seed", seed_text, 0, INT64_MAX, &seed, &err))) {
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    if (help) {
        puts("usage: taas-worker show --spec FILE|- [--n N] [--seed S]\n\n"
             "Writes a PNG grid of N samples (1 to 256, default 16) of the spec's dataset to\n"
             "stdout, each with its label (class name when the dataset has them) under it,\n"
             "8 to a row, and one JSON line to stderr: text (a plain-text fallback), width,\n"
             "height, indices, labels, captions, transformed, normalize_undone.\n"
             "Samples: the first N; with --seed S, the first N of epoch 0's shuffled order\n"
             "with seed S. Images: after the dataset's transform when only a trailing\n"
             "Normalize keeps them from being images (it is left out, which undoes it\n"
             "exactly; random transforms draw with seed S, epoch 0); otherwise as decoded.");
        return TAAS_EXIT_OK;
    }
    if (!spec_path) {
        taas_error_set(&err, TAAS_ERR_USAGE, TAAS_NOPOS, "show: --spec is required");
        taas_error_hint(&err, "give --spec FILE, or --spec - to read the spec from stdin");
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_USAGE;
    }
    json_t *spec = taas_cli_read_spec(spec_path, &err);
    int rc = spec ? show(spec, (int)n, seed_text != NULL, (uint64_t)seed, &err) : -1;
    json_decref(spec);
    if (rc) {
        taas_cli_report(stderr, &err);
        return TAAS_EXIT_ERROR;
    }
    return TAAS_EXIT_OK;
}
