/* taas-worker probe: what the kernel shows about a dataset or DataLoader value. It opens
 * the dataset as a loader would (headers and indexes only), so it is quick, and it fails
 * exactly where a loader would fail: a missing file, a 404, a transform that cannot take
 * the images. */
#include <stdint.h>
#include <string.h>

#include "dataset.h"
#include "errnames.h"
#include "role.h"
#include "sampler.h"
#include "transform.h"

static json_t *shape3(int a, int b, int c) {
    return json_pack("[i, i, i]", a, b, c);
}

/* The CHW shape a (h, w, c) image comes out of the transform with: ToTensor alone when
 * there is none (as the loaders do). */
static int out_shape(const taas_transform *t, int h, int w, int c, int *oc, int *oh, int *ow, taas_error *err) {
    if (!t) {
        *oc = c;
        *oh = h;
        *ow = w;
        return 0;
    }
    return taas_transform_out_shape(t, h, w, c, oc, oh, ow, err);
}

/* Shapes: the decoded sample's and the transformed one's. A format whose samples vary in
 * size (WebDataset) reports 0; sample 0 stands for them then, and the shape is marked as
 * varying unless the transform makes every size the same (tried on a second size). */
static int shapes(taas_dataset *d, const taas_transform *t, json_t *out, taas_error *err) {
    const taas_dataset_info *info = taas_dataset_info_get(d);
    int h = info->h, w = info->w, c = info->c, varies = 0;
    if (h <= 0 || w <= 0 || c <= 0) {
        if (info->size == 0) {
            json_object_set_new(out, "raw_shape", json_null());
            json_object_set_new(out, "shape", json_null());
            json_object_set_new(out, "shape_varies", json_false());
            return 0;
        }
        taas_image img;
        int64_t label;
        if (taas_dataset_get(d, 0, &img, &label, err)) return -1;
        h = img.h;
        w = img.w;
        c = img.c;
        taas_image_free(&img);
        varies = 1;
    }
    int oc, oh, ow;
    if (out_shape(t, h, w, c, &oc, &oh, &ow, err)) {
        char pre[128];
        snprintf(pre, sizeof pre, "the transform cannot take %s's %dx%dx%d images: ", info->type, h, w, c);
        size_t pl = strlen(pre), ml = strlen(err->message);
        if (pl + ml < sizeof err->message) {
            memmove(err->message + pl, err->message, ml + 1);
            memcpy(err->message, pre, pl);
        }
        return -1;
    }
    if (varies && t) {
        int c2, h2, w2;
        taas_error scratch;
        taas_error_clear(&scratch);
        if (!out_shape(t, 2 * h + 3, 2 * w + 5, c, &c2, &h2, &w2, &scratch) && c2 == oc && h2 == oh && w2 == ow)
            varies = 0;
    }
    json_object_set_new(out, "raw_shape", shape3(h, w, c));
    json_object_set_new(out, "shape", shape3(oc, oh, ow));
    json_object_set_new(out, "shape_varies", json_boolean(varies));
    return 0;
}

static json_t *classes(const taas_dataset_info *info) {
    if (!info->classes || info->num_classes <= 0) return json_null();
    json_t *a = json_array();
    for (int i = 0; i < info->num_classes; i++)
        json_array_append_new(a, taas_cli_text(info->classes[i] ? info->classes[i] : ""));
    return a;
}

/* Batches per epoch of a DataLoader spec over `size` samples, from the sampler the loaders
 * use (one rank: the notebook's view). */
