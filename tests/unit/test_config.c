/* pragma/config.c: built-in machine configurations and the user's JSON file, read from
 * $TAAS_CONFIG or ~/.config/taas/config.json: valid files, overrides, a missing file, and
 * every way the file or one of its entries can be wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "pragma.h"
#include "utf8.h"

static char dir[64];
static char path[128];
static taas_error E;

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/taas-test-config-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    return 0;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *p, const char *text) {
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Each test starts with $TAAS_CONFIG naming config.json in the temp dir, holding text (or
 * absent for NULL). */
static void use_file(const char *text) {
    setenv("TAAS_CONFIG", path, 1);
    unlink(path);
    if (text) write_file(path, text);
}

static void find_ok(const char *name, taas_machine_config *c) {
    if (taas_config_find(name, c, &E) != 0)
        fail_msg("%s not found: %s: %s (hint: %s)", name, E.ename, E.message, E.hint);
}

/* The file gives a TaasConfigError naming the file, whose message and hint contain msg and hint. */
static void file_bad(const char *text, const char *msg, const char *hint) {
    use_file(text);
    taas_machine_config c;
    if (taas_config_find("g2.8", &c, &E) != -1) fail_msg("file %s\nwas accepted", text);
    if (strcmp(E.ename, "TaasConfigError") || strncmp(E.message, path, strlen(path)) ||
        !strstr(E.message, msg) || !strstr(E.hint, hint))
        fail_msg("file %s\ngave %s: %s\nhint: %s\nwanted '%s', hint '%s'", text, E.ename, E.message,
                 E.hint, msg, hint);
    assert_true(taas_utf8_valid(E.message, strlen(E.message)));
    /* listing reads the same file and fails the same way */
    taas_machine_config *all = NULL;
    size_t n = 0;
    assert_int_equal(taas_config_list(&all, &n, &E), -1);
    assert_null(all);
    assert_string_equal(E.ename, "TaasConfigError");
}

static void test_builtins_without_file(void **state) {
    (void)state;
    use_file(NULL);
    taas_machine_config c;
    find_ok("g2.8", &c);
    assert_string_equal(c.name, "g2.8");
    assert_int_equal(c.gpus_per_machine, 8);
    assert_int_equal(c.cpus_per_machine, 96);
    assert_non_null(strstr(c.description, "8 GPUs"));
    find_ok("c1.4", &c);
    assert_int_equal(c.gpus_per_machine, 0);
    assert_int_equal(c.cpus_per_machine, 4);
    taas_machine_config *all;
    size_t n;
    assert_int_equal(taas_config_list(&all, &n, &E), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].name, "g2.8");
    assert_string_equal(all[1].name, "c1.4");
    free(all);
}

static void test_unknown_name(void **state) {
    (void)state;
    use_file(NULL);
    taas_machine_config c;
    assert_int_equal(taas_config_find("g2.9", &c, &E), -1);
    assert_string_equal(E.ename, "TaasPragmaError");
    assert_string_equal(E.message, "unknown machine configuration 'g2.9'");
    assert_non_null(strstr(E.hint, "did you mean g2.8? known configurations: g2.8 (8 GPUs, 96 CPUs), "
                                   "c1.4 (no GPUs, 4 CPUs); add your own to "));
    assert_non_null(strstr(E.hint, path));
    /* with a user file, its names are known and suggested too */
    use_file("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32}}}");
    assert_int_equal(taas_config_find("g44", &c, &E), -1);
    assert_non_null(strstr(E.hint, "did you mean g4.4?"));
    assert_non_null(strstr(E.hint, "g4.4 (4 GPUs, 32 CPUs)"));
    assert_int_equal(taas_config_find(NULL, &c, &E), -1);
    assert_string_equal(E.message, "unknown machine configuration ''");
}

static void test_valid_user_file(void **state) {
    (void)state;
    use_file("{\"configurations\": {\n"
             "  \"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"four A100s\"},\n"
             "  \"c2.16\": {\"cpus\": 16, \"gpus\": 0}\n}}\n");
    taas_machine_config c;
    find_ok("g4.4", &c);
    assert_int_equal(c.gpus_per_machine, 4);
    assert_int_equal(c.cpus_per_machine, 32);
    assert_string_equal(c.description, "four A100s");
    find_ok("c2.16", &c);
    assert_int_equal(c.gpus_per_machine, 0);
    assert_string_equal(c.description, "");
    find_ok("g2.8", &c); /* built-ins stay */
    assert_int_equal(c.gpus_per_machine, 8);
    taas_machine_config *all;
    size_t n;
    assert_int_equal(taas_config_list(&all, &n, &E), 0);
    assert_int_equal(n, 4);
    assert_string_equal(all[0].name, "g2.8");
    assert_string_equal(all[1].name, "c1.4");
    assert_string_equal(all[2].name, "g4.4");
    assert_string_equal(all[3].name, "c2.16");
    free(all);
    /* an empty file object or list is no configuration, not an error */
    use_file("{}");
    find_ok("g2.8", &c);
    use_file("{\"configurations\": {}}");
    find_ok("c1.4", &c);
}

