/* What the roles share: options, the spec, the fetcher and the error report. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "role.h"
#include "suggest.h"
#include "utf8.h"

/* Specs are a few KiB; a bigger input is not a spec. */
#define MAX_SPEC_BYTES ((size_t)16 << 20)

int taas_cli_parse(int argc, char **argv, const taas_opt *opts, taas_error *err) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char q[96];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            taas_error_set(err, TAAS_ERR_USAGE, TAAS_NOPOS, "%s: unexpected argument '%s'", argv[0],
                           taas_utf8_clip(q, sizeof q, a, strlen(a), 60));
            taas_error_hint(err, "options are written --name VALUE; taas-worker %s --help lists them", argv[0]);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const taas_opt *o = opts;
        while (o->name && (strlen(o->name) != len || strncmp(o->name, name, len) != 0)) o++;
        if (!o->name) {
            const char *cands[16];
            size_t n = 0;
            for (const taas_opt *p = opts; p->name && n < 16; p++) cands[n++] = p->name;
            int s = taas_suggest(name, len, cands, n);
            taas_error_set(err, TAAS_ERR_USAGE, TAAS_NOPOS, "%s: unknown option '--%s'", argv[0],
                           taas_utf8_clip(q, sizeof q, name, len, 40));
            if (s >= 0)
                taas_error_hint(err, "did you mean --%s? taas-worker %s --help lists the options", cands[s], argv[0]);
            else
                taas_error_hint(err, "taas-worker %s --help lists the options", argv[0]);
            return -1;
        }
        if (!o->has_arg) {
            if (eq) {
                taas_error_set(err, TAAS_ERR_USAGE, TAAS_NOPOS, "%s: --%s takes no value", argv[0], o->name);
                taas_error_hint(err, "write it alone: --%s", o->name);
                return -1;
            }
            *o->value = "1";
            continue;
        }
        if (eq) {
            *o->value = eq + 1;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            taas_error_set(err, TAAS_ERR_USAGE, TAAS_NOPOS, "%s: --%s needs a value", argv[0], o->name);
            taas_error_hint(err, "write --%s VALUE", o->name);
            return -1;
        }
    }
    return 0;
}

int taas_cli_int(const char *flag, const char *text, long long min, long long max, long long *out,
                 taas_error *err) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        char q[64];
        taas_error_set(err, TAAS_ERR_USAGE, TAAS_NOPOS, "--%s must be an integer from %lld to %lld, not '%s'", flag,
                       min, max, taas_utf8_clip(q, sizeof q, text, strlen(text), 30));
        taas_error_hint(err, "e.g. --%s %lld", flag, min);
        return -1;
    }
    *out = v;
    return 0;
}

static int read_all(FILE *f, const char *name, char **out, size_t *len, taas_error *err) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reading the spec");
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_SPEC_BYTES) {
                free(buf);
                taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the spec in %s is larger than %zu MiB", name,
                               MAX_SPEC_BYTES >> 20);
                taas_error_hint(err, "give the JSON spec of one dataset or DataLoader (taas_value_spec)");
                return -1;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory reading the spec");
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot read the spec from %s: %s", name, strerror(e));
        taas_error_hint(err, "give a readable file, or - for stdin");
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

json_t *taas_cli_read_spec(const char *path, taas_error *err) {
    char q[300];
    const char *name = "stdin";
    FILE *f = stdin;
    if (strcmp(path, "-") != 0) {
        name = taas_utf8_clip(q, sizeof q, path, strlen(path), 200);
        f = fopen(path, "rb");
        if (!f) {
            taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot open the spec file %s: %s", name, strerror(errno));
            taas_error_hint(err, "give the path of a JSON spec, or - to read it from stdin");
            return NULL;
        }
    }
    char *text = NULL;
    size_t len = 0;
    int rc = read_all(f, name, &text, &len, err);
    if (f != stdin) fclose(f);
    if (rc) return NULL;
    json_error_t je;
    json_t *spec = json_loadb(text, len, 0, &je);
    free(text);
    if (!spec) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the spec in %s is not valid JSON: %s (line %d, column %d)",
                       name, je.text, je.line, je.column);
        taas_error_hint(err, "give the JSON spec of a dataset or DataLoader, as the kernel writes it "
                             "(e.g. {\"type\": \"FashionMNIST\", \"root\": ..., \"train\": false, ...})");
        return NULL;
    }
    if (!json_is_object(spec) || !json_is_string(json_object_get(spec, "type"))) {
        json_decref(spec);
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the spec in %s is not an object with a \"type\"", name);
        taas_error_hint(err, "give the JSON spec of a dataset or DataLoader, e.g. {\"type\": \"FashionMNIST\", ...}");
        return NULL;
    }
    return spec;
}

const json_t *taas_cli_dataset_spec(const json_t *spec, taas_error *err) {
    if (strcmp(json_string_value(json_object_get(spec, "type")), "DataLoader") != 0) return spec;
    const json_t *ds = json_object_get(spec, "dataset");
    if (!json_is_object(ds)) {
        taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the DataLoader spec has no \"dataset\" object");
        taas_error_hint(err, "a DataLoader spec holds its dataset's spec: {\"type\": \"DataLoader\", "
                             "\"dataset\": {\"type\": \"FashionMNIST\", ...}, \"batch_size\": 64, ...}");
        return NULL;
    }
    return ds;
}

taas_fetcher *taas_cli_fetcher(taas_error *err) {
    taas_fetch_opts o;
    taas_fetch_opts_default(&o);
    return taas_fetcher_new(&o, err);
}

/* jansson refuses invalid UTF-8; a message is made valid rather than lost. */
json_t *taas_cli_text(const char *s) {
    size_t n = strlen(s);
    if (taas_utf8_valid(s, n)) return json_stringn(s, n);
    char *clean = taas_utf8_sanitize(s, n, &n);
    json_t *j = clean ? json_stringn(clean, n) : json_string("");
    free(clean);
    return j;
}

void taas_cli_report(FILE *to, const taas_error *err) {
    json_t *e = json_object();
    json_object_set_new(e, "ename", taas_cli_text(err->ename[0] ? err->ename : TAAS_ERR_WORKER));
    json_object_set_new(e, "message", taas_cli_text(err->message[0] ? err->message : "failed without a message"));
    json_object_set_new(e, "hint", taas_cli_text(err->hint));
    json_t *j = json_object();
    json_object_set_new(j, "error", e);
    taas_cli_print_json(to, j);
    json_decref(j);
}

int taas_cli_print_json(FILE *to, const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!s) return -1;
    int rc = fprintf(to, "%s\n", s) < 0 || fflush(to) != 0 ? -1 : 0;
    free(s);
    return rc;
}
