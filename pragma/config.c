/* Machine configurations: the built-in table and the user's JSON file
 * ($TAAS_CONFIG, else ~/.config/taas/config.json). The file is read on every lookup, so
 * an edit takes effect in the next cell without restarting the kernel. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "pragma.h"
#include "suggest.h"
#include "utf8.h"

#define CONFIG_ERROR "TaasConfigError"
#define PRAGMA_ERROR "TaasPragmaError"
#define MAX_GPUS 4096
#define MAX_CPUS 65536
#define FILE_FORMAT "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"...\"}}}"
#define ENTRY_KEYS "\"gpus\" (GPUs per machine, 0 to 4096; 0 for a loader machine), " \
                   "\"cpus\" (CPU cores per machine, 1 to 65536) and optionally \"description\""

/* 96 cores: what 8-GPU training machines commonly carry (2 sockets x 48); c1.4 is the
 * small CPU machine a loader worker runs on. */
static const taas_machine_config BUILTINS[] = {
    {"g2.8", 8, 96, "GPU machine: 8 GPUs, 96 CPU cores"},
    {"c1.4", 0, 4, "loader machine: 4 CPU cores, no GPUs"},
};
#define NBUILTINS (sizeof BUILTINS / sizeof BUILTINS[0])

static int file_error(taas_error *err, const char *path, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "<path>: <what>" with the hint; the path is clipped so that the message keeps its point. */
static int file_error(taas_error *err, const char *path, const char *hint, const char *fmt, ...) {
    char shown[512], what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    taas_utf8_clip(shown, sizeof shown, path, strlen(path), 120);
    taas_error_set(err, CONFIG_ERROR, (taas_srcpos){0, 0}, "%s: %s", shown, what);
    taas_error_hint(err, "%s", hint);
    return -1;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number with a fraction";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    default: return "null";
    }
}

/* A JSON value as the user wrote it, for "must be ..., not <value>". */
static const char *json_shown(char *dst, size_t cap, const json_t *v) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!s) return json_kind(v);
    taas_utf8_clip(dst, cap, s, strlen(s), 40);
    free(s);
    return dst;
}

static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof ((taas_machine_config *)0)->name) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* The user file's path: $TAAS_CONFIG, else ~/.config/taas/config.json; "" without either. */
static int user_path(char *buf, size_t cap, taas_error *err) {
    const char *env = getenv("TAAS_CONFIG");
    const char *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(buf, cap, "%s", env);
    else if (home && *home)
        n = snprintf(buf, cap, "%s/.config/taas/config.json", home);
    else
        n = snprintf(buf, cap, "%s", "");
    if (n < 0 || (size_t)n >= cap)
        return file_error(err, buf, "set $TAAS_CONFIG to a shorter path",
                          "the configuration file's path is longer than %zu bytes", cap - 1);
    return 0;
}