static int loader_fields(const json_t *spec, size_t size, json_t *out, taas_error *err) {
    const json_t *bs = json_object_get(spec, "batch_size");
    if (!json_is_integer(bs) || json_integer_value(bs) < 1 || json_integer_value(bs) > UINT32_MAX) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the DataLoader spec's \"batch_size\" must be an integer "
                       "from 1 to %u", UINT32_MAX);
        taas_error_hint(err, "give DataLoader(dataset, batch_size=64)");
        return -1;
    }
    taas_sampler_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.size = size;
    cfg.batch = (uint32_t)json_integer_value(bs);
    cfg.world = 1;
    cfg.shuffle = json_is_true(json_object_get(spec, "shuffle"));
    cfg.drop_last = json_is_true(json_object_get(spec, "drop_last"));
    taas_sampler *s = taas_sampler_new(&cfg, err);
    if (!s) return -1;
    json_object_set_new(out, "batch_size", json_integer((json_int_t)cfg.batch));
    json_object_set_new(out, "drop_last", json_boolean(cfg.drop_last));
    json_object_set_new(out, "batches", json_integer((json_int_t)taas_sampler_steps(s)));
    taas_sampler_free(s);
    return 0;
}

static json_t *probe(const json_t *spec, taas_error *err) {
    const json_t *dspec = taas_cli_dataset_spec(spec, err);
    if (!dspec) return NULL;
    const json_t *tspec = json_object_get(dspec, "transform");
    taas_transform *t = NULL;
    if (tspec && !json_is_null(tspec)) {
        t = taas_transform_new(tspec, err);
        if (!t) return NULL;
    }
    taas_fetcher *f = taas_cli_fetcher(err);
    if (!f) {
        taas_transform_free(t);
        return NULL;
    }
    json_t *out = NULL;
    taas_dataset *d = taas_dataset_open(dspec, f, err);
    if (d) {
        const taas_dataset_info *info = taas_dataset_info_get(d);
        out = json_object();
        json_object_set_new(out, "type", taas_cli_text(json_string_value(json_object_get(spec, "type"))));
        if (spec != dspec) json_object_set_new(out, "dataset", taas_cli_text(info->type));
        json_object_set_new(out, "size", json_integer((json_int_t)info->size));
        json_object_set_new(out, "transformed", json_boolean(t != NULL));
        json_object_set_new(out, "num_classes", json_integer(info->num_classes));
        json_object_set_new(out, "tokens", json_boolean(info->tokens));
        json_object_set_new(out, "classes", classes(info));
        json_object_set_new(out, "source", taas_cli_text(info->source));
        if (shapes(d, t, out, err) || (spec != dspec && loader_fields(spec, info->size, out, err))) {
            json_decref(out);
            out = NULL;
        }
        taas_dataset_free(d);
    }
    taas_fetcher_free(f);
    taas_transform_free(t);
    return out;
}

int taas_role_probe(int argc, char **argv) {
    const char *spec_path = NULL, *help = NULL;
    const taas_opt opts[] = {{"spec", 1, &spec_path}, {"help", 0, &help}, {NULL, 0, NULL}};
    taas_error err;
    taas_error_clear(&err);
    if (taas_cli_parse(argc, argv, opts, &err)) {
        taas_cli_report(stdout, &err);
        return TAAS_EXIT_USAGE;
    }
    if (help) {
        puts("usage: taas-worker probe --spec FILE|-\n\n"
             "Opens the dataset of a dataset or DataLoader spec (headers and indexes only) and\n"
             "prints one JSON line: type, size, shape (C, H, W after the transform), raw_shape\n"
             "(H, W, C as decoded), shape_varies, num_classes, classes, source, and for a\n"
             "DataLoader batch_size, drop_last and batches (per epoch, one rank).");
        return TAAS_EXIT_OK;
    }
    if (!spec_path) {
        taas_error_set(&err, TAAS_ERR_USAGE, TAAS_NOPOS, "probe: --spec is required");
        taas_error_hint(&err, "give --spec FILE, or --spec - to read the spec from stdin");
        taas_cli_report(stdout, &err);
        return TAAS_EXIT_USAGE;
    }
    json_t *spec = taas_cli_read_spec(spec_path, &err);
    json_t *out = spec ? probe(spec, &err) : NULL;
    json_decref(spec);
    if (!out) {
        taas_cli_report(stdout, &err);
        return TAAS_EXIT_ERROR;
    }
    int rc = taas_cli_print_json(stdout, out);
    json_decref(out);
    return rc ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
