/* The parts of a job both roles use: a DataLoader spec opened as dataset, transform,
 * sampler and pipeline (one rank), the model with its weights, and an evaluation pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "errnames.h"
#include "safetensors.h"
#include "engine.h"
#include "train_job.h"

int taas_train_pipeline_cfg(const json_t *spec, const taas_train_loader *l, uint64_t seed, taas_pipeline_cfg *pc,
                          taas_error *err) {
    long long workers, prefetch;
    if (taas_train_int(spec, "DataLoader", "num_workers", 0, 0, TAAS_MAX_LOADER_THREADS, &workers, err) ||
        taas_train_int(spec, "DataLoader", "prefetch_factor", 2, 1, TAAS_MAX_PREFETCH, &prefetch, err))
        return -1;
    memset(pc, 0, sizeof *pc);
    pc->dataset = l->dataset;
    pc->transform = l->transform;
    pc->sampler = l->sampler;
    pc->seed = seed;
    pc->loader = l->rank;      /* rank r's items are k % W == r: loader r of W */
    pc->loaders = l->world;
    pc->threads = workers > 1 ? (int)workers : 1;
    pc->queue_depth = (int)prefetch * pc->threads;
    return 0;
}

uint64_t *taas_train_resume_items(const taas_train_loader *l, uint64_t step, uint32_t j, uint32_t m, size_t *n,
                                taas_error *err) {
    uint64_t items = l->steps * l->world, first = step * l->world;
    *n = 0;
    uint64_t *out = malloc(((items - (first < items ? first : items)) / m + 2) * sizeof *out);
    if (!out) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the items to redo");
        return NULL;
    }
    for (uint64_t k = first; k < items; k++)
        if (k % m == j) out[(*n)++] = k;
    return out;
}

/* This rank's pipeline from item step * W of epoch `first` on, to the end of `epochs`. */
static int open_pipeline_at(taas_train_loader *l, const json_t *spec, uint64_t seed, uint64_t first, uint64_t step,
                            uint64_t epochs, taas_error *err) {
    if (!l->rank_pipeline) return 0;  /* the loader workers make this one's batches */
    taas_pipeline_cfg pc;
    uint64_t *only = NULL;
    if (taas_train_pipeline_cfg(spec, l, seed, &pc, err)) return -1;
    pc.first_epoch = first;
    pc.epochs = epochs - first;
    if (step > 0) {
        if (!(only = taas_train_resume_items(l, step, l->rank, l->world, &pc.n_only, err))) return -1;
        pc.only_items = only;
    }
    l->pipeline = taas_pipeline_new(&pc, err);
    free(only);
    return l->pipeline ? 0 : -1;
}

static int open_pipeline(taas_train_loader *l, const json_t *spec, uint64_t seed, uint64_t epochs,
                         taas_error *err) {
    return open_pipeline_at(l, spec, seed, 0, 0, epochs, err);
}

/* {"size": N, "shape": [C, H, W], "num_classes": K}: what the kernel's probe found. */
static int known_facts(const json_t *facts, const char *what, taas_train_loader *l, uint64_t *size, taas_error *err) {
    const json_t *n = json_object_get(facts, "size"), *shape = json_object_get(facts, "shape");
    if (!json_is_integer(n) || json_integer_value(n) < 1 || !json_is_array(shape) || json_array_size(shape) != 3) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's facts about the %s dataset lack its size or "
                       "sample shape", what);
        taas_error_hint(err, "taas-worker and taas-kernel may come from different versions: install them together");
        return -1;
    }
    *size = (uint64_t)json_integer_value(n);
    l->c = (int)json_integer_value(json_array_get(shape, 0));
    l->h = (int)json_integer_value(json_array_get(shape, 1));
    l->w = (int)json_integer_value(json_array_get(shape, 2));
    l->num_classes = (int)json_integer_value(json_object_get(facts, "num_classes"));
    l->tokens = json_is_true(json_object_get(facts, "tokens"));
    return 0;
}

