/* fit(), evaluate(), save(), load() and from_pretrained(): the actions on a model's weights
 * (action_fit.c, action_weights.c, action_pretrained.c). Private to the builtin table. */
#ifndef TAAS_FIT_H
#define TAAS_FIT_H

#include <jansson.h>
#include <stddef.h>

#include "rows.h"

int taas_fit_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
int taas_evaluate_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
int taas_save_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
int taas_load_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
int taas_from_pretrained_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
/* A GPT2Config from the text of a Hugging Face config.json (where: its name, for errors): its
 * GPT2Config keys, passing over those that change nothing of the model's training. */
int taas_gpt2_config_from_json(const char *text, size_t n, const char *where, taas_value **out, taas_error *err);

/* The model argument (index 0; load: 1) is a Sequential. */
int taas_fit_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err);
int taas_load_check(const taas_row *r, taas_value **a, const taas_srcpos *w, taas_error *err);

/* What a fit's job does when a rank dies, and where a resumed fit's checkpoint stands. */
typedef struct taas_fit_resume {
    int max_restarts;
    long long epoch, step;   /* 0-based epoch, step in it (the spec's "resume") */
    int kernels;             /* the checkpoint's kernel set (cpu.h), or -1 when it names none */
} taas_fit_resume;

/* action_job.c: fit() as a job, offloaded by the cell's pragma (pr), or one rank here (pr
 * NULL). Takes job (the fit job spec). */
struct taas_pragma;
int taas_fit_job(taas_call_ctx *cx, const struct taas_pragma *pr, json_t *job, taas_value *model,
                 taas_value *train, taas_value *validate, const taas_fit_resume *rs);
/* evaluate() as a job of one rank here: its result is the Evaluation. Takes job. */
int taas_evaluate_job(taas_call_ctx *cx, json_t *job, taas_value *model);

/* action_detach.c: cfg's job (a #pragma taas --detach cell's fit, cfg->dir a detached
 * job's folder) under a coordinator of its own, shown in the cell until it ends, when the
 * model gets its weights and the cell its History. */
struct taas_job_cfg;
int taas_fit_detached(taas_call_ctx *cx, const struct taas_job_cfg *cfg, taas_value *model);
/* jobs(), attach(job, into), cancel(job) */
int taas_jobs_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
int taas_attach_action(taas_call_ctx *cx, taas_value **a, taas_value **out);
int taas_cancel_action(taas_call_ctx *cx, taas_value **a, taas_value **out);

/* A new, private job folder $TMPDIR/taas-job-XXXXXX; -1 with the error in cx. */
int taas_job_folder(taas_call_ctx *cx, char *dir, size_t n);
/* Gives the model a private copy of the weights file at path, in a job folder of its own
 * (owned): the user's file may change or go. -1 with the error in cx. */
int taas_weights_copy_in(taas_call_ctx *cx, taas_value *model, const char *path);
/* Gives the model path as its weights (taas_weights_replace): 0, or -1 out of memory (the
 * model keeps what it had). */
int taas_weights_attach(taas_value *model, const char *path, int owned);

/* 0 when the call has the session (cx->interp); else -1 with a TaasInternalError. */
int taas_need_session(taas_call_ctx *cx, const char *name);
/* 0 when the model has weights; else -1 with "net has no trained weights yet ...". */
int taas_need_weights(taas_call_ctx *cx, const taas_value *model);
/* generate(model, prompt, max_new_tokens, temperature, top_k, seed): action_generate.c */
int taas_generate_action(taas_call_ctx *cx, taas_value **a, taas_value **out);

/* Gives the model the weights file path (malloc'd, taken), which it owns (owned: the file
 * goes with the model) or not; a file it owned before goes, with its folder. */
void taas_weights_replace(taas_value *model, char *path, int owned);

#endif
