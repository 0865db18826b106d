/* Machine configurations: the built-in table and the user's JSON file
 * ($TAAS_CONFIG, else ~/.config/taas/config.json). The file is read on every lookup, so
 * an edit takes effect in the next cell without restarting the kernel. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config_file.h"
#include "errnames.h"
#include "pragma.h"
#include "shell.h"
#include "suggest.h"
#include "utf8.h"

#define PRAGMA_ERROR TAAS_ERR_PRAGMA
#define ENTRY_KEYS "\"gpus\" (GPUs per machine, 0 to 4096; 0 for a loader machine), " \
                   "\"cpus\" (CPU cores per machine, 1 to 65536) and optionally \"description\", " \
                   "\"price_per_hour\" (your price of one machine for an hour, in your unit), " \
                   "and for Slurm \"partition\", \"constraint\" and \"gres\" (where the machines are)"
/* The largest price_per_hour: a bound that keeps the cost estimates' sums finite and exact
 * enough, far above any machine's price in any currency. */
#define MAX_PRICE_PER_HOUR 1e9

/* 96 cores: what 8-GPU training machines commonly carry (2 sockets x 48); c1.4 is the
 * small CPU machine a loader worker runs on. */
static const taas_machine_config BUILTINS[] = {
    {.name = "g2.8", .gpus_per_machine = 8, .cpus_per_machine = 96,
     .description = "GPU machine: 8 GPUs, 96 CPU cores", .price_per_hour = -1},
    {.name = "c1.4", .gpus_per_machine = 0, .cpus_per_machine = 4,
     .description = "loader machine: 4 CPU cores, no GPUs", .price_per_hour = -1},
};
#define NBUILTINS (sizeof BUILTINS / sizeof BUILTINS[0])

static const char *const ENTRY_KEY_NAMES[] = {"gpus",      "cpus",       "description", "price_per_hour",
                                              "partition", "constraint", "gres"};
#define NENTRY_KEYS (sizeof ENTRY_KEY_NAMES / sizeof ENTRY_KEY_NAMES[0])

static int entry_int(const char *path, const char *name, const json_t *entry, const char *key,
                     long long lo, long long hi, int *out, taas_error *err) {
    char shown[200], hint[768];
    const json_t *v = json_object_get(entry, key);
    snprintf(hint, sizeof hint, "an entry reads \"%s\": {\"gpus\": 4, \"cpus\": 32}; it holds %s",
             name, ENTRY_KEYS);
    if (!v)
        return taas_cfile_error(err, path, hint, "configuration '%s' has no \"%s\"", name, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return taas_cfile_error(err, path, hint,
                                "configuration '%s': \"%s\" must be a whole number from %lld to %lld, not %s",
                                name, key, lo, hi, taas_cfile_shown(shown, sizeof shown, v));
    *out = (int)json_integer_value(v);
    return 0;
}

/* "partition", "constraint" and "gres": words that go on sbatch's and salloc's command lines
 * (--partition, --constraint, --gres), as arguments of execve, never through a shell: 1 to
 * 63 bytes of the plain words' characters (shell.h, the rule of every value that reaches a
 * command), and extra (a constraint's & | [ ], Slurm's syntax). dst (64 bytes) stays ""
 * when the key is absent. */
static int entry_slurm(const char *path, const char *name, const json_t *entry, const char *key,
                       const char *extra, const char *example, char *dst, size_t cap,
                       taas_error *err) {
    const json_t *v = json_object_get(entry, key);
    if (!v) return 0;
    char hint[512], shown[200], what[64];
    snprintf(hint, sizeof hint, "Slurm's --%s: 1 to %zu bytes of %s%s%s%s; e.g. \"%s\": \"%s\"", key, cap - 1,
             TAAS_SHELL_PLAIN_RULE, extra[0] ? "; it may also hold " : "", extra, extra[0] ? " (Slurm's syntax)" : "",
             key, example);
    if (!json_is_string(v))
        return taas_cfile_error(err, path, hint, "configuration '%s': \"%s\" must be a string, not %s",
                                name, key, taas_cfile_kind(v));
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len == 0)
        return taas_cfile_error(err, path, hint, "configuration '%s': \"%s\" is empty", name, key);
    if (len >= cap)
        return taas_cfile_error(err, path, hint, "configuration '%s': \"%s\" is %zu bytes long; at most %zu fit",
                                name, key, len, cap - 1);
    if (s[0] == '-')
        return taas_cfile_error(err, path, hint,
                                "configuration '%s': \"%s\" starts with '-', which sbatch would read as an option: %s",
                                name, key, taas_cfile_shown(shown, sizeof shown, v));
    for (size_t i = 0; i < len; i++) {
        if (taas_shell_plain_char(s[i]) || (s[i] != ' ' && strchr(extra, s[i]))) continue;
        return taas_cfile_error(err, path, hint, "configuration '%s': \"%s\" may not contain %s: %s", name, key,
                                taas_utf8_char_name(what, sizeof what, s + i),
                                taas_cfile_shown(shown, sizeof shown, v));
    }
    memcpy(dst, s, len + 1);
    return 0;
}