static void test_override_builtin(void **state) {
    (void)state;
    use_file("{\"configurations\": {\"g2.8\": {\"gpus\": 4, \"cpus\": 48, \"description\": \"ours\"}}}");
    taas_machine_config c;
    find_ok("g2.8", &c);
    assert_int_equal(c.gpus_per_machine, 4);
    assert_int_equal(c.cpus_per_machine, 48);
    assert_string_equal(c.description, "ours");
    taas_machine_config *all;
    size_t n;
    assert_int_equal(taas_config_list(&all, &n, &E), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].name, "g2.8");
    assert_int_equal(all[0].gpus_per_machine, 4);
    free(all);
}

static void test_default_path_in_home(void **state) {
    (void)state;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("TAAS_CONFIG");
    setenv("HOME", dir, 1);
    taas_machine_config c;
    /* no ~/.config/taas/config.json: the built-ins only */
    find_ok("g2.8", &c);
    assert_int_equal(taas_config_find("g4.4", &c, &E), -1);
    char p[256];
    snprintf(p, sizeof p, "%s/.config/taas/config.json", dir);
    assert_non_null(strstr(E.hint, p));
    snprintf(p, sizeof p, "mkdir -p '%s/.config/taas'", dir);
    assert_int_equal(system(p), 0);
    snprintf(p, sizeof p, "%s/.config/taas/config.json", dir);
    write_file(p, "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32}}}");
    find_ok("g4.4", &c);
    assert_int_equal(c.gpus_per_machine, 4);
    /* an empty $TAAS_CONFIG counts as unset */
    setenv("TAAS_CONFIG", "", 1);
    find_ok("g4.4", &c);
    if (home) setenv("HOME", home, 1);
    free(home);
}

static void test_malformed_json(void **state) {
    (void)state;
    file_bad("{\"configurations\": {\n  \"g4.4\": {\"gpus\": 4,}\n}}", "line 2, column", "fix the JSON");
    assert_non_null(strstr(E.message, ": line 2, column "));
    file_bad("", "line 1, column 0", "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32");
    file_bad("{\"configurations\": {\"a\": {\"gpus\": 1, \"cpus\": 1}, \"a\": {\"gpus\": 2, \"cpus\": 1}}}",
             "duplicate", "fix the JSON");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32}}} trailing", "end of file expected",
             "fix the JSON");
}

static void test_bad_structure(void **state) {
    (void)state;
    file_bad("[]", "the top level must be a JSON object, not an array", "the file reads {\"configurations\"");
    file_bad("{\"configuration\": {}}", "unknown top-level key \"configuration\"",
             "the only top-level key is \"configurations\"");
    file_bad("{\"configurations\": [\"g4.4\"]}",
             "\"configurations\" must be an object mapping names to machines, not an array", "the file reads");
}

