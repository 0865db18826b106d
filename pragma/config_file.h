/* Private to pragma/: the configuration file ($TAAS_CONFIG, else ~/.config/taas/config.json)
 * as config.c (its "configurations") and cluster.c (its "cluster" section) both read it:
 * where it is, loading its JSON root, and the pieces of its TaasConfigError messages. */
#ifndef TAAS_CONFIG_FILE_H
#define TAAS_CONFIG_FILE_H

#include <jansson.h>
#include <stddef.h>

#include "errnames.h"
#include "error.h"

#define TAAS_CONFIG_ERROR TAAS_ERR_CONFIG
#define TAAS_CONFIG_MAX_GPUS 4096
#define TAAS_CONFIG_MAX_CPUS 65536
#define TAAS_CONFIG_FILE_FORMAT \
    "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"...\"}}}"
#define TAAS_CONFIG_TOP_KEYS \
    "the top-level keys are \"configurations\" (machine configurations, e.g. " \
    "{\"g4.4\": {\"gpus\": 4, \"cpus\": 32}}) and \"cluster\" (where jobs run, e.g. " \
    "{\"backend\": \"slurm\"}); see docs/pragma.md"

/* "<path>: <what>" with the hint; the path is clipped so that the message keeps its point.
 * Returns -1. */
int taas_cfile_error(taas_error *err, const char *path, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "an object", "an integer", ... for "must be ..., not <kind>". */
const char *taas_cfile_kind(const json_t *v);

/* A JSON value as the user wrote it (compact, cut to 40 code points), for "not <value>". */
const char *taas_cfile_shown(char *dst, size_t cap, const json_t *v);

/* Text from the file as a message quotes it: valid UTF-8, cut to 40 code points. */
const char *taas_cfile_quoted(char *dst, size_t cap, const char *s);

/* "did you mean <closest>? " when one of known[0..n) is close to word, else "". */
const char *taas_cfile_did_you_mean(char *dst, size_t cap, const char *word,
                                    const char *const *known, size_t n);

/* 1 when s is a valid name: 1 to 63 of letters, digits, '.', '_' and '-'. */
int taas_cfile_valid_name(const char *s);
#define TAAS_CONFIG_NAME_RULE "a name uses letters, digits, '.', '_' and '-', at most 63 of them"

/* The file's path: $TAAS_CONFIG, else ~/.config/taas/config.json; "" without either. -1 with
 * an error when it does not fit in cap bytes. */
int taas_cfile_path(char *buf, size_t cap, taas_error *err);

/* The file's JSON root, checked to be an object whose keys are "configurations" and
 * "cluster": 0 with *root (the caller decrefs it), or with *root NULL when there is no file
 * (path "" or a file that does not exist); -1 with an error when it cannot be read (a
 * directory, a FIFO, anything but a regular file), is not JSON or has another top level. */
int taas_cfile_load(const char *path, json_t **root, taas_error *err);

#endif