int taas_train_loader_open(const json_t *spec, const char *what, taas_fetcher *f, uint64_t seed,
                         uint64_t units, uint64_t epochs, const taas_train_rank *rank, taas_train_loader *l,
                         taas_error *err) {
    memset(l, 0, sizeof *l);
    l->rank = rank ? rank->rank : 0;
    l->world = rank ? rank->world : 1;
    l->rank_pipeline = !rank || rank->pipeline;
    const char *t = json_string_value(json_object_get(spec, "type"));
    if (!json_is_object(spec) || !t || strcmp(t, "DataLoader") != 0 ||
        !json_is_object(json_object_get(spec, "dataset"))) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS,
                       "the job spec's \"%s\" is not a DataLoader spec with a \"dataset\"", what);
        taas_error_hint(err, "give a DataLoader: {\"type\": \"DataLoader\", \"dataset\": {...}, \"batch_size\": 64}");
        return -1;
    }
    const json_t *dspec = json_object_get(spec, "dataset");
    long long bs;
    uint64_t size;
    if (taas_train_int(spec, "DataLoader", "batch_size", 1, 1, TAAS_MAX_BATCH_SIZE, &bs, err)) return -1;
    if (rank && !rank->pipeline && rank->facts) {
        /* the loader workers read the data: a rank needs only its size and shape */
        if (known_facts(rank->facts, what, l, &size, err)) goto fail;
    } else {
        const json_t *tspec = json_object_get(dspec, "transform");
        if (tspec && !json_is_null(tspec) && !(l->transform = taas_transform_new(tspec, err))) goto fail;
        if (!(l->dataset = taas_dataset_open(dspec, f, err))) goto fail;
        const taas_dataset_info *info = taas_dataset_info_get(l->dataset);
        if (info->size == 0) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the %s dataset (%s) is empty", what, info->source);
            taas_error_hint(err, "check the dataset's root and split");
            goto fail;
        }
        int h = info->h, w = info->w, c = info->c;
        if (h <= 0 || w <= 0 || c <= 0) {
            /* a format whose images may differ (WebDataset): sample 0's shape is the model's
             * input, and a batch of another shape is an error when it comes (fit_loop.c) */
            taas_image img;
            int64_t label;
            if (taas_dataset_get(l->dataset, 0, &img, &label, err)) goto fail;
            h = img.h, w = img.w, c = img.c;
            taas_image_free(&img);
        }
        if (l->transform) {
            if (taas_transform_out_shape(l->transform, h, w, c, &l->c, &l->h, &l->w, err)) goto fail;
        } else {
            l->c = c, l->h = h, l->w = w;
        }
        l->num_classes = info->num_classes;
        l->tokens = info->tokens;
        size = info->size;
    }
    taas_sampler_cfg sc;
    memset(&sc, 0, sizeof sc);
    sc.size = size;
    sc.batch = (uint32_t)bs;
    sc.world = l->world;
    sc.seed = seed;
    sc.shuffle = json_is_true(json_object_get(spec, "shuffle"));
    sc.drop_last = json_is_true(json_object_get(spec, "drop_last"));
    sc.units = units;
    if (!(l->sampler = taas_sampler_new(&sc, err))) goto fail;
    l->steps = taas_sampler_steps(l->sampler);
    l->per_epoch = sc.drop_last ? l->steps * sc.batch * l->world : size;
    if (open_pipeline(l, spec, seed, epochs, err)) goto fail;
    return 0;
fail:
    taas_train_loader_close(l);
    return -1;
}

int taas_train_loader_restart(taas_train_loader *l, const json_t *spec, uint64_t seed, uint64_t epochs,
                            taas_error *err) {
    taas_pipeline_free(l->pipeline);
    l->pipeline = NULL;
    return open_pipeline(l, spec, seed, epochs, err);
}

