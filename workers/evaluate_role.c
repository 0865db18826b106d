/* An evaluate job: the loss and accuracy of a model (its weights from "weights") on the
 * job's "validate" loader. The kernel runs it as the one rank of a job (trainer_role.c);
 * `taas-worker evaluate` runs a spec by hand and prints one {"event": "done", "loss",
 * "accuracy", "samples"} line. */
#include <stdio.h>
#include <string.h>

#include "errnames.h"
#include "role.h"
#include "train_job.h"

json_t *taas_evaluate_spec(const json_t *job, taas_error *err) {
    const json_t *v = json_object_get(job, "version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's \"version\" must be 1");
        taas_error_hint(err, "this worker runs version 1 job specs (docs/jobspec.md); the kernel and worker may be of different builds");
        return NULL;
    }
    const char *kind = json_string_value(json_object_get(job, "job"));
    if (!kind || strcmp(kind, "evaluate") != 0) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "taas-worker evaluate runs \"job\": \"evaluate\", not %s%s%s",
                       kind ? "\"" : "", kind ? kind : "a spec without one", kind ? "\"" : "");
        taas_error_hint(err, "run fit jobs with taas-worker train");
        return NULL;
    }
    const json_t *w = json_object_get(job, "weights");
    const json_t *va = json_object_get(job, "validate");
    if (!json_is_string(w) || !va || json_is_null(va)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the evaluate job has no %s",
                       !json_is_string(w) ? "\"weights\" path" : "\"validate\" DataLoader");
        taas_error_hint(err, "evaluate needs trained weights and a loader: evaluate(model, DataLoader(test_set, batch_size=256))");
        return NULL;
    }
    long long units, seed;
    taas_train_loss loss;
    if (taas_train_kernels(job, err) ||
        taas_train_int(job, "the job spec", "units", 0, 0, INT64_MAX, &units, err) ||
        taas_train_int(job, "the job spec", "seed", 0, 0, INT64_MAX, &seed, err) ||
        taas_train_loss_parse(json_object_get(job, "loss"), &loss, err))
        return NULL;
    taas_fetcher *f = taas_cli_fetcher(err);
    if (!f) return NULL;
    json_t *out = NULL;
    taas_train_loader l;
    if (taas_train_loader_open(va, "validate", f, (uint64_t)seed, (uint64_t)units, 1, NULL, &l, err) == 0) {
        taas_model *m = taas_train_model(job, &l, err);
        double ml, acc;
        uint64_t n;
        if (m && taas_train_evaluate(m, &l, &loss, &ml, &acc, &n, err) == 0) {  /* takes m */
            out = json_object();
            json_object_set_new(out, "event", json_string("done"));
            json_object_set_new(out, "loss", json_real(ml));
            json_object_set_new(out, "accuracy", json_real(acc));
            json_object_set_new(out, "samples", json_integer((json_int_t)n));
        }
        taas_train_loader_close(&l);
    }
    taas_train_loss_free(&loss);
    taas_fetcher_free(f);
    return out;
}

int taas_role_evaluate(int argc, char **argv) {
    const char *spec_path;
    int rc = taas_train_spec_args(argc, argv, "evaluate",
                                  "usage: taas-worker evaluate --spec FILE|-\n\n"
                                  "Runs an evaluate job spec (docs/jobspec.md): the model with its \"weights\" on the\n"
                                  "\"validate\" loader, printing {\"event\": \"done\", \"loss\", \"accuracy\", \"samples\"}.",
                                  &spec_path);
    if (rc) return rc > 0 ? TAAS_EXIT_OK : TAAS_EXIT_USAGE;
    taas_error err;
    taas_error_clear(&err);
    json_t *job = taas_train_read(spec_path, &err);
    json_t *out = job ? taas_evaluate_spec(job, &err) : NULL;
    json_decref(job);
    if (!out) {
        taas_train_report(&err, -1);
        return TAAS_EXIT_ERROR;
    }
    return taas_train_emit(out) ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
