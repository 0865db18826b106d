#include "install.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errnames.h"
#include "utf8.h"
#include "wire.h"

#define USAGE TAAS_ERR_USAGE
#define ENAME TAAS_ERR_INSTALL

static const char USAGE_HINT[] =
    "usage: taas-kernel install [--user | --prefix DIR] [--name NAME] [--display-name TEXT]";
static const char *const FILES[3] = {"kernel.json", "logo-32x32.png", "logo-64x64.png"};

/* An argument as it may appear in a message: valid UTF-8. malloc'd. */
static char *clean(const char *s) {
    return taas_utf8_sanitize(s, strlen(s), NULL);
}

static int valid_name(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* "--opt VALUE" or "--opt=VALUE"; 1 when argv[*i] is this option (value in *val). */
static int option(int argc, char **argv, int *i, const char *opt, const char **val,
                  taas_error *err, int *bad) {
    size_t n = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, n) != 0 || (a[n] != '\0' && a[n] != '=')) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
    } else if (*i + 1 < argc) {
        *val = argv[++*i];
    } else {
        taas_error_set(err, USAGE, TAAS_NOPOS, "%s needs a value", opt);
        taas_error_hint(err, "%s", USAGE_HINT);
        *bad = 1;
    }
    return 1;
}

int taas_install_parse(int argc, char **argv, taas_install_opts *o, taas_error *err) {
    memset(o, 0, sizeof *o);
    o->name = "taas";
    for (int i = 1; i < argc; i++) {
        int bad = 0;
        const char *v = NULL;
        if (strcmp(argv[i], "--user") == 0) {
            o->user = 1;
        } else if (option(argc, argv, &i, "--prefix", &v, err, &bad)) {
            if (bad) return -1;
            if (!*v) {
                taas_error_set(err, USAGE, TAAS_NOPOS, "--prefix needs a directory, not \"\"");
                taas_error_hint(err, "%s", USAGE_HINT);
                return -1;
            }
            o->prefix = v;
        } else if (option(argc, argv, &i, "--name", &v, err, &bad)) {
            if (bad) return -1;
            o->name = v;
        } else if (option(argc, argv, &i, "--display-name", &v, err, &bad)) {
            if (bad) return -1;
            o->display_name = v;
        } else {
            char *a = clean(argv[i]);
            taas_error_set(err, USAGE, TAAS_NOPOS, "unknown option '%s' for install", a ? a : "?");
            free(a);
            taas_error_hint(err, "%s", USAGE_HINT);
            return -1;
        }
    }
    if (o->user && o->prefix) {
        taas_error_set(err, USAGE, TAAS_NOPOS, "--user and --prefix cannot be used together");
        taas_error_hint(err, "--user installs for you alone, --prefix DIR under DIR/share/jupyter; "
                             "choose one");
        return -1;
    }
    if (!valid_name(o->name)) {
        char *a = clean(o->name);
        taas_error_set(err, USAGE, TAAS_NOPOS, "kernel name '%s' is not allowed", a ? a : "?");
        free(a);
        taas_error_hint(err, "Jupyter kernel names use only letters, digits, '.', '_' and '-'");
        return -1;
    }
    return 0;
}

int taas_install_dest(const taas_install_opts *o, char *out, size_t n, taas_error *err) {
    int w;
    if (o->user) {
        const char *jd = getenv("JUPYTER_DATA_DIR"), *xdg = getenv("XDG_DATA_HOME"),
                   *home = getenv("HOME");
        if (jd && *jd)
            w = snprintf(out, n, "%s/kernels/%s", jd, o->name);
        else if (xdg && *xdg)
            w = snprintf(out, n, "%s/jupyter/kernels/%s", xdg, o->name);
        else if (home && *home)
            w = snprintf(out, n, "%s/.local/share/jupyter/kernels/%s", home, o->name);
        else {
            taas_error_set(err, ENAME, TAAS_NOPOS, "--user: HOME is not set, so there is no user "
                                              "Jupyter directory");
            taas_error_hint(err, "set HOME or JUPYTER_DATA_DIR, or use --prefix DIR");
            return -1;
        }
    } else {
        w = snprintf(out, n, "%s/share/jupyter/kernels/%s", o->prefix ? o->prefix : "/usr/local",
                     o->name);
    }
    if (w < 0 || (size_t)w >= n) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "the kernelspec directory's path is too long");
        taas_error_hint(err, "use a shorter --prefix");
        return -1;
    }
    return 0;
}

