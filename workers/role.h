/* taas-worker's roles and what they share: the command line, the spec they are given, and
 * how they report errors. A role is one entry of the dispatch table in main.c. */
#ifndef TAAS_ROLE_H
#define TAAS_ROLE_H

#include <jansson.h>
#include <stdio.h>

#include "error.h"
#include "fetch.h"

/* Exit statuses of every role. */
enum { TAAS_EXIT_OK = 0, TAAS_EXIT_ERROR = 1, TAAS_EXIT_USAGE = 2 };

/* A role's entry point: argv[0] is the role's name, the options follow. */
typedef int (*taas_role_fn)(int argc, char **argv);

int taas_role_probe(int argc, char **argv);
int taas_role_show(int argc, char **argv);
int taas_role_generate(int argc, char **argv);
int taas_role_trainer(int argc, char **argv);
int taas_role_loader(int argc, char **argv);
int taas_role_gpus(int argc, char **argv);

/* One option of a role: "--name VALUE" or "--name=VALUE" (has_arg), or a bare flag. */
typedef struct taas_opt {
    const char *name;      /* without the dashes: "spec" */
    int has_arg;
    const char **value;    /* set to the argument (or "1" for a flag) when given */
} taas_opt;

/* Parses argv[1..argc) against opts (terminated by a NULL name). Errors name the option
 * and suggest the closest known one. */
int taas_cli_parse(int argc, char **argv, const taas_opt *opts, taas_error *err);

/* An integer option in [min, max]. */
int taas_cli_int(const char *flag, const char *text, long long min, long long max, long long *out,
                 taas_error *err);

/* The spec from a file, or stdin for "-": a JSON object with a "type". */
json_t *taas_cli_read_spec(const char *path, taas_error *err);

/* The dataset part of a spec: the spec itself, or a DataLoader spec's "dataset". */
const json_t *taas_cli_dataset_spec(const json_t *spec, taas_error *err);

/* A fetcher with the default options (and the environment's overrides). */
taas_fetcher *taas_cli_fetcher(taas_error *err);

/* A JSON string of s, made valid UTF-8 (bad bytes become U+FFFD). */
json_t *taas_cli_text(const char *s);

/* {"error": {"ename", "message", "hint"}} and a newline. */
void taas_cli_report(FILE *to, const taas_error *err);

/* Writes j as one compact line to `to`; -1 when the write fails. */
int taas_cli_print_json(FILE *to, const json_t *j);

#endif
