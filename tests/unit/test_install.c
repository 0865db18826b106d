/* kernel/protocol/install: `taas-kernel install` arguments, destinations, files written,
 * and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "install.h"

static char SPEC[4096];   /* the source tree's share/jupyter/kernels/taas */

static int setup(void **state) {
    (void)state;
    const char *src = getenv("TAAS_SOURCE_DIR");
    if (src) {
        snprintf(SPEC, sizeof SPEC, "%s/share/jupyter/kernels/taas", src);
    } else {   /* run by hand: this file is <source>/tests/unit/test_install.c */
        snprintf(SPEC, sizeof SPEC, "%s", __FILE__);
        char *cut = strstr(SPEC, "/tests/unit/");
        if (cut) snprintf(cut, sizeof SPEC - (size_t)(cut - SPEC), "/share/jupyter/kernels/taas");
    }
    return 0;
}

static int parse(taas_install_opts *o, taas_error *err, int argc, ...) {
    char *argv[16];
    va_list ap;
    va_start(ap, argc);
    argv[0] = "install";
    for (int i = 1; i < argc; i++) argv[i] = va_arg(ap, char *);
    va_end(ap);
    taas_error_clear(err);
    return taas_install_parse(argc, argv, o, err);
}

static void test_parse_options(void **state) {
    (void)state;
    taas_install_opts o;
    taas_error err;
    assert_int_equal(parse(&o, &err, 1), 0);
    assert_false(o.user);
    assert_null(o.prefix);
    assert_string_equal(o.name, "taas");
    assert_null(o.display_name);
    assert_int_equal(parse(&o, &err, 4, "--user", "--name", "taas-dev"), 0);
    assert_true(o.user);
    assert_string_equal(o.name, "taas-dev");
    assert_int_equal(parse(&o, &err, 3, "--prefix=/opt/x", "--display-name=taas (dev)"), 0);
    assert_string_equal(o.prefix, "/opt/x");
    assert_string_equal(o.display_name, "taas (dev)");
    assert_int_equal(parse(&o, &err, 3, "--prefix", "/opt/y"), 0);
    assert_string_equal(o.prefix, "/opt/y");
}

static void expect_usage(taas_install_opts *o, const char *msg, int argc, char *a1, char *a2,
                         char *a3) {
    taas_error err;
    assert_int_equal(parse(o, &err, argc, a1, a2, a3), -1);
    assert_string_equal(err.ename, "TaasUsageError");
    assert_string_equal(err.message, msg);
    assert_true(err.hint[0] != '\0');
}

static void test_parse_errors(void **state) {
    (void)state;
    taas_install_opts o;
    expect_usage(&o, "unknown option '--usr' for install", 2, "--usr", NULL, NULL);
    expect_usage(&o, "unknown option '--prefixx=/a' for install", 2, "--prefixx=/a", NULL, NULL);
    expect_usage(&o, "--prefix needs a value", 2, "--prefix", NULL, NULL);
    expect_usage(&o, "--name needs a value", 3, "--user", "--name", NULL);
    expect_usage(&o, "--prefix needs a directory, not \"\"", 2, "--prefix=", NULL, NULL);
    expect_usage(&o, "--user and --prefix cannot be used together", 4, "--user", "--prefix",
                 "/opt");
    expect_usage(&o, "kernel name 'bad name!' is not allowed", 3, "--name", "bad name!", NULL);
    expect_usage(&o, "kernel name '' is not allowed", 2, "--name=", NULL, NULL);
    taas_error err;
    parse(&o, &err, 3, "--name", "x/y");
    assert_non_null(strstr(err.hint, "letters, digits"));
}

static void test_destinations(void **state) {
    (void)state;
    taas_install_opts o = {0, NULL, "taas", NULL};
    taas_error err;
    char d[4096];
    assert_int_equal(taas_install_dest(&o, d, sizeof d, &err), 0);
    assert_string_equal(d, "/usr/local/share/jupyter/kernels/taas");
    o.prefix = "/opt/p";
    o.name = "k2";
    assert_int_equal(taas_install_dest(&o, d, sizeof d, &err), 0);
    assert_string_equal(d, "/opt/p/share/jupyter/kernels/k2");
    o.prefix = NULL;
    o.user = 1;
    o.name = "taas";
    setenv("HOME", "/home/u", 1);
    unsetenv("JUPYTER_DATA_DIR");
    unsetenv("XDG_DATA_HOME");
    assert_int_equal(taas_install_dest(&o, d, sizeof d, &err), 0);
    assert_string_equal(d, "/home/u/.local/share/jupyter/kernels/taas");
    setenv("XDG_DATA_HOME", "/xdg", 1);
    assert_int_equal(taas_install_dest(&o, d, sizeof d, &err), 0);
    assert_string_equal(d, "/xdg/jupyter/kernels/taas");
    setenv("JUPYTER_DATA_DIR", "/jd", 1);
    assert_int_equal(taas_install_dest(&o, d, sizeof d, &err), 0);
    assert_string_equal(d, "/jd/kernels/taas");
    unsetenv("JUPYTER_DATA_DIR");
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    taas_error_clear(&err);
    assert_int_equal(taas_install_dest(&o, d, sizeof d, &err), -1);
    assert_string_equal(err.ename, "TaasInstallError");
    assert_non_null(strstr(err.message, "HOME is not set"));
    assert_int_equal(taas_install_dest(&(taas_install_opts){0, "/p", "taas", NULL}, d, 10, &err),
                     -1);
    assert_non_null(strstr(err.message, "too long"));
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static void same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x);
    free(y);
}

