/* The fit and evaluate jobs of docs/jobspec.md: `taas-worker train` and `taas-worker
 * evaluate`. What the two roles share: reading the job spec's parts (loss, optimizer,
 * scheduler), opening a DataLoader spec as dataset + transform + sampler + pipeline,
 * building the model with its weights, one evaluation pass, and the progress lines. */
#ifndef TAAS_TRAIN_JOB_H
#define TAAS_TRAIN_JOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "error.h"
#include "fetch.h"
#include "loss.h"
#include "lr_sched.h"
#include "model.h"
#include "optim.h"
#include "pipeline.h"
#include "sampler.h"
#include "transform.h"

int taas_role_train(int argc, char **argv);
int taas_role_evaluate(int argc, char **argv);

typedef enum taas_train_loss_kind { TAAS_JOB_NLL, TAAS_JOB_CROSS_ENTROPY } taas_train_loss_kind;

typedef struct taas_train_loss {
    taas_train_loss_kind kind;
    float label_smoothing;
    int64_t ignore_index; /* torch's: samples with this target count nowhere (-100 by default) */
    float *probs;      /* CrossEntropyLoss: softmax for the backward, grown as needed */
    size_t probs_cap;
} taas_train_loss;

/* The spec's "loss"; MSELoss and reductions other than mean are refused. */
int taas_train_loss_parse(const json_t *spec, taas_train_loss *out, taas_error *err);
void taas_train_loss_free(taas_train_loss *l);
/* Loss of out (n, c) against labels; with dout, also its gradient (n, c) times dloss. */
int taas_train_loss_run(taas_train_loss *l, const float *out, const int64_t *labels, int n, int c, float dloss,
                        float *dout, float *loss, taas_error *err);

/* The spec's "optimizer" (torch's defaults for what it leaves out), checked. */
int taas_train_optim_parse(const json_t *spec, taas_optim_config *cfg, taas_error *err);
/* The spec's "scheduler" (NULL or null: none, *has = 0), started at base_lr: one scheduler,
 * or SequentialLR's. OneCycleLR's total_steps None is epochs * steps_per_epoch, where
 * steps_per_epoch counts the scheduler's steps (1 when it steps per epoch). */
int taas_train_sched_parse(const json_t *spec, double base_lr, long epochs, long steps_per_epoch, taas_sched *s,
                           int *has, taas_error *err);

/* A DataLoader spec opened for one rank. */
typedef struct taas_train_loader {
    taas_dataset *dataset;
    taas_transform *transform;
    taas_sampler *sampler;
    taas_pipeline *pipeline;
    int c, h, w;               /* sample shape after the transform */
    int num_classes;
    int tokens;                /* a token dataset: (T + 1, 1, 1) samples (dataset.h) */
    uint64_t steps;            /* steps per epoch (batches per rank) */
    uint64_t per_epoch;        /* samples per epoch, all ranks */
    uint32_t rank, world;      /* this rank r of W */
    int rank_pipeline;         /* this process makes its batches (else loader workers do) */
} taas_train_loader;

/* Which rank opens a loader: r of W, and whether it makes its own batches (an unregistered
 * loader: a pipeline of its items k % W == r) or receives them from loader workers. */
typedef struct taas_train_rank {
    uint32_t rank, world;
    int pipeline;
    /* with pipeline 0: {"size", "shape", "num_classes"} of the dataset after its transform, as
     * the kernel's probe found them, so that a rank need not read data it never loads; NULL:
     * open the dataset for them */
    const json_t *facts;
} taas_train_rank;

/* what: "train" or "validate", for messages. epochs: how many epochs the pipeline makes.
 * rank NULL: rank 0 of 1 with its pipeline (a local fit or evaluate). */
int taas_train_loader_open(const json_t *spec, const char *what, taas_fetcher *f, uint64_t seed,
                         uint64_t units, uint64_t epochs, const taas_train_rank *rank, taas_train_loader *out,
                         taas_error *err);
/* The pipeline settings for l's dataset, transform and sampler from a DataLoader spec
 * (num_workers: decode threads, prefetch_factor: batches ready per thread), as rank r of W
 * makes them (loader r of W); epochs 0. A loader worker changes which items it makes. */
int taas_train_pipeline_cfg(const json_t *spec, const taas_train_loader *l, uint64_t seed, taas_pipeline_cfg *pc,
                          taas_error *err);
/* A fresh pipeline over the same sampler (for one more validation pass). */
int taas_train_loader_restart(taas_train_loader *l, const json_t *spec, uint64_t seed, uint64_t epochs,
                            taas_error *err);
/* The pipeline again, from step `step` of epoch `epoch` to the end of `epochs` (a fit
 * resumed from a checkpoint). */
int taas_train_loader_seek(taas_train_loader *l, const json_t *spec, uint64_t seed, uint64_t epoch, uint64_t step,
                         uint64_t epochs, taas_error *err);
/* Epoch items from step `step` on that are loader j of m's (k >= step * W, k % m == j):
 * malloc'd, *n of them. */
uint64_t *taas_train_resume_items(const taas_train_loader *l, uint64_t step, uint32_t j, uint32_t m, size_t *n,
                                taas_error *err);
void taas_train_loader_close(taas_train_loader *l);

/* The model of the job spec for inputs of the loader's shape, its weights from "weights"
 * when given. */
taas_model *taas_train_model(const json_t *job, const taas_train_loader *l, taas_error *err);
int taas_train_save(const taas_model *m, const char *path, taas_error *err);

/* One eval-mode pass over the loader's pipeline: mean loss and accuracy over its samples (a
 * token model's over its tokens). Takes m: it is freed, whatever the result. */
int taas_train_evaluate(taas_model *m, taas_train_loader *l, taas_train_loss *loss, double *mean_loss,
                      double *accuracy, uint64_t *samples, taas_error *err);

/* Spec fields: a number / integer / string of the job spec, with a clear error. */
int taas_train_int(const json_t *o, const char *ctx, const char *key, long long dflt, long long min,
                 long long max, long long *out, taas_error *err);

/* The spec's "kernels" (docs/jobspec.md), the set the kernel chose for every rank: this
 * process takes it (cpu.h, and OpenBLAS's core with it) before its model exists. A spec
 * without one keeps the process's own set. 0, or -1 with err. */
int taas_train_kernels(const json_t *job, taas_error *err);

/* Runs an evaluate job spec (docs/jobspec.md): {"event": "done", "loss", "accuracy",
 * "samples"} (new reference), or NULL with err. evaluate_role.c. */
json_t *taas_evaluate_spec(const json_t *job, taas_error *err);

/* The job spec from a file, or stdin for "-": a JSON object. */
json_t *taas_train_read(const char *path, taas_error *err);

/* {"event": "error", ...} on stdout; step < 0 prints null. */
void taas_train_report(const taas_error *err, long long step);
/* The command line of a role that runs a spec (train, evaluate, generate): --spec FILE|- and
 * --help. 0 with *spec_path; 1 when help (`help`, the role's usage text) was printed; -1
 * when the line is wrong, reported as an error line. */
int taas_train_spec_args(int argc, char **argv, const char *role, const char *help, const char **spec_path);
/* One compact progress line on stdout, flushed; steals j. */
int taas_train_emit(json_t *j);

#endif