/* "price_per_hour": optional, a JSON number from 0 to MAX_PRICE_PER_HOUR in the user's own
 * unit (jansson refuses NaN and infinities, and numbers that overflow a double). *out stays
 * -1 when the key is absent: a price is never invented. */
static int entry_price(const char *path, const char *name, const json_t *entry, double *out,
                       taas_error *err) {
    const json_t *v = json_object_get(entry, "price_per_hour");
    *out = -1;
    if (!v) return 0;
    char hint[512], shown[200];
    snprintf(hint, sizeof hint,
             "write what one %s machine costs you for an hour, a number from 0 to 1e9 in any unit you "
             "choose (the same in every entry), e.g. \"price_per_hour\": 12.5; it gives the plan's "
             "cost estimate and the unit of --budget",
             name);
    if (!json_is_number(v))
        return taas_cfile_error(err, path, hint,
                                "configuration '%s': \"price_per_hour\" must be a number (the price of one "
                                "machine for one hour, in your unit), not %s",
                                name, taas_cfile_kind(v));
    double x = json_number_value(v);
    if (!isfinite(x))  /* not from jansson's parser, but cheap to refuse */
        return taas_cfile_error(err, path, hint, "configuration '%s': \"price_per_hour\" is not finite", name);
    if (x < 0)
        return taas_cfile_error(err, path, hint, "configuration '%s': \"price_per_hour\" is %s, a negative price",
                                name, taas_cfile_shown(shown, sizeof shown, v));
    if (x > MAX_PRICE_PER_HOUR)
        return taas_cfile_error(err, path, hint,
                                "configuration '%s': \"price_per_hour\" is %s, above the largest price "
                                "(1e9 = 1000000000)",
                                name, taas_cfile_shown(shown, sizeof shown, v));
    *out = x == 0 ? 0 : x;  /* -0.0 as 0 */
    return 0;
}

static int parse_entry(const char *path, const char *key, const json_t *val,
                       taas_machine_config *c, taas_error *err) {
    char name[200];
    taas_cfile_quoted(name, sizeof name, key);
    if (!taas_cfile_valid_name(key))
        return taas_cfile_error(err, path, TAAS_CONFIG_NAME_RULE ", e.g. \"g4.4\"",
                                "configuration name '%s' is not valid", name);
    if (!json_is_object(val)) {
        char hint[256];
        snprintf(hint, sizeof hint, "write \"%s\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"...\"}", key);
        return taas_cfile_error(err, path, hint, "configuration '%s' must be an object, not %s", name,
                                taas_cfile_kind(val));
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)val, k, v) {
        size_t i = 0;
        while (i < NENTRY_KEYS && strcmp(k, ENTRY_KEY_NAMES[i])) i++;
        if (i == NENTRY_KEYS) {
            char kshown[200], hint[768], dym[160];
            taas_cfile_did_you_mean(dym, sizeof dym, k, ENTRY_KEY_NAMES, NENTRY_KEYS);
            /* "price", "cost", "cost_per_hour", "pricePerHour": too far for the edit distance */
            if (!dym[0] && (strcasestr(k, "price") || strcasestr(k, "cost")))
                snprintf(dym, sizeof dym, "did you mean price_per_hour? ");
            snprintf(hint, sizeof hint, "%san entry holds %s", dym, ENTRY_KEYS);
            return taas_cfile_error(err, path, hint, "configuration '%s' has an unknown key \"%s\"", name,
                                    taas_cfile_quoted(kshown, sizeof kshown, k));
        }
    }
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", key);
    if (entry_int(path, key, val, "gpus", 0, TAAS_CONFIG_MAX_GPUS, &c->gpus_per_machine, err)) return -1;
    if (entry_int(path, key, val, "cpus", 1, TAAS_CONFIG_MAX_CPUS, &c->cpus_per_machine, err)) return -1;
    const json_t *d = json_object_get(val, "description");
    if (d) {
        if (!json_is_string(d))
            return taas_cfile_error(err, path, "write a short text, e.g. \"description\": \"4 GPUs, 32 cores\"",
                                    "configuration '%s': \"description\" must be a string, not %s", name,
                                    taas_cfile_kind(d));
        if (json_string_length(d) >= sizeof c->description)
            return taas_cfile_error(err, path, "shorten the description",
                                    "configuration '%s': \"description\" is %zu bytes long; at most %zu fit",
                                    name, json_string_length(d), sizeof c->description - 1);
        snprintf(c->description, sizeof c->description, "%s", json_string_value(d));
    }
    if (entry_price(path, name, val, &c->price_per_hour, err)) return -1;
    if (entry_slurm(path, name, val, "partition", "", "gpu", c->partition, sizeof c->partition, err) ||
        entry_slurm(path, name, val, "constraint", "& | [ ]", "a100&ib", c->constraint, sizeof c->constraint,
                    err) ||
        entry_slurm(path, name, val, "gres", "", "gpu:a100:8", c->gres, sizeof c->gres, err))
        return -1;
    return 0;
}

