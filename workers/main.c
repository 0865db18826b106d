/* taas-worker: one binary, one role per process, chosen by the first argument. The kernel
 * runs `probe` and `show` to look at data (it does not link the data loading library
 * itself); every fit() and evaluate() is a job whose `trainer` ranks (one, or mpirun's or
 * srun's) and `loader` workers a backend starts; `train` and `evaluate` run a job spec by
 * hand. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "errnames.h"
#include "role.h"
#include "suggest.h"
#include "train_job.h"
#include "utf8.h"

typedef struct role_row {
    const char *name;
    taas_role_fn run;
    int dies_with_parent;  /* a helper of the kernel: stop when the kernel is gone */
    const char *usage;
    const char *summary;
} role_row;

static const role_row ROLES[] = {
    {"probe", taas_role_probe, 1, "probe --spec FILE|-",
     "print one JSON line about a dataset or DataLoader spec: type, size, sample shape after "
     "the transform, classes, source, batches per epoch"},
    {"show", taas_role_show, 1, "show --spec FILE|- [--n N] [--seed S]",
     "write a PNG grid of N samples (default 16) with their labels to stdout, and one JSON "
     "line (text fallback, indices, labels) to stderr"},
    {"generate", taas_role_generate, 1, "generate --spec FILE|-",
     "new tokens from a model of tokens and its weights (generate() in a notebook): one JSON "
     "line {\"tokens\": [...]} on stdout"},
    {"train", taas_role_train, 1, "train --spec FILE|-",
     "run a fit job spec (docs/jobspec.md): train, validate each epoch, write the weights; "
     "progress and errors as {\"event\": ...} lines on stdout"},
    {"evaluate", taas_role_evaluate, 1, "evaluate --spec FILE|-",
     "run an evaluate job spec: loss and accuracy of the weights on the validate loader, as "
     "one {\"event\": \"done\"} line (errors: {\"event\": \"error\"})"},
    {"trainer", taas_role_trainer, 1, "trainer --control ENDPOINT [--solo] [--keys-from munge|PATH]",
     "one rank of a job (under mpirun or srun; --solo: the one rank of a job of one): joins "
     "the kernel's control plane, receives the spec, trains its share of each step, sums the "
     "gradients with the other ranks over MPI"},
    {"loader", taas_role_loader, 1, "loader --control ENDPOINT --stream S --worker J",
     "one loader worker of a job: joins the kernel's control plane, makes its share of a "
     "registered DataLoader's batches and streams them to the ranks under their credit"},
    {"gpus", taas_role_gpus, 1, "gpus",
     "print one JSON line about this machine's GPUs as a rank would use them: count, and each "
     "one's index, name and memory (count 0 without the CUDA plugin, a driver or a GPU)"},
};
#define N_ROLES (sizeof ROLES / sizeof ROLES[0])

static void usage(FILE *to) {
    fputs("usage: taas-worker ROLE [OPTIONS]\n", to);
    for (size_t i = 0; i < N_ROLES; i++) fprintf(to, "       taas-worker %s\n", ROLES[i].usage);
    fputs("       taas-worker --help | --version\n", to);
}

static void help(void) {
    printf("taas-worker %s - the data and training processes of taas.\n\n", TAAS_VERSION);
    usage(stdout);
    puts("\nRoles:");
    for (size_t i = 0; i < N_ROLES; i++) printf("  %-9s %s\n", ROLES[i].name, ROLES[i].summary);
    puts("\nprobe and show take the JSON spec that taas-kernel builds from a dataset or\n"
         "DataLoader value (--spec - reads it from stdin); their errors are one JSON line\n"
         "{\"error\": {\"ename\", \"message\", \"hint\"}} (probe: on stdout, show: on stderr).\n"
         "train and evaluate take a job spec (docs/jobspec.md) and report in progress lines,\n"
         "an error as {\"event\": \"error\", ...}. Errors exit with status 1, bad options 2.");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TAAS_EXIT_USAGE;
    }
    const char *role = argv[1];
    if (!strcmp(role, "--help") || !strcmp(role, "-h")) {
        help();
        return TAAS_EXIT_OK;
    }
    if (!strcmp(role, "--version")) {
        printf("taas-worker %s\n", TAAS_VERSION);
        return TAAS_EXIT_OK;
    }
    for (size_t i = 0; i < N_ROLES; i++) {
        if (strcmp(ROLES[i].name, role) != 0) continue;
        if (ROLES[i].dies_with_parent) prctl(PR_SET_PDEATHSIG, SIGKILL);
        return ROLES[i].run(argc - 1, argv + 1);
    }
    const char *names[N_ROLES];
    for (size_t i = 0; i < N_ROLES; i++) names[i] = ROLES[i].name;
    int s = taas_suggest(role, strlen(role), names, N_ROLES);
    char q[64];
    taas_error err;
    taas_error_clear(&err);
    taas_error_set(&err, TAAS_ERR_USAGE, (taas_srcpos){0, 0}, "unknown role '%s'",
                   taas_utf8_clip(q, sizeof q, role, strlen(role), 40));
    if (s >= 0)
        taas_error_hint(&err, "did you mean '%s'? taas-worker --help lists the roles", names[s]);
    else
        taas_error_hint(&err, "taas-worker --help lists the roles");
    taas_cli_report(stderr, &err);
    return TAAS_EXIT_USAGE;
}