static int entry_int(const char *path, const char *name, const json_t *entry, const char *key,
                     long long lo, long long hi, int *out, taas_error *err) {
    char shown[200], hint[512];
    const json_t *v = json_object_get(entry, key);
    snprintf(hint, sizeof hint, "an entry reads \"%s\": {\"gpus\": 4, \"cpus\": 32}; it holds %s",
             name, ENTRY_KEYS);
    if (!v)
        return file_error(err, path, hint, "configuration '%s' has no \"%s\"", name, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return file_error(err, path, hint,
                          "configuration '%s': \"%s\" must be a whole number from %lld to %lld, not %s",
                          name, key, lo, hi, json_shown(shown, sizeof shown, v));
    *out = (int)json_integer_value(v);
    return 0;
}

static int parse_entry(const char *path, const char *key, const json_t *val,
                       taas_machine_config *c, taas_error *err) {
    char name[200];
    taas_utf8_clip(name, sizeof name, key, strlen(key), 40);
    if (!valid_name(key))
        return file_error(err, path,
                          "a name uses letters, digits, '.', '_' and '-', at most 63 of them, e.g. \"g4.4\"",
                          "configuration name '%s' is not valid", name);
    if (!json_is_object(val)) {
        char hint[256];
        snprintf(hint, sizeof hint, "write \"%s\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"...\"}", key);
        return file_error(err, path, hint, "configuration '%s' must be an object, not %s", name,
                          json_kind(val));
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)val, k, v) {
        if (strcmp(k, "gpus") && strcmp(k, "cpus") && strcmp(k, "description")) {
            char kshown[200];
            return file_error(err, path, "an entry holds " ENTRY_KEYS,
                              "configuration '%s' has an unknown key \"%s\"", name,
                              taas_utf8_clip(kshown, sizeof kshown, k, strlen(k), 40));
        }
    }
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", key);
    if (entry_int(path, key, val, "gpus", 0, MAX_GPUS, &c->gpus_per_machine, err)) return -1;
    if (entry_int(path, key, val, "cpus", 1, MAX_CPUS, &c->cpus_per_machine, err)) return -1;
    const json_t *d = json_object_get(val, "description");
    if (d) {
        if (!json_is_string(d))
            return file_error(err, path, "write a short text, e.g. \"description\": \"4 GPUs, 32 cores\"",
                              "configuration '%s': \"description\" must be a string, not %s", name,
                              json_kind(d));
        if (json_string_length(d) >= sizeof c->description)
            return file_error(err, path, "shorten the description",
                              "configuration '%s': \"description\" is %zu bytes long; at most %zu fit",
                              name, json_string_length(d), sizeof c->description - 1);
        snprintf(c->description, sizeof c->description, "%s", json_string_value(d));
    }
    return 0;
}

static int parse_root(const char *path, json_t *root, taas_machine_config **out, size_t *n,
                      taas_error *err) {
    if (!json_is_object(root))
        return file_error(err, path, "the file reads " FILE_FORMAT,
                          "the top level must be a JSON object, not %s", json_kind(root));
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "configurations")) {
            char kshown[200];
            return file_error(err, path, "the only top-level key is \"configurations\": " FILE_FORMAT,
                              "unknown top-level key \"%s\"", taas_utf8_clip(kshown, sizeof kshown, k, strlen(k), 40));
        }
    }
    json_t *cfgs = json_object_get(root, "configurations");
    if (!cfgs) return 0;
    if (!json_is_object(cfgs))
        return file_error(err, path, "the file reads " FILE_FORMAT,
                          "\"configurations\" must be an object mapping names to machines, not %s",
                          json_kind(cfgs));
    size_t count = json_object_size(cfgs);
    if (count == 0) return 0;
    taas_machine_config *list = calloc(count, sizeof *list);
    if (!list) return file_error(err, path, "", "out of memory reading %zu configurations", count);
    size_t i = 0;
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
    if (!path[0]) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        int e = errno;
        return file_error(err, path, "make the file readable, or point $TAAS_CONFIG at another one",
                          "cannot read the configuration file: %s", strerror(e));
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return file_error(err, path, "point $TAAS_CONFIG at a JSON file such as " FILE_FORMAT,
                          "is a directory, not a configuration file");
    }
    json_error_t je;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!root) {
        char text[200];
        return file_error(err, path, "fix the JSON; the file reads " FILE_FORMAT,
                          "line %d, column %d: %s", je.line, je.column,
                          taas_utf8_clip(text, sizeof text, je.text, strlen(je.text), 120));
    }
    int rc = parse_root(path, root, out, n, err);
    json_decref(root);
    return rc;
}

/* Built-ins with the user's overrides applied, then the user's own. */
static int collect(taas_machine_config **out, size_t *n, char *path, size_t pathcap,
                   taas_error *err) {
    *out = NULL;
    *n = 0;
    if (user_path(path, pathcap, err)) return -1;
    taas_machine_config *user;
    size_t nuser;
    if (load_user(path, &user, &nuser, err)) return -1;
    taas_machine_config *all = calloc(NBUILTINS + nuser, sizeof *all);
    if (!all) {
        free(user);
        return file_error(err, path, "", "out of memory listing configurations");
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