/* The file's "configurations" (the root is checked by taas_cfile_load). */
static int parse_root(const char *path, json_t *root, taas_machine_config **out, size_t *n,
                      taas_error *err) {
    json_t *cfgs = json_object_get(root, "configurations");
    if (!cfgs) return 0;
    if (!json_is_object(cfgs))
        return taas_cfile_error(err, path, "the file reads " TAAS_CONFIG_FILE_FORMAT,
                                "\"configurations\" must be an object mapping names to machines, not %s",
                                taas_cfile_kind(cfgs));
    size_t count = json_object_size(cfgs);
    if (count == 0) return 0;
    taas_machine_config *list = calloc(count, sizeof *list);
    if (!list) return taas_cfile_error(err, path, "", "out of memory reading %zu configurations", count);
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(cfgs, k, v) {
        if (parse_entry(path, k, v, &list[i], err)) {
            free(list);
            return -1;
        }
        i++;
    }
    *out = list;
    *n = i;
    return 0;
}

/* The user file's entries (malloc'd, in file order); none when the file does not exist. */
static int load_user(const char *path, taas_machine_config **out, size_t *n, taas_error *err) {
    *out = NULL;
    *n = 0;
    json_t *root;
    if (taas_cfile_load(path, &root, err)) return -1;
    if (!root) return 0;
    int rc = parse_root(path, root, out, n, err);
    json_decref(root);
    return rc;
}

/* Built-ins with the user's overrides applied, then the user's own. */
static int collect(taas_machine_config **out, size_t *n, char *path, size_t pathcap,
                   taas_error *err) {
    *out = NULL;
    *n = 0;
    if (taas_cfile_path(path, pathcap, err)) return -1;
    taas_machine_config *user;
    size_t nuser;
    if (load_user(path, &user, &nuser, err)) return -1;
    taas_machine_config *all = calloc(NBUILTINS + nuser, sizeof *all);
    if (!all) {
        free(user);
        return taas_cfile_error(err, path, "", "out of memory listing configurations");
    }
    memcpy(all, BUILTINS, sizeof BUILTINS);
    size_t k = NBUILTINS;
    for (size_t i = 0; i < nuser; i++) {
        size_t j = 0;
        while (j < NBUILTINS && strcmp(all[j].name, user[i].name)) j++;
        if (j < NBUILTINS)
            all[j] = user[i];
        else
            all[k++] = user[i];
    }
    free(user);
    *out = all;
    *n = k;
    return 0;
}

int taas_config_list(taas_machine_config **out, size_t *n, taas_error *err) {
    char path[4096];
    return collect(out, n, path, sizeof path, err);
}

int taas_config_find(const char *name, taas_machine_config *out, taas_error *err) {
    char path[4096];
    taas_machine_config *all;
    size_t n;
    if (!name) name = "";
    if (collect(&all, &n, path, sizeof path, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(all[i].name, name)) {
            *out = all[i];
            free(all);
            return 0;
        }
    }
    /* Not found: suggest the closest name and list them all, with where to add one. */
    taas_buf hint = TAAS_BUF_INIT;
    const char **names = calloc(n ? n : 1, sizeof *names);
    for (size_t i = 0; names && i < n; i++) names[i] = all[i].name;
    int close = names ? taas_suggest(name, strlen(name), names, n) : -1;
    free(names);
    if (close >= 0) taas_buf_printf(&hint, "did you mean %s? ", all[close].name);
    taas_buf_puts(&hint, "known configurations: ");
    for (size_t i = 0; i < n; i++) {
        if (all[i].gpus_per_machine > 0)
            taas_buf_printf(&hint, "%s%s (%d GPUs, %d CPUs)", i ? ", " : "", all[i].name,
                            all[i].gpus_per_machine, all[i].cpus_per_machine);
        else
            taas_buf_printf(&hint, "%s%s (no GPUs, %d CPUs)", i ? ", " : "", all[i].name,
                            all[i].cpus_per_machine);
    }
    char shown[512];
    if (path[0])
        taas_buf_printf(&hint, "; add your own to %s (see docs/pragma.md)",
                        taas_utf8_clip(shown, sizeof shown, path, strlen(path), 120));
    else
        taas_buf_puts(&hint, "; add your own to a JSON file named by $TAAS_CONFIG (see docs/pragma.md)");
    free(all);
    taas_error_set(err, PRAGMA_ERROR, (taas_srcpos){0, 0}, "unknown machine configuration '%s'",
                   taas_utf8_clip(shown, sizeof shown, name, strlen(name), 40));
    taas_utf8_clip(err->hint, sizeof err->hint, hint.data, hint.len, sizeof err->hint);
    taas_buf_free(&hint);
    return -1;
}
