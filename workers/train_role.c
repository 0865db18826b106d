/* taas-worker train: runs a fit job (docs/jobspec.md) in this one process — rank 0 of 1 of
 * fit_loop.h — and reports its progress as JSON lines on stdout. SIGINT/SIGTERM end it after
 * the step in progress, with the weights of the last completed step written. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "errnames.h"
#include "fit_loop.h"
#include "role.h"
#include "train_job.h"

/* Set by the signal handler, read between steps: a signal cannot carry a pointer. The loop
 * takes a volatile int; glibc's sig_atomic_t is that type. */
_Static_assert(__builtin_types_compatible_p(sig_atomic_t, int), "sig_atomic_t is int");
static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void emit_line(void *ctx, json_t *line) {
    (void)ctx;
    taas_train_emit(line);
}

static int run(const json_t *job, long long *step, taas_error *err) {
    const char *out = json_string_value(json_object_get(job, "out"));
    if (!out || !*out) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec has no \"out\" path for the trained weights");
        taas_error_hint(err, "give \"out\": \"PATH.safetensors\"");
        return -1;
    }
    taas_collective solo = taas_collective_solo();
    /* a GPU when there is one, as a rank would */
    taas_fit_cfg cfg = {.job = job, .coll = &solo, .emit = emit_line, .stop = &g_stop,
                        .device = taas_engine_cuda_devices() > 0 ? 0 : -1};
    taas_fit *f = taas_fit_new(&cfg, err);
    if (!f) return -1;
    int rc = taas_fit_run(f, step, err);
    if (rc == 0) rc = taas_fit_save(f, out, err);
    if (rc == 0) {
        json_t *done = taas_fit_done(f);
        json_object_set_new(done, "weights", taas_cli_text(out));
        rc = taas_train_emit(done);
    }
    taas_fit_free(f);
    return rc;
}

int taas_role_train(int argc, char **argv) {
    const char *spec_path;
    int rc0 = taas_train_spec_args(argc, argv, "train",
                                   "usage: taas-worker train --spec FILE|-\n\n"
                                   "Runs a fit job spec (docs/jobspec.md): trains the model on the \"train\" loader,\n"
                                   "validates after each epoch, writes the weights to \"out\" (safetensors) and prints\n"
                                   "progress as JSON lines (start, step, epoch, done, error) on stdout.\n"
                                   "SIGINT/SIGTERM stop it after the step in progress, weights written.",
                                   &spec_path);
    if (rc0) return rc0 > 0 ? TAAS_EXIT_OK : TAAS_EXIT_USAGE;
    taas_error err;
    taas_error_clear(&err);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    json_t *job = taas_train_read(spec_path, &err);
    long long step = 0;
    int rc = job ? run(job, &step, &err) : -1;
    if (rc) taas_train_report(&err, step > 0 ? step : -1);
    json_decref(job);
    return rc ? TAAS_EXIT_ERROR : TAAS_EXIT_OK;
}