int taas_train_loader_seek(taas_train_loader *l, const json_t *spec, uint64_t seed, uint64_t epoch, uint64_t step,
                         uint64_t epochs, taas_error *err) {
    taas_pipeline_free(l->pipeline);
    l->pipeline = NULL;
    return open_pipeline_at(l, spec, seed, epoch, step, epochs, err);
}

void taas_train_loader_close(taas_train_loader *l) {
    taas_pipeline_free(l->pipeline);
    taas_sampler_free(l->sampler);
    taas_dataset_free(l->dataset);
    taas_transform_free(l->transform);
    memset(l, 0, sizeof *l);
}

/* The model's state_dict as safetensors tensors pointing into its buffers. */
static taas_st_tensor *tensors(const taas_model *m) {
    return taas_param_table_tensors(m->table, m->ntable, m->params, m->stats, m->counters);
}

taas_model *taas_train_model(const json_t *job, const taas_train_loader *l, taas_error *err) {
    long long seed, threads;
    if (taas_train_int(job, "the job spec", "seed", 0, 0, INT64_MAX, &seed, err) ||
        taas_train_int(job, "the job spec", "threads", 1, 1, 1024, &threads, err))
        return NULL;
    const json_t *spec = json_object_get(job, "model");
    if (!json_is_object(spec)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec has no \"model\" object");
        taas_error_hint(err, "give fit() a model: Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))");
        return NULL;
    }
    /* A (C, 1, 1) sample is a feature vector: (N, C) models (Linear first) take it as is; a
     * token dataset's (T + 1, 1, 1) is T tokens in and T targets (dataset.h). */
    int h = l->h, w = l->w;
    if (h == 1 && w == 1) h = w = 0;
    taas_model *m = taas_model_new(spec, l->tokens ? l->c - 1 : l->c, h, w, (uint64_t)seed, err);
    if (!m) return NULL;
    taas_model_set_threads(m, (int)threads);
    const json_t *wp = json_object_get(job, "weights");
    if (wp && !json_is_null(wp)) {
        taas_st_tensor *t = tensors(m);
        int rc = !json_is_string(wp) ? -1 : t ? taas_safetensors_read(json_string_value(wp), t, m->ntable, err) : -1;
        if (rc && !json_is_string(wp)) {
            taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's \"weights\" must be a path or null");
            taas_error_hint(err, "give the path of a .safetensors file");
        } else if (rc && !t) {
            taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the weights table");
        }
        free(t);
        if (rc) {
            taas_model_free(m);
            return NULL;
        }
    }
    return m;
}

int taas_train_save(const taas_model *m, const char *path, taas_error *err) {
    taas_st_tensor *t = tensors(m);
    if (!t) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the weights table");
    const taas_st_meta meta[] = {{"format", "pt"}};
    int rc = taas_safetensors_write(path, t, m->ntable, meta, 1, err);
    free(t);
    return rc;
}

int taas_train_evaluate(taas_model *m, taas_train_loader *l, taas_train_loss *loss, double *mean_loss,
                      double *accuracy, uint64_t *samples, taas_error *err) {
    /* the CPU engine's eval, which knows a classifier's rows and a token model's */
    taas_optim_config none;
    taas_optim_config_default(&none, TAAS_OPTIM_SGD);
    taas_engine *e = taas_engine_cpu(m, loss, &none, err);  /* takes m */
    if (!e) return -1;
    double sum = 0, right = 0;
    uint64_t n = 0;
    int rc = 0;
    for (;;) {
        taas_batch *b = NULL;
        double ls, r;
        if ((rc = taas_pipeline_next(l->pipeline, &b, err)) != 0) break;
        rc = e->ops->eval(e, b, &ls, &r, err);
        if (rc == 0) sum += ls, right += r, n += b->n;
        taas_batch_free(b);
        if (rc) break;
    }
    e->ops->free(e);
    if (rc < 0) return -1;
    *samples = n;
    *mean_loss = n ? sum / (double)n : NAN;
    *accuracy = n ? right / (double)n : NAN;
    return 0;
}