static void test_install_prefix(void **state) {
    (void)state;
    char root[] = "/tmp/taas-test-install-XXXXXX";
    assert_non_null(mkdtemp(root));
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/deep/prefix", root);
    taas_install_opts o = {0, prefix, "taas", "taas (test)"};
    const char *const specs[] = {"/nonexistent/spec", SPEC, NULL};   /* falls through */
    char where[4096];
    taas_error err;
    taas_error_clear(&err);
    int rc = taas_install(&o, specs, "/opt/bin/taas-kernel", where, sizeof where, &err);
    if (rc) fail_msg("%s (%s)", err.message, err.hint);
    char want[4300];
    snprintf(want, sizeof want, "%s/share/jupyter/kernels/taas", prefix);
    assert_string_equal(where, want);

    char p[4400], q[4400];
    snprintf(p, sizeof p, "%s/kernel.json", where);
    json_error_t jerr;
    json_t *spec = json_load_file(p, 0, &jerr);
    assert_non_null(spec);
    json_t *argv = json_object_get(spec, "argv");
    assert_int_equal(json_array_size(argv), 3);
    assert_string_equal(json_string_value(json_array_get(argv, 0)), "/opt/bin/taas-kernel");
    assert_string_equal(json_string_value(json_array_get(argv, 1)), "-f");
    assert_string_equal(json_string_value(json_array_get(argv, 2)), "{connection_file}");
    assert_string_equal(json_string_value(json_object_get(spec, "display_name")), "taas (test)");
    assert_string_equal(json_string_value(json_object_get(spec, "language")), "taas");
    assert_string_equal(json_string_value(json_object_get(spec, "interrupt_mode")), "signal");
    json_decref(spec);
    const char *logos[2] = {"logo-32x32.png", "logo-64x64.png"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", where, logos[i]);
        snprintf(q, sizeof q, "%s/%s", SPEC, logos[i]);
        same_file(p, q);
    }
    /* installing again overwrites */
    o.display_name = NULL;
    assert_int_equal(taas_install(&o, specs, "/b/taas-kernel", where, sizeof where, &err), 0);
    snprintf(p, sizeof p, "%s/kernel.json", where);
    spec = json_load_file(p, 0, &jerr);
    assert_string_equal(json_string_value(json_array_get(json_object_get(spec, "argv"), 0)),
                        "/b/taas-kernel");
    assert_string_equal(json_string_value(json_object_get(spec, "display_name")), "taas");
    json_decref(spec);

    /* a prefix below a regular file cannot be created */
    snprintf(p, sizeof p, "%s/kernel.json/sub", where);
    o.prefix = p;
    taas_error_clear(&err);
    assert_int_equal(taas_install(&o, specs, "/b/taas-kernel", where, sizeof where, &err), -1);
    assert_string_equal(err.ename, "TaasInstallError");
    assert_non_null(strstr(err.message, "cannot create directory"));
    assert_non_null(strstr(err.message, "Not a directory"));
    assert_non_null(strstr(err.hint, "directory you can write to"));

    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void test_missing_spec(void **state) {
    (void)state;
    taas_install_opts o = {0, "/tmp/taas-test-never-created", "taas", NULL};
    const char *const specs[] = {"/nonexistent/a", "/nonexistent/b", NULL};
    char where[4096];
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_install(&o, specs, "/x", where, sizeof where, &err), -1);
    assert_string_equal(err.ename, "TaasInstallError");
    assert_string_equal(err.message, "cannot find the kernelspec files (kernel.json, "
                                     "logo-32x32.png, logo-64x64.png) in /nonexistent/a");
    assert_non_null(strstr(err.hint, "looked in /nonexistent/a and /nonexistent/b"));
    assert_int_equal(access("/tmp/taas-test-never-created", F_OK), -1);   /* nothing written */
}

static void test_self_exe(void **state) {
    (void)state;
    char exe[4096];
    taas_error err;
    assert_int_equal(taas_self_exe(exe, sizeof exe, &err), 0);
    assert_int_equal(exe[0], '/');
    assert_non_null(strstr(exe, "test_install"));
    assert_int_equal(taas_self_exe(exe, 4, &err), -1);
    assert_non_null(strstr(err.message, "path too long"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_options),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_destinations),
        cmocka_unit_test(test_install_prefix),
        cmocka_unit_test(test_missing_spec),
        cmocka_unit_test(test_self_exe),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