static int io_error(taas_error *err, const char *what, const char *path, int e) {
    char *p = clean(path);
    taas_error_set(err, ENAME, TAAS_NOPOS, "cannot %s '%s': %s", what, p ? p : "?", strerror(e));
    free(p);
    if (e == EACCES || e == EPERM || e == EROFS)
        taas_error_hint(err, "use --user to install for yourself, or --prefix DIR, or run as "
                             "root");
    else
        taas_error_hint(err, "check that the path names a directory you can write to");
    return -1;
}

/* mkdir -p */
static int make_dirs(const char *path, taas_error *err) {
    char *p = strdup(path);
    if (!p) return io_error(err, "create", path, ENOMEM);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            struct stat st;
            int e = 0;
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                e = errno;
            else if (stat(p, &st) < 0)
                e = errno;
            else if (!S_ISDIR(st.st_mode))
                e = ENOTDIR;
            if (e) {
                io_error(err, "create directory", p, e);
                free(p);
                return -1;
            }
            *s = c;
            if (c == '\0') break;
        }
    }
    free(p);
    return 0;
}

static int join(char *out, size_t n, const char *dir, const char *file) {
    int w = snprintf(out, n, "%s/%s", dir, file);
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

static int copy_file(const char *from, const char *to, taas_error *err) {
    FILE *in = fopen(from, "rb");
    if (!in) return io_error(err, "read", from, errno);
    FILE *out = fopen(to, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return io_error(err, "write", to, e);
    }
    char buf[16384];
    size_t r;
    int rc = 0;
    while ((r = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, r, out) != r) {
            rc = io_error(err, "write", to, errno ? errno : EIO);
            break;
        }
    if (rc == 0 && ferror(in)) rc = io_error(err, "read", from, errno ? errno : EIO);
    fclose(in);
    if (fclose(out) != 0 && rc == 0) rc = io_error(err, "write", to, errno);
    return rc;
}

static const char *find_spec(const char *const *dirs) {
    for (; dirs && *dirs; dirs++) {
        int ok = 1;
        for (int i = 0; i < 3 && ok; i++) {
            char p[4096];
            ok = join(p, sizeof p, *dirs, FILES[i]) == 0 && access(p, R_OK) == 0;
        }
        if (ok) return *dirs;
    }
    return NULL;
}

static int write_kernel_json(const char *src, const char *dst, const taas_install_opts *o,
                             const char *exe, taas_error *err) {
    json_error_t jerr;
    json_t *spec = json_load_file(src, 0, &jerr);
    json_t *argv = json_object_get(spec, "argv");
    if (!json_is_object(spec) || !json_is_array(argv) || json_array_size(argv) == 0) {
        char *p = clean(src);
        taas_error_set(err, ENAME, TAAS_NOPOS, "'%s' is not a kernelspec (a JSON object with an "
                                          "\"argv\" list)%s%s", p ? p : "?",
                       spec ? "" : ": ", spec ? "" : jerr.text);
        free(p);
        taas_error_hint(err, "reinstall taas, or run taas-kernel install from its build tree");
        json_decref(spec);
        return -1;
    }
    json_array_set_new(argv, 0, taas_json_string(exe));
    if (o->display_name) json_object_set_new(spec, "display_name", taas_json_string(o->display_name));
    int rc = json_dump_file(spec, dst, JSON_INDENT(2));
    json_decref(spec);
    if (rc) return io_error(err, "write", dst, errno ? errno : EIO);
    return 0;
}

int taas_install(const taas_install_opts *o, const char *const *spec_dirs, const char *exe,
                 char *where, size_t n, taas_error *err) {
    const char *src = find_spec(spec_dirs);
    if (!src) {
        taas_error_set(err, ENAME, TAAS_NOPOS, "cannot find the kernelspec files (kernel.json, "
                                          "logo-32x32.png, logo-64x64.png)%s%s",
                       spec_dirs && spec_dirs[0] ? " in " : "",
                       spec_dirs && spec_dirs[0] ? spec_dirs[0] : "");
        if (spec_dirs && spec_dirs[0] && spec_dirs[1])
            taas_error_hint(err, "looked in %s and %s; reinstall taas (cmake --install) or run "
                                 "taas-kernel from its build tree", spec_dirs[0], spec_dirs[1]);
        else
            taas_error_hint(err, "reinstall taas (cmake --install) or run taas-kernel from its "
                                 "build tree");
        return -1;
    }
    if (taas_install_dest(o, where, n, err) || make_dirs(where, err)) return -1;
    for (int i = 0; i < 3; i++) {
        char from[4096], to[4096];
        if (join(from, sizeof from, src, FILES[i]) || join(to, sizeof to, where, FILES[i]))
            return io_error(err, "write", where, ENAMETOOLONG);
        int rc = i == 0 ? write_kernel_json(from, to, o, exe, err) : copy_file(from, to, err);
        if (rc) return -1;
    }
    return 0;
}

