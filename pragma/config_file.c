/* The configuration file as config.c and cluster.c read it (config_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_file.h"
#include "suggest.h"
#include "utf8.h"

int taas_cfile_error(taas_error *err, const char *path, const char *hint, const char *fmt, ...) {
    char shown[512], what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    taas_utf8_clip(shown, sizeof shown, path, strlen(path), 120);
    taas_error_set(err, TAAS_CONFIG_ERROR, (taas_srcpos){0, 0}, "%s: %s", shown, what);
    taas_error_hint(err, "%s", hint);
    return -1;
}

const char *taas_cfile_kind(const json_t *v) {
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

const char *taas_cfile_shown(char *dst, size_t cap, const json_t *v) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!s) return taas_cfile_kind(v);
    taas_utf8_clip(dst, cap, s, strlen(s), 40);
    free(s);
    return dst;
}

const char *taas_cfile_quoted(char *dst, size_t cap, const char *s) {
    return taas_utf8_clip(dst, cap, s, strlen(s), 40);
}

const char *taas_cfile_did_you_mean(char *dst, size_t cap, const char *word,
                                    const char *const *known, size_t n) {
    int close = taas_suggest(word, strlen(word), known, n);
    if (close < 0) {
        if (cap) dst[0] = '\0';
    } else {
        snprintf(dst, cap, "did you mean %s? ", known[close]);
    }
    return dst;
}

int taas_cfile_valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 63) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int taas_cfile_path(char *buf, size_t cap, taas_error *err) {
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
        return taas_cfile_error(err, buf, "set $TAAS_CONFIG to a shorter path",
                                "the configuration file's path is longer than %zu bytes", cap - 1);
    return 0;
}

static int check_top(const char *path, const json_t *root, taas_error *err) {
    static const char *const KEYS[] = {"configurations", "cluster"};
    if (!json_is_object(root))
        return taas_cfile_error(err, path, "the file reads " TAAS_CONFIG_FILE_FORMAT,
                                "the top level must be a JSON object, not %s", taas_cfile_kind(root));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)root, k, v) {
        if (strcmp(k, KEYS[0]) && strcmp(k, KEYS[1])) {
            char kshown[200], hint[512], dym[160];
            snprintf(hint, sizeof hint, "%s%s",
                     taas_cfile_did_you_mean(dym, sizeof dym, k, KEYS, 2), TAAS_CONFIG_TOP_KEYS);
            return taas_cfile_error(err, path, hint, "unknown top-level key \"%s\"",
                                    taas_cfile_quoted(kshown, sizeof kshown, k));
        }
    }
    return 0;
}

int taas_cfile_load(const char *path, json_t **root, taas_error *err) {
    *root = NULL;
    if (!path[0]) return 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        int e = errno;
        return taas_cfile_error(err, path, "make the file readable, or point $TAAS_CONFIG at another one",
                                "cannot read the configuration file: %s", strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return taas_cfile_error(err, path, "make the file readable, or point $TAAS_CONFIG at another one",
                                "cannot read the configuration file: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        const char *what = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                                                  : "a special file";
        return taas_cfile_error(err, path, "point $TAAS_CONFIG at a JSON file such as " TAAS_CONFIG_FILE_FORMAT,
                                "is %s, not a configuration file", what);
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return taas_cfile_error(err, path, "", "cannot read the configuration file: %s", strerror(e));
    }
    json_error_t je;
    json_t *r = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!r) {
        char text[200];
        return taas_cfile_error(err, path, "fix the JSON; the file reads " TAAS_CONFIG_FILE_FORMAT,
                                "line %d, column %d: %s", je.line, je.column,
                                taas_utf8_clip(text, sizeof text, je.text, strlen(je.text), 120));
    }
    if (check_top(path, r, err)) {
        json_decref(r);
        return -1;
    }
    *root = r;
    return 0;
}