static void test_bad_entries(void **state) {
    (void)state;
    file_bad("{\"configurations\": {\"g 4\": {\"gpus\": 4, \"cpus\": 4}}}",
             "configuration name 'g 4' is not valid", "letters, digits, '.', '_' and '-'");
    file_bad("{\"configurations\": {\"a123456789b123456789c123456789d123456789e123456789f123456789g123\": "
             "{\"gpus\": 4, \"cpus\": 4}}}",
             "is not valid", "at most 63");
    file_bad("{\"configurations\": {\"\": {\"gpus\": 4, \"cpus\": 4}}}", "configuration name '' is not valid",
             "e.g. \"g4.4\"");
    file_bad("{\"configurations\": {\"g4.4\": 4}}", "configuration 'g4.4' must be an object, not an integer",
             "write \"g4.4\": {\"gpus\": 4, \"cpus\": 32");
    file_bad("{\"configurations\": {\"g4.4\": {\"cpus\": 32}}}", "configuration 'g4.4' has no \"gpus\"",
             "\"gpus\" (GPUs per machine, 0 to 4096; 0 for a loader machine)");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4}}}", "configuration 'g4.4' has no \"cpus\"",
             "\"cpus\" (CPU cores per machine, 1 to 65536)");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": \"four\", \"cpus\": 32}}}",
             "configuration 'g4.4': \"gpus\" must be a whole number from 0 to 4096, not \"four\"", "an entry reads");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4.0, \"cpus\": 32}}}", "from 0 to 4096, not 4.0", "");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": -1, \"cpus\": 32}}}", "from 0 to 4096, not -1", "");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4097, \"cpus\": 32}}}", "not 4097", "");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": true, \"cpus\": 32}}}", "not true", "");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 0}}}",
             "\"cpus\" must be a whole number from 1 to 65536, not 0", "");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"ram\": 64}}}",
             "configuration 'g4.4' has an unknown key \"ram\"", "an entry holds \"gpus\"");
    file_bad("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"description\": 5}}}",
             "\"description\" must be a string, not an integer", "e.g. \"description\"");
    char text[512];
    snprintf(text, sizeof text, "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, "
                                "\"description\": \"%0200d\"}}}", 0);
    file_bad(text, "\"description\" is 200 bytes long; at most 159 fit", "shorten");
}

static void test_unreadable_file(void **state) {
    (void)state;
    /* a directory */
    setenv("TAAS_CONFIG", dir, 1);
    taas_machine_config c;
    assert_int_equal(taas_config_find("g2.8", &c, &E), -1);
    assert_string_equal(E.ename, "TaasConfigError");
    assert_non_null(strstr(E.message, "is a directory, not a configuration file"));
    assert_non_null(strstr(E.hint, "point $TAAS_CONFIG at a JSON file"));
    /* a symbolic link loop cannot be opened, even by root */
    char loop[160];
    snprintf(loop, sizeof loop, "%s/loop.json", dir);
    unlink(loop);
    assert_int_equal(symlink(loop, loop), 0);
    setenv("TAAS_CONFIG", loop, 1);
    assert_int_equal(taas_config_find("g2.8", &c, &E), -1);
    assert_string_equal(E.ename, "TaasConfigError");
    assert_non_null(strstr(E.message, "cannot read the configuration file: "));
    assert_non_null(strstr(E.message, loop));
    assert_non_null(strstr(E.hint, "make the file readable"));
    unlink(loop);
}

/* The pragma reads the file only for a #!CONFIG line, and points at that line when it is bad. */
static void test_pragma_with_user_file(void **state) {
    (void)state;
    taas_pragma p;
    use_file("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32}, \"c2.16\": {\"gpus\": 0, \"cpus\": 16}}}");
    assert_int_equal(taas_pragma_parse("#!g4.4\n#pragma taas --gpus 8\nfit(net)", &p, &E), 0);
    assert_int_equal(p.machines, 2);
    assert_int_equal(p.ranks_per_machine, 4);
    assert_int_equal(p.config.cpus_per_machine, 32);
    assert_int_equal(taas_pragma_parse("#!g4.4\n#pragma taas --gpus 6\nfit(net)", &p, &E), -1);
    assert_string_equal(E.message, "--gpus 6 with g4.4 (4 GPUs per machine): use a multiple of 4 or at most 4");
    assert_int_equal(taas_pragma_parse("#!c2.16\n#pragma taas --gpus 2\nfit(net)", &p, &E), -1);
    assert_non_null(strstr(E.message, "#!c2.16 is a machine without GPUs (16 CPUs)"));
    assert_non_null(strstr(E.hint, "(#!g2.8, #!g4.4)"));
    use_file("{\"configurations\": {\"g4.4\": {\"gpus\": 4}}}");
    assert_int_equal(taas_pragma_parse("# run\n#!g4.4\n#pragma taas --gpus 8\nfit(net)", &p, &E), -1);
    assert_string_equal(E.ename, "TaasConfigError");
    assert_non_null(strstr(E.message, "configuration 'g4.4' has no \"cpus\""));
    assert_int_equal(E.pos.line, 2);
    assert_int_equal(E.pos.col, 3);
    assert_int_equal(E.width, 4);
    /* without a #! line the file is not read, so it cannot get in the way */
    assert_int_equal(taas_pragma_parse("#pragma taas --gpus 8\nfit(net)", &p, &E), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_without_file),
        cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_valid_user_file),
        cmocka_unit_test(test_override_builtin),
        cmocka_unit_test(test_default_path_in_home),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_bad_structure),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_unreadable_file),
        cmocka_unit_test(test_pragma_with_user_file),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
