/* The header directives of a cell (docs/design.md §4): `#!CONFIG` and
 * `#pragma taas --gpus N [--cpus M|auto[:MAX]] [--units U] [--budget B] [--detach]`, parsed
 * and validated before anything runs. Machine configurations come from a built-in table
 * (g2.8, c1.4) and from a user JSON file ($TAAS_CONFIG, else ~/.config/taas/config.json). */
#ifndef TAAS_PRAGMA_H
#define TAAS_PRAGMA_H

#include <stddef.h>

#include "error.h"

typedef struct taas_machine_config {
    char name[64];         /* "g2.8" */
    int gpus_per_machine;  /* 8 for g2.8; 0 for a CPU-only (loader) machine */
    int cpus_per_machine;
    char description[160];
    /* Slurm: where the configuration's machines are (sbatch --partition, --constraint,
     * --gres); "" when the configuration file does not say */
    char partition[64];    /* "gpu" */
    char constraint[64];   /* "a100&ib" */
    char gres[64];         /* "gpu:a100:8" */
    /* the user's price of one machine of this configuration for one hour, in whatever unit
     * the user chose (the plan line's cost estimate, --budget); -1 when the file gives none,
     * and for the built-ins: no price is ever invented */
    double price_per_hour;
} taas_machine_config;

/* taas_pragma.budget_kind */
#define TAAS_BUDGET_MONEY 1  /* --budget 25: in the unit of the configuration file's price_per_hour */
#define TAAS_BUDGET_TIME 2   /* --budget 2h: seconds */

typedef struct taas_pragma {
    int present;             /* 1 when the cell has a #pragma taas line */
    int line;                /* its line (1-based) */
    int gpus;                /* --gpus N (ranks), >= 1 */
    int cpus;                /* --cpus M, loader workers per registered loader, 1..8; default 1;
                              * with --cpus auto: the starting pool, 1 */
    int cpus_auto;           /* 1 with --cpus auto or auto:MAX: the pool sizes itself while the
                              * job runs (docs/offload.md, "A pool that sizes itself") */
    int cpus_max;            /* auto's MAX (1..8); 0 when auto has no :MAX (the backend's default
                              * applies), and without auto */
    long long units;         /* --units U, samples drawn before stopping; 0 = no limit */
    int budget_kind;         /* 0: no --budget; TAAS_BUDGET_MONEY or TAAS_BUDGET_TIME */
    double budget;           /* the amount (money, > 0, at most 2^53) or seconds (time, > 0, at
                              * most 365 days); 0 without --budget */
    char budget_text[48];    /* the budget as the cell wrote it, underscores dropped: "2.50",
                              * "1.5h"; what messages show */
    int detach;              /* --detach: the cell's fit outlives the kernel (docs/offload.md) */
    int has_config;          /* 1 when a #!CONFIG line named a configuration */
    taas_machine_config config;  /* with has_config; otherwise zeroed but for
                                  * price_per_hour, -1 (no price) */
    int machines;            /* GPU machines: gpus / gpus_per_machine (1 without a config) */
    int ranks_per_machine;
    int body_line;           /* first line after the header (1-based) */
} taas_pragma;

/* Scans the cell's header (comment and blank lines before the first statement).
 * A cell without directives gives present = 0 and returns 0. Any directive error (unknown
 * flag, bad or missing number, out-of-range value, a bad --cpus auto:MAX or --budget, unknown configuration, --gpus not a
 * multiple of the configuration's GPUs per machine, duplicate directive, a directive after
 * code, #!CONFIG without #pragma taas) returns -1 with a TaasPragmaError pointing at it. */
int taas_pragma_parse(const char *cell, taas_pragma *out, taas_error *err);

/* Configuration by name: user file first, then built-ins. -1 with an error naming the
 * known configurations when there is none, or when the user file is unreadable JSON. */
int taas_config_find(const char *name, taas_machine_config *out, taas_error *err);

/* Every known configuration: the built-ins (as the user file overrides them), then the user
 * file's own in file order. *out is malloc'd (the caller frees it). -1 with an error when
 * the user file is unreadable or malformed. For hints, completion and help. */
int taas_config_list(taas_machine_config **out, size_t *n, taas_error *err);

#endif
