/* pragma/config.c and pragma/cluster.c: built-in machine configurations and the user's JSON
 * file, read from $TAAS_CONFIG or ~/.config/taas/config.json: valid files, overrides, a
 * missing file, the "cluster" section, every way the file, one of its entries or its
 * cluster section can be wrong, and every value that reaches a command refused unless plain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "cpu.h"
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
    assert_true(c.price_per_hour == -1); /* no price is built in */
    find_ok("c1.4", &c);
    assert_int_equal(c.gpus_per_machine, 0);
    assert_int_equal(c.cpus_per_machine, 4);
    assert_true(c.price_per_hour == -1);
    taas_machine_config *all;
    size_t n;
    assert_int_equal(taas_config_list(&all, &n, &E), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].name, "g2.8");
    assert_string_equal(all[1].name, "c1.4");
    assert_true(all[0].price_per_hour == -1);
    assert_true(all[1].price_per_hour == -1);
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
    const char *was = getenv("HOME");
    char *home = was ? strdup(was) : NULL;
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
             "did you mean configurations? the top-level keys are \"configurations\"");
    file_bad("{\"clusters\": {}}", "unknown top-level key \"clusters\"", "did you mean cluster? ");
    file_bad("{\"hosts\": []}", "unknown top-level key \"hosts\"", "and \"cluster\" (where jobs run");
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

/* Slurm's placement keys of a configuration: read back when valid, each rule when not. */
static void test_slurm_keys(void **state) {
    (void)state;
    use_file("{\"configurations\": {\n"
             "  \"g8.a100\": {\"gpus\": 8, \"cpus\": 96, \"partition\": \"gpu\", \"constraint\": \"a100&ib\",\n"
             "              \"gres\": \"gpu:a100:8\"},\n"
             "  \"g4.any\": {\"gpus\": 4, \"cpus\": 32, \"constraint\": \"[rack1|rack2]\", \"partition\": \"a.b_c-d:e,f=g+h\"},\n"
             "  \"c1.8\": {\"gpus\": 0, \"cpus\": 8, \"partition\": \"cpu\"}\n}}\n");
    taas_machine_config c;
    find_ok("g8.a100", &c);
    assert_string_equal(c.partition, "gpu");
    assert_string_equal(c.constraint, "a100&ib");
    assert_string_equal(c.gres, "gpu:a100:8");
    find_ok("g4.any", &c);
    assert_string_equal(c.partition, "a.b_c-d:e,f=g+h");
    assert_string_equal(c.constraint, "[rack1|rack2]");
    assert_string_equal(c.gres, "");
    find_ok("c1.8", &c);
    assert_string_equal(c.partition, "cpu");
    assert_string_equal(c.constraint, "");
    find_ok("g2.8", &c); /* built-ins say nothing of Slurm */
    assert_string_equal(c.partition, "");
    assert_string_equal(c.constraint, "");
    assert_string_equal(c.gres, "");
    /* a 63-byte value fits */
    char text[512];
    snprintf(text, sizeof text, "{\"configurations\": {\"g\": {\"gpus\": 1, \"cpus\": 1, \"gres\": \"%063d\"}}}", 0);
    use_file(text);
    find_ok("g", &c);
    assert_int_equal(strlen(c.gres), 63);

#define ENTRY(kv) "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, " kv "}}}"
    file_bad(ENTRY("\"partition\": 5"), "configuration 'g4.4': \"partition\" must be a string, not an integer",
             "Slurm's --partition: 1 to 63 bytes of ASCII letters, digits and _ @ % + = : , . / - only, not "
             "starting with '-'; e.g. \"partition\": \"gpu\"");
    file_bad(ENTRY("\"gres\": [\"gpu:1\"]"), "\"gres\" must be a string, not an array", "e.g. \"gres\": \"gpu:a100:8\"");
    file_bad(ENTRY("\"constraint\": \"\""), "configuration 'g4.4': \"constraint\" is empty",
             "not starting with '-'; it may also hold & | [ ] (Slurm's syntax)");
    snprintf(text, sizeof text, ENTRY("\"partition\": \"%064d\""), 0);
    file_bad(text, "\"partition\" is 64 bytes long; at most 63 fit", "Slurm's --partition");
    file_bad(ENTRY("\"partition\": \"-p\""), "\"partition\" starts with '-', which sbatch would read as an option: \"-p\"",
             "not starting with '-'");
    file_bad(ENTRY("\"partition\": \"gpu part\""), "\"partition\" may not contain a space: \"gpu part\"", "Slurm's");
    file_bad(ENTRY("\"gres\": \"gpu:\\\"a100\\\"\""), "\"gres\" may not contain '\"'", "Slurm's --gres");
    file_bad(ENTRY("\"gres\": \"gpu'1\""), "\"gres\" may not contain '''", "");
    file_bad(ENTRY("\"gres\": \"gpu;rm\""), "\"gres\" may not contain ';'", "");
    file_bad(ENTRY("\"gres\": \"gpu\\n1\""), "\"gres\" may not contain a control character (U+000A): \"gpu\\n1\"", "");
    file_bad(ENTRY("\"gres\": \"gpu\\t1\""), "a control character (U+0009)", "");
    file_bad(ENTRY("\"constraint\": \"a100\\u0085\""), "a control character (U+0085)", "");
    file_bad(ENTRY("\"partition\": \"gp\\u00fc\""), "\"partition\" may not contain '\xc3\xbc' (U+00FC)", "");
    /* & | [ ] are for constraints only */
    file_bad(ENTRY("\"partition\": \"a&b\""), "\"partition\" may not contain '&'", "");
    file_bad(ENTRY("\"gres\": \"gpu|nic\""), "\"gres\" may not contain '|'", "");
    file_bad(ENTRY("\"constraint\": \"a100 & ib\""), "\"constraint\" may not contain a space", "");
    file_bad(ENTRY("\"partiton\": \"gpu\""), "configuration 'g4.4' has an unknown key \"partiton\"",
             "did you mean partition? an entry holds \"gpus\"");
    file_bad(ENTRY("\"Gres\": \"gpu\""), "unknown key \"Gres\"", "did you mean gres? ");
    file_bad(ENTRY("\"account\": \"me\""), "unknown key \"account\"", "and for Slurm \"partition\", \"constraint\" and \"gres\"");
#undef ENTRY
}

/* "price_per_hour": the user's own price of a machine for an hour, kept by every lookup. */
static void test_price_per_hour(void **state) {
    (void)state;
    use_file("{\"configurations\": {\n"
             "  \"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"price_per_hour\": 12.5},\n"
             "  \"c2.16\": {\"gpus\": 0, \"cpus\": 16, \"price_per_hour\": 1},\n"
             "  \"own\": {\"gpus\": 2, \"cpus\": 8, \"price_per_hour\": 0},\n"
             "  \"top\": {\"gpus\": 8, \"cpus\": 8, \"price_per_hour\": 1e9},\n"
             "  \"top2\": {\"gpus\": 8, \"cpus\": 8, \"price_per_hour\": 1000000000},\n"
             "  \"zero\": {\"gpus\": 8, \"cpus\": 8, \"price_per_hour\": -0.0},\n"
             "  \"none\": {\"gpus\": 1, \"cpus\": 1}\n}}\n");
    taas_machine_config c;
    find_ok("g4.4", &c);
    assert_true(c.price_per_hour == 12.5);
    find_ok("c2.16", &c);
    assert_true(c.price_per_hour == 1);
    find_ok("own", &c); /* a machine of one's own: free */
    assert_true(c.price_per_hour == 0);
    find_ok("top", &c);
    assert_true(c.price_per_hour == 1e9);
    find_ok("top2", &c);
    assert_true(c.price_per_hour == 1e9);
    find_ok("zero", &c);
    assert_true(c.price_per_hour == 0);
    assert_false(signbit(c.price_per_hour));
    find_ok("none", &c);
    assert_true(c.price_per_hour == -1);
    find_ok("g2.8", &c); /* the built-ins keep no price */
    assert_true(c.price_per_hour == -1);
    taas_machine_config *all;
    size_t n;
    assert_int_equal(taas_config_list(&all, &n, &E), 0);
    assert_int_equal(n, 9);
    assert_string_equal(all[2].name, "g4.4");
    assert_true(all[2].price_per_hour == 12.5);
    assert_string_equal(all[3].name, "c2.16");
    assert_true(all[3].price_per_hour == 1);
    assert_string_equal(all[8].name, "none");
    assert_true(all[8].price_per_hour == -1);
    free(all);
    /* the pragma's configuration carries it */
    taas_pragma p;
    assert_int_equal(taas_pragma_parse("#!g4.4\n#pragma taas --gpus 8 --budget 100\nfit(net)", &p, &E), 0);
    assert_int_equal(p.has_config, 1);
    assert_true(p.config.price_per_hour == 12.5);
    assert_int_equal(p.budget_kind, TAAS_BUDGET_MONEY);
    assert_true(p.budget == 100);
    assert_int_equal(taas_pragma_parse("#pragma taas --gpus 8\nfit(net)", &p, &E), 0);
    assert_true(p.config.price_per_hour == -1);

    /* an entry that overrides a built-in can carry a price; the other built-in keeps none */
    use_file("{\"configurations\": {\"g2.8\": {\"gpus\": 8, \"cpus\": 96, \"price_per_hour\": 32.77, "
             "\"partition\": \"gpu\"}, \"c1.4\": {\"gpus\": 0, \"cpus\": 4, \"price_per_hour\": 0.2}}}");
    find_ok("g2.8", &c);
    assert_true(c.price_per_hour == 32.77);
    assert_string_equal(c.partition, "gpu");
    find_ok("c1.4", &c);
    assert_true(c.price_per_hour == 0.2);
    assert_int_equal(taas_config_list(&all, &n, &E), 0);
    assert_int_equal(n, 2);
    assert_true(all[0].price_per_hour == 32.77);
    assert_true(all[1].price_per_hour == 0.2);
    free(all);
    assert_int_equal(taas_pragma_parse("#!g2.8\n#pragma taas --gpus 16\nfit(net)", &p, &E), 0);
    assert_true(p.config.price_per_hour == 32.77);
    use_file("{\"configurations\": {\"g2.8\": {\"gpus\": 8, \"cpus\": 96, \"price_per_hour\": 32.77}}}");
    find_ok("c1.4", &c);
    assert_true(c.price_per_hour == -1);
    /* the cluster's loaders are looked up with it */
    taas_cluster cl;
    use_file("{\"configurations\": {\"c2.16\": {\"gpus\": 0, \"cpus\": 16, \"price_per_hour\": 0.8}},"
             " \"cluster\": {\"backend\": \"slurm\", \"loaders\": \"c2.16\"}}");
    assert_int_equal(taas_cluster_load(&cl, &E), 0);
    assert_string_equal(cl.loaders, "c2.16");
    taas_cluster_free(&cl);

#define ENTRY(kv) "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, " kv "}}}"
    file_bad(ENTRY("\"price_per_hour\": \"12.5\""),
             "configuration 'g4.4': \"price_per_hour\" must be a number (the price of one machine for one hour, "
             "in your unit), not a string",
             "write what one g4.4 machine costs you for an hour, a number from 0 to 1e9 in any unit you choose "
             "(the same in every entry), e.g. \"price_per_hour\": 12.5");
    assert_null(strstr(E.message, "$"));
    file_bad(ENTRY("\"price_per_hour\": \"$3\""), "\"price_per_hour\" must be a number", "in any unit you choose");
    file_bad(ENTRY("\"price_per_hour\": true"), "\"price_per_hour\" must be a number (the price of one machine for "
             "one hour, in your unit), not true", "");
    file_bad(ENTRY("\"price_per_hour\": null"), "must be a number (the price of one machine for one hour, in your unit), "
             "not null", "");
    file_bad(ENTRY("\"price_per_hour\": [1]"), "not an array", "");
    file_bad(ENTRY("\"price_per_hour\": {\"usd\": 1}"), "not an object", "");
    file_bad(ENTRY("\"price_per_hour\": -2"), "configuration 'g4.4': \"price_per_hour\" is -2, a negative price",
             "a number from 0 to 1e9");
    file_bad(ENTRY("\"price_per_hour\": -0.5"), "configuration 'g4.4': \"price_per_hour\" is -0.5, a negative price", "");
    file_bad(ENTRY("\"price_per_hour\": 1000000001"),
             "configuration 'g4.4': \"price_per_hour\" is 1000000001, above the largest price (1e9 = 1000000000)",
             "a number from 0 to 1e9");
    file_bad(ENTRY("\"price_per_hour\": 1e10"), "\"price_per_hour\" is 10000000000.0, above the largest price", "");
    file_bad(ENTRY("\"price_per_hour\": 1e999"), "line 1", "fix the JSON"); /* jansson: real number overflow */
    file_bad(ENTRY("\"price_per_hour\": NaN"), "line 1", "fix the JSON");
    file_bad(ENTRY("\"price_per_hour\": 1, \"price_per_hour\": 2"), "duplicate", "fix the JSON");
    /* a misspelt key */
    file_bad(ENTRY("\"price\": 3"), "configuration 'g4.4' has an unknown key \"price\"",
             "did you mean price_per_hour? an entry holds \"gpus\"");
    file_bad(ENTRY("\"cost_per_hour\": 3"), "unknown key \"cost_per_hour\"", "did you mean price_per_hour?");
    file_bad(ENTRY("\"PricePerHour\": 3"), "unknown key \"PricePerHour\"", "did you mean price_per_hour?");
    file_bad(ENTRY("\"price_per_hr\": 3"), "unknown key \"price_per_hr\"", "did you mean price_per_hour?");
    file_bad(ENTRY("\"ram\": 3"), "unknown key \"ram\"",
             "\"price_per_hour\" (your price of one machine for an hour, in your unit)");
    assert_null(strstr(E.hint, "did you mean"));
#undef ENTRY
}

/* taas_cluster_load succeeds on the current file; fails the test with its error otherwise. */
static void cluster_ok(const char *text, taas_cluster *c) {
    use_file(text);
    if (taas_cluster_load(c, &E) != 0)
        fail_msg("file %s\ngave %s: %s\nhint: %s", text, E.ename, E.message, E.hint);
}

/* The file's cluster section gives a TaasConfigError naming the file, whose message and hint
 * contain msg and hint (the hint is never empty); *out is left empty. */
static void cluster_bad(const char *text, const char *msg, const char *hint) {
    use_file(text);
    taas_cluster c;
    memset(&c, 0x5a, sizeof c);
    if (taas_cluster_load(&c, &E) != -1) {
        taas_cluster_free(&c);
        fail_msg("file %s\nwas accepted", text);
    }
    if (strcmp(E.ename, "TaasConfigError") || strncmp(E.message, path, strlen(path)) ||
        !strstr(E.message, msg) || !strstr(E.hint, hint) || !E.hint[0])
        fail_msg("file %s\ngave %s: %s\nhint: %s\nwanted '%s', hint '%s'", text, E.ename, E.message, E.hint,
                 msg, hint);
    assert_true(taas_utf8_valid(E.message, strlen(E.message)));
    assert_true(taas_utf8_valid(E.hint, strlen(E.hint)));
    assert_null(c.hosts);
    assert_int_equal(c.nhosts, 0);
    taas_cluster_free(&c);
}

static void assert_default_cluster(const taas_cluster *c) {
    assert_string_equal(c->backend, "local");
    assert_string_equal(c->loaders, "c1.4");
    assert_string_equal(c->kernel_address, "");
    assert_string_equal(c->worker, "");
    assert_string_equal(c->ssh_config, "");
    assert_string_equal(c->ssh, "");
    assert_int_equal(c->kernels, -1);
    assert_null(c->hosts);
    assert_int_equal(c->nhosts, 0);
    assert_string_equal(c->path, "");
}

static void test_cluster_defaults(void **state) {
    (void)state;
    taas_cluster c;
    use_file(NULL);
    assert_int_equal(taas_cluster_load(&c, &E), 0);
    assert_default_cluster(&c);
    taas_cluster_free(&c);
    cluster_ok("{}", &c);
    assert_default_cluster(&c);
    taas_cluster_free(&c);
    cluster_ok("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32}}}", &c);
    assert_default_cluster(&c);
    taas_cluster_free(&c);
    /* no HOME and no $TAAS_CONFIG: no file */
    const char *was = getenv("HOME");
    char *home = was ? strdup(was) : NULL;
    unsetenv("TAAS_CONFIG");
    unsetenv("HOME");
    assert_int_equal(taas_cluster_load(&c, &E), 0);
    assert_default_cluster(&c);
    taas_cluster_free(&c);
    if (home) setenv("HOME", home, 1);
    free(home);
    /* free zeroes, and a second free is harmless */
    taas_cluster_free(&c);
    taas_cluster_free(NULL);
    assert_string_equal(c.backend, "");
}

static void test_cluster_ssh(void **state) {
    (void)state;
    taas_cluster c;
    cluster_ok("{\"configurations\": {\"c2.16\": {\"gpus\": 0, \"cpus\": 16}},\n"
               " \"cluster\": {\n"
               "  \"backend\": \"ssh\",\n"
               "  \"kernel_address\": \"10.0.0.1\",\n"
               "  \"loaders\": \"c2.16\",\n"
               "  \"worker\": \"/usr/local/bin/taas-worker\",\n"
               "  \"ssh_config\": \"/home/me/.ssh/config\",\n"
               "  \"hosts\": [\n"
               "    {\"name\": \"gpu1\", \"address\": \"10.0.0.21\", \"gpus\": 8, \"cpus\": 96},\n"
               "    {\"cpus\": 96, \"gpus\": 4, \"name\": \"gpu2.example_org\"},\n"
               "    {\"name\": \"cpu1\", \"address\": \"me@cpu1.example.org\", \"gpus\": 0, \"cpus\": 1},\n"
               "    {\"name\": \"big\", \"address\": \"fe80::1%eth0\", \"gpus\": 4096, \"cpus\": 65536}\n"
               "  ]}}\n",
               &c);
    assert_string_equal(c.backend, "ssh");
    assert_string_equal(c.kernel_address, "10.0.0.1");
    assert_string_equal(c.loaders, "c2.16");
    assert_string_equal(c.worker, "/usr/local/bin/taas-worker");
    assert_string_equal(c.ssh_config, "/home/me/.ssh/config");
    assert_string_equal(c.path, path);
    assert_int_equal(c.nhosts, 4);
    assert_non_null(c.hosts);
    assert_string_equal(c.hosts[0].name, "gpu1");
    assert_string_equal(c.hosts[0].address, "10.0.0.21");
    assert_int_equal(c.hosts[0].gpus, 8);
    assert_int_equal(c.hosts[0].cpus, 96);
    assert_string_equal(c.hosts[1].name, "gpu2.example_org");
    assert_string_equal(c.hosts[1].address, "gpu2.example_org"); /* the name when no address */
    assert_int_equal(c.hosts[1].gpus, 4);
    assert_string_equal(c.hosts[2].name, "cpu1");
    assert_string_equal(c.hosts[2].address, "me@cpu1.example.org");
    assert_int_equal(c.hosts[2].gpus, 0);
    assert_int_equal(c.hosts[2].cpus, 1);
    assert_string_equal(c.hosts[3].address, "fe80::1%eth0");
    assert_int_equal(c.hosts[3].gpus, 4096);
    assert_int_equal(c.hosts[3].cpus, 65536);
    taas_cluster_free(&c);
    assert_null(c.hosts);
    assert_int_equal(c.nhosts, 0);

    /* the fewest keys: the defaults for the rest */
    cluster_ok("{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"g\", \"gpus\": 1, \"cpus\": 1}]}}", &c);
    assert_string_equal(c.loaders, "c1.4");
    assert_string_equal(c.kernel_address, "");
    assert_string_equal(c.worker, "");
    assert_string_equal(c.ssh_config, "");
    assert_int_equal(c.nhosts, 1);
    assert_string_equal(c.hosts[0].address, "g");
    taas_cluster_free(&c);

    /* 1024 hosts, the most, with the longest name and address */
    size_t cap = 1024 * 400 + 1024;
    char *text = malloc(cap), *p = text;
    p += sprintf(p, "{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [");
    for (int i = 0; i < 1024; i++)
        p += sprintf(p, "%s{\"name\": \"h%062d\", \"address\": \"a%0254d\", \"gpus\": %d, \"cpus\": 2}",
                     i ? ", " : "", i, i, i == 1023);
    sprintf(p, "]}}");
    cluster_ok(text, &c);
    assert_int_equal(c.nhosts, 1024);
    assert_int_equal(strlen(c.hosts[1023].name), 63);
    assert_int_equal(strlen(c.hosts[1023].address), 255);
    assert_int_equal(c.hosts[1023].gpus, 1);
    taas_cluster_free(&c);
    /* one more is too many */
    p = text + sprintf(text, "{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [");
    for (int i = 0; i < 1025; i++)
        p += sprintf(p, "%s{\"name\": \"h%d\", \"gpus\": 1, \"cpus\": 2}", i ? ", " : "", i);
    sprintf(p, "]}}");
    cluster_bad(text, "\"cluster\": \"hosts\" has 1025 hosts; it takes 1 to 1024", "\"backend\": \"ssh\"");
    free(text);
}

static void test_cluster_slurm_and_local(void **state) {
    (void)state;
    taas_cluster c;
    cluster_ok("{\"configurations\": {\n"
               "   \"g8.a100\": {\"gpus\": 8, \"cpus\": 96, \"partition\": \"gpu\", \"gres\": \"gpu:a100:8\",\n"
               "                \"constraint\": \"a100&ib\"},\n"
               "   \"c1.4\": {\"gpus\": 0, \"cpus\": 4, \"partition\": \"cpu\"}},\n"
               " \"cluster\": {\"backend\": \"slurm\", \"kernel_address\": \"login1.cluster.example.org\",\n"
               "             \"worker\": \"/opt/taas/bin/taas-worker\"}}\n",
               &c);
    assert_string_equal(c.backend, "slurm");
    assert_string_equal(c.kernel_address, "login1.cluster.example.org");
    assert_string_equal(c.loaders, "c1.4");
    assert_string_equal(c.worker, "/opt/taas/bin/taas-worker");
    assert_string_equal(c.ssh_config, "");
    assert_null(c.hosts);
    assert_int_equal(c.nhosts, 0);
    assert_string_equal(c.path, path);
    taas_cluster_free(&c);
    /* the configurations the slurm backend places its components with */
    taas_machine_config m;
    find_ok("g8.a100", &m);
    assert_string_equal(m.partition, "gpu");
    assert_string_equal(m.gres, "gpu:a100:8");
    assert_string_equal(m.constraint, "a100&ib");
    find_ok("c1.4", &m);
    assert_string_equal(m.partition, "cpu");

    cluster_ok("{\"cluster\": {\"backend\": \"local\"}}", &c);
    assert_string_equal(c.backend, "local");
    assert_string_equal(c.loaders, "c1.4");
    assert_string_equal(c.path, path);
    assert_null(c.hosts);
    taas_cluster_free(&c);
    cluster_ok("{\"cluster\": {\"backend\": \"local\", \"loaders\": \"c2.16\", \"worker\": \"/w\"},"
               " \"configurations\": {\"c2.16\": {\"gpus\": 0, \"cpus\": 16}}}", &c);
    assert_string_equal(c.loaders, "c2.16");
    assert_string_equal(c.worker, "/w");
    taas_cluster_free(&c);
}

#define SSH1 "\"hosts\": [{\"name\": \"gpu1\", \"gpus\": 8, \"cpus\": 96}]"

static void test_cluster_bad_section(void **state) {
    (void)state;
    cluster_bad("{\"cluster\": [\"ssh\"]}", "\"cluster\" must be an object, not an array", "\"backend\": \"ssh\"");
    cluster_bad("{\"cluster\": \"ssh\"}", "\"cluster\" must be an object, not a string", "");
    cluster_bad("{\"cluster\": {}}", "\"cluster\" has no \"backend\"", "add \"backend\": \"local\", \"slurm\" or \"ssh\"");
    cluster_bad("{\"cluster\": {\"backend\": 1}}", "\"cluster\": \"backend\" must be a string, not an integer",
                "\"backend\": \"local\", \"slurm\" or \"ssh\"");
    cluster_bad("{\"cluster\": {\"backend\": null}}", "\"backend\" must be a string, not null", "");
    cluster_bad("{\"cluster\": {\"backend\": \"slrum\"}}",
                "\"cluster\": \"backend\" must be \"local\", \"slurm\" or \"ssh\", not \"slrum\"",
                "did you mean slurm? local runs the job on this machine");
    cluster_bad("{\"cluster\": {\"backend\": \"SSH\"}}", "not \"SSH\"", "did you mean ssh?");
    cluster_bad("{\"cluster\": {\"backend\": \"kubernetes\"}}", "not \"kubernetes\"", "see docs/cluster.md");
    cluster_bad("{\"cluster\": {\"backend\": \"\"}}", "not \"\"", "ssh runs it on the \"hosts\"");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"host\": []}}", "\"cluster\" has an unknown key \"host\"",
                "did you mean hosts? \"cluster\" holds \"backend\"");
    cluster_bad("{\"cluster\": {\"backend\": \"slurm\", \"partition\": \"gpu\"}}",
                "\"cluster\" has an unknown key \"partition\"", "\"cluster\" holds");
    cluster_bad("{\"cluster\": {\"backend\": \"slurm\", \"loader\": \"c1.4\"}}", "unknown key \"loader\"",
                "did you mean loaders?");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"sshconfig\": \"/x\", " SSH1 "}}", "unknown key \"sshconfig\"",
                "did you mean ssh_config?");
    /* unknown keys are found before a missing backend */
    cluster_bad("{\"cluster\": {\"backed\": \"ssh\"}}", "unknown key \"backed\"", "did you mean backend?");
    /* hosts and ssh_config are for ssh */
    cluster_bad("{\"cluster\": {\"backend\": \"slurm\", " SSH1 "}}",
                "\"cluster\": \"hosts\" is for backend ssh only, not slurm", "Slurm chooses the machines");
    cluster_bad("{\"cluster\": {\"backend\": \"local\", \"hosts\": []}}", "\"hosts\" is for backend ssh only, not local",
                "\"backend\": \"ssh\"");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\"}}", "\"cluster\": backend ssh needs \"hosts\"",
                "list the machines: \"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"gpu1\"");
    cluster_bad("{\"cluster\": {\"backend\": \"slurm\", \"ssh_config\": \"/home/me/.ssh/config\"}}",
                "\"cluster\": \"ssh_config\" is for backend ssh only, not slurm", "ssh -F");
    cluster_bad("{\"cluster\": {\"backend\": \"local\", \"ssh_config\": \"/x\"}}", "is for backend ssh only, not local", "");
    /* the whole file is checked: a broken file is an error here too */
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\",}}", "line 1, column", "fix the JSON");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\"}, \"cluster\": {}}", "duplicate", "fix the JSON");
    cluster_bad("[{\"cluster\": {}}]", "the top level must be a JSON object, not an array", "");
    cluster_bad("{\"Cluster\": {\"backend\": \"ssh\"}}", "unknown top-level key \"Cluster\"", "did you mean cluster?");
}

static void test_cluster_bad_hosts(void **state) {
    (void)state;
#define SSH(hosts) "{\"cluster\": {\"backend\": \"ssh\", \"hosts\": " hosts "}}"
#define GPU1 "{\"name\": \"gpu1\", \"gpus\": 8, \"cpus\": 96}"
    cluster_bad(SSH("{\"gpu1\": {}}"), "\"cluster\": \"hosts\" must be an array of hosts, not an object",
                "write \"cluster\": {\"backend\": \"ssh\"");
    cluster_bad(SSH("\"gpu1\""), "\"hosts\" must be an array of hosts, not a string", "");
    cluster_bad(SSH("[]"), "\"cluster\": \"hosts\" has 0 hosts; it takes 1 to 1024", "\"hosts\": [{\"name\"");
    cluster_bad(SSH("[" GPU1 ", \"gpu2\"]"), "\"cluster\": host 2 must be an object, not a string",
                "a host holds \"name\" (required)");
    cluster_bad(SSH("[[]]"), "host 1 must be an object, not an array", "");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpu\": 8, \"cpus\": 96}]"), "\"cluster\": host 'gpu1' has an unknown key \"gpu\"",
                "did you mean gpus? a host holds");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"adress\": \"x\", \"gpus\": 8, \"cpus\": 96}]"), "unknown key \"adress\"",
                "did you mean address?");
    cluster_bad(SSH("[{\"host\": \"gpu1\", \"gpus\": 8, \"cpus\": 96}]"), "\"cluster\": host 1 has an unknown key \"host\"",
                "\"address\" (optional: what ssh connects to");
    cluster_bad(SSH("[" GPU1 ", {\"gpus\": 8, \"cpus\": 96}]"), "\"cluster\": host 2 has no \"name\"", "\"name\" (required)");
    cluster_bad(SSH("[{\"name\": 1, \"gpus\": 8, \"cpus\": 96}]"), "\"cluster\": host 1: \"name\" must be a string, not an integer",
                "a host holds");
    cluster_bad(SSH("[{\"name\": \"gpu 1\", \"gpus\": 8, \"cpus\": 96}]"), "\"cluster\": host name 'gpu 1' is not valid",
                "letters, digits, '.', '_' and '-', at most 63");
    cluster_bad(SSH("[{\"name\": \"\", \"gpus\": 8, \"cpus\": 96}]"), "host name '' is not valid", "e.g. \"gpu1\"");
    cluster_bad(SSH("[{\"name\": \"a123456789b123456789c123456789d123456789e123456789f123456789g123\", \"gpus\": 8, \"cpus\": 96}]"),
                "is not valid", "at most 63");
    cluster_bad(SSH("[{\"name\": \"10.0.0.1:22\", \"gpus\": 8, \"cpus\": 96}]"), "host name '10.0.0.1:22' is not valid",
                "the host's \"address\" can be any address");
    cluster_bad(SSH("[" GPU1 ", {\"name\": \"cpu1\", \"gpus\": 0, \"cpus\": 4}, " GPU1 "]"),
                "\"cluster\": host 'gpu1' is listed twice (hosts 1 and 3)", "a name of its own");
    /* address: a string of 1 to 255 bytes without spaces, control characters or a leading '-' */
#define ADDR(a) SSH("[{\"name\": \"gpu1\", \"address\": " a ", \"gpus\": 8, \"cpus\": 96}]")
    cluster_bad(ADDR("21"), "\"cluster\": host 'gpu1': \"address\" must be a string, not an integer",
                "e.g. \"address\": \"10.0.0.21\"");
    cluster_bad(ADDR("[\"10.0.0.21\"]"), "\"address\" must be a string, not an array", "");
    cluster_bad(ADDR("\"\""), "\"cluster\": host 'gpu1': \"address\" is empty", "a word of 1 to 255 bytes");
    char text[1024];
    snprintf(text, sizeof text, ADDR("\"%0256d\""), 0);
    cluster_bad(text, "\"address\" is 256 bytes long; at most 255 fit", "");
    cluster_bad(ADDR("\"-oProxyCommand=evil\""),
                "\"cluster\": host 'gpu1': \"address\" starts with '-', which a command would read as an option: "
                "\"-oProxyCommand=evil\"",
                "not starting with '-'");
    cluster_bad(ADDR("\"gpu1 -v\""), "\"address\" may not contain a space: \"gpu1 -v\"", "ASCII letters, digits and");
    cluster_bad(ADDR("\"gpu1\\n\""), "\"address\" may not contain a control character (U+000A)", "ProxyCommand");
    cluster_bad(ADDR("\"gpu1\\u007f\""), "a control character (U+007F)", "");
    cluster_bad(ADDR("\"gpu1\\u009b\""), "a control character (U+009B)", "");
    cluster_bad(ADDR("null"), "\"address\" must be a string, not null", "");
    /* gpus 0 to 4096, cpus 1 to 65536, both required */
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"cpus\": 96}]"), "\"cluster\": host 'gpu1' has no \"gpus\"",
                "\"gpus\" (required, 0 to 4096)");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 8}]"), "\"cluster\": host 'gpu1' has no \"cpus\"",
                "\"cpus\" (required, 1 to 65536)");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": -1, \"cpus\": 96}]"),
                "\"cluster\": host 'gpu1': \"gpus\" must be a whole number from 0 to 4096, not -1", "a host holds");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 4097, \"cpus\": 96}]"), "from 0 to 4096, not 4097", "");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 8.0, \"cpus\": 96}]"), "from 0 to 4096, not 8.0", "");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": \"8\", \"cpus\": 96}]"), "from 0 to 4096, not \"8\"", "");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 99999999999999999999, \"cpus\": 96}]"), "line 1", "fix the JSON");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 9223372036854775807, \"cpus\": 96}]"),
                "not 9223372036854775807", "");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 8, \"cpus\": 0}]"),
                "\"cluster\": host 'gpu1': \"cpus\" must be a whole number from 1 to 65536, not 0", "");
    cluster_bad(SSH("[{\"name\": \"gpu1\", \"gpus\": 8, \"cpus\": 65537}]"), "not 65537", "");
    /* the ranks need a host with GPUs */
    cluster_bad(SSH("[{\"name\": \"cpu1\", \"gpus\": 0, \"cpus\": 4}, {\"name\": \"cpu2\", \"gpus\": 0, \"cpus\": 4}]"),
                "\"cluster\": no host has GPUs; backend ssh needs at least one host with \"gpus\" above 0",
                "give at least one host its \"gpus\"");
#undef ADDR
#undef GPU1
#undef SSH
}

static void test_cluster_bad_values(void **state) {
    (void)state;
#define SLURM(kv) "{\"cluster\": {\"backend\": \"slurm\", " kv "}}"
    char text[4096];
    /* kernel_address: as a host's address */
    cluster_bad(SLURM("\"kernel_address\": 10"), "\"cluster\": \"kernel_address\" must be a string, not an integer",
                "the address the hosts reach the kernel at");
    cluster_bad(SLURM("\"kernel_address\": \"\""), "\"cluster\": \"kernel_address\" is empty", "1 to 255 bytes");
    snprintf(text, sizeof text, SLURM("\"kernel_address\": \"%0256d\""), 0);
    cluster_bad(text, "\"kernel_address\" is 256 bytes long; at most 255 fit", "");
    cluster_bad(SLURM("\"kernel_address\": \"-x\""), "\"kernel_address\" starts with '-'", "not starting with '-'");
    cluster_bad(SLURM("\"kernel_address\": \"10.0.0.1 \""), "\"kernel_address\" may not contain a space", "");
    cluster_bad(SLURM("\"kernel_address\": \"a\\rb\""), "may not contain a control character (U+000D)", "");
    /* worker and ssh_config: absolute paths */
    cluster_bad(SLURM("\"worker\": \"bin/taas-worker\""),
                "\"cluster\": \"worker\" must be an absolute path (starting with '/'), not \"bin/taas-worker\"",
                "\"worker\" (taas-worker on the hosts) is in the commands ssh runs through the hosts' shell: an "
                "absolute path of 1 to 1023 bytes of ASCII letters, digits and _ @ % + = : , . / - only, not starting "
                "with '-'; e.g. \"worker\": \"/usr/local/bin/taas-worker\"");
    cluster_bad(SLURM("\"worker\": \"\""), "\"cluster\": \"worker\" is empty", "");
    cluster_bad(SLURM("\"worker\": \"~/bin/taas-worker\""), "must be an absolute path", "");
    cluster_bad(SLURM("\"worker\": 1"), "\"cluster\": \"worker\" must be a string, not an integer", "an absolute path");
    cluster_bad(SLURM("\"worker\": false"), "\"worker\" must be a string, not false", "");
    snprintf(text, sizeof text, SLURM("\"worker\": \"/%01023d\""), 0);
    cluster_bad(text, "\"cluster\": \"worker\" is 1024 bytes long; at most 1023 fit", "");
    cluster_bad(SLURM("\"worker\": \"/bin/taas\\u0000worker\""), "line 1", "fix the JSON"); /* jansson refuses NUL */
    cluster_bad(SLURM("\"worker\": \"/bin/taas-worker\\n\""), "\"worker\" may not contain a control character (U+000A)", "");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"ssh_config\", " SSH1 "}}",
                "\"cluster\": \"ssh_config\" must be an absolute path (starting with '/'), not \"ssh_config\"",
                "e.g. \"ssh_config\": \"/home/me/.ssh/config\"");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": {}, " SSH1 "}}",
                "\"ssh_config\" must be a string, not an object", "");
    /* "ssh": a plain path (Open MPI gives it to a shell); "kernels": a set's name */
    cluster_bad("{\"cluster\": {\"backend\": \"slurm\", \"ssh\": \"/usr/bin/ssh\"}}",
                "\"cluster\": \"ssh\" is for backend ssh only, not slurm", "the ssh program of backend ssh");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"ssh\": \"ssh\", " SSH1 "}}",
                "\"ssh\" must be an absolute path (starting with '/'), not \"ssh\"", "e.g. \"ssh\": \"/usr/bin/ssh\"");
    cluster_bad(SLURM("\"kernels\": \"avx-512\""),
                "\"cluster\": \"kernels\" must be \"avx512\", \"avx2\" or \"generic\", not \"avx-512\"",
                "the kernel set every rank runs");
    cluster_bad(SLURM("\"kernels\": 2"), "\"cluster\": \"kernels\" must be a string, not an integer", "");
    taas_cluster c;
    cluster_ok("{\"cluster\": {\"backend\": \"ssh\", \"ssh\": \"/opt/ssh-2.0/bin/ssh+x\", \"kernels\": \"avx2\", "
               SSH1 "}}", &c);
    assert_string_equal(c.ssh, "/opt/ssh-2.0/bin/ssh+x");
    assert_int_equal(c.kernels, TAAS_CPU_AVX2);
    taas_cluster_free(&c);
    cluster_ok(SLURM("\"kernels\": \"generic\""), &c);
    assert_int_equal(c.kernels, TAAS_CPU_GENERIC);
    taas_cluster_free(&c);
    /* a space or a letter outside ASCII is not plain: a symlink gives such a file a plain path */
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"/home/me/my ssh/config\", " SSH1 "}}",
                "\"cluster\": \"ssh_config\" may not contain a space: \"/home/me/my ssh/config\"",
                "\"ssh_config\" (the file ssh -F reads) is in the ssh agent string that Open MPI hands to a shell");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"worker\": \"/opt/t\xc3\xa4\x61s/taas-worker\", " SSH1 "}}",
                "\"cluster\": \"worker\" may not contain '\xc3\xa4' (U+00E4)", "e.g. \"worker\": \"/usr/local/bin/taas-worker\"");
    cluster_ok("{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"/home/me/.ssh/my_config-2+x@y%z=1:2,3\", "
               "\"worker\": \"/opt/taas/bin/taas-worker\", " SSH1 "}}", &c);
    assert_string_equal(c.ssh_config, "/home/me/.ssh/my_config-2+x@y%z=1:2,3");
    assert_string_equal(c.worker, "/opt/taas/bin/taas-worker");
    taas_cluster_free(&c);
    snprintf(text, sizeof text, SLURM("\"worker\": \"/%01022d\""), 0);
    cluster_ok(text, &c);
    assert_int_equal(strlen(c.worker), 1023);
    taas_cluster_free(&c);
    /* loaders: a known configuration without GPUs */
    cluster_bad(SLURM("\"loaders\": 4"), "\"cluster\": \"loaders\" must be a string, not an integer",
                "name a machine configuration without GPUs, e.g. \"loaders\": \"c1.4\"");
    cluster_bad(SLURM("\"loaders\": \"c1.5\""), "\"cluster\": \"loaders\": unknown machine configuration 'c1.5'",
                "did you mean c1.4? known configurations: g2.8 (8 GPUs, 96 CPUs), c1.4 (no GPUs, 4 CPUs)");
    cluster_bad(SLURM("\"loaders\": \"\""), "\"loaders\": unknown machine configuration ''", "known configurations");
    snprintf(text, sizeof text, SLURM("\"loaders\": \"c%0100d\""), 0);
    cluster_bad(text, "\"loaders\": unknown machine configuration 'c000", "known configurations");
    cluster_bad(SLURM("\"loaders\": \"g2.8\""), "\"cluster\": \"loaders\" is g2.8, a machine with 8 GPUs",
                "loader workers run on machines without GPUs: name one (c1.4)");
    cluster_bad("{\"configurations\": {\"c1.4\": {\"gpus\": 1, \"cpus\": 4}, \"c2.16\": {\"gpus\": 0, \"cpus\": 16}},"
                " \"cluster\": {\"backend\": \"local\"}}",
                "\"cluster\": \"loaders\" is c1.4 (the default), a machine with 1 GPUs", "name one (c2.16), or add one");
    /* a broken configuration is the file's error, whichever section names it */
    cluster_bad("{\"configurations\": {\"c2.16\": {\"gpus\": 0}}, \"cluster\": {\"backend\": \"slurm\", \"loaders\": \"c2.16\"}}",
                "configuration 'c2.16' has no \"cpus\"", "an entry reads");
#undef SLURM
}

/* Every value of the file that reaches a command line or a shell — "ssh", "ssh_config",
 * "worker", "munge_socket", "kernel_address", a host's "address" and "name", a
 * configuration's "partition", "gres" and "constraint" — is refused with the key and the
 * character named unless it is plain (docs/cluster.md): Open MPI hands the ssh agent string
 * to a shell, ssh runs its remote command through the host's shell. Nothing of it runs. */
static void test_cluster_values_reach_no_shell(void **state) {
    (void)state;
    char pwned[128];
    snprintf(pwned, sizeof pwned, "%s/pwned", dir);
    /* as JSON writes them; what the message names */
    char sub[160], tick[160], semi[160];
    snprintf(sub, sizeof sub, "$(touch${IFS}%s)", pwned);
    snprintf(tick, sizeof tick, "`touch${IFS}%s`", pwned);
    snprintf(semi, sizeof semi, ";touch${IFS}%s", pwned);
    const struct { const char *json, *named; } inject[] = {
        {sub, "'$'"}, {tick, "'`'"}, {semi, "';'"}, {"|id", "'|'"}, {"&id", "'&'"},
        {"\\ntouch", "a control character (U+000A)"}, {"'x'", "'''"}, {"\\\"x\\\"", "'\"'"}, {" -v", "a space"},
        {"\\\\x", "'\\'"}, {"*", "'*'"}, {"<x", "'<'"}, {"\\tx", "a control character (U+0009)"},
    };
    /* each key: the file around the value (%s: a plain start, then the injection) */
    const struct { const char *key, *doc, *start, *where; int config; } keys[] = {
        {"ssh", "{\"cluster\": {\"backend\": \"ssh\", \"ssh\": \"%s\", " SSH1 "}}", "/usr/bin/ssh", "\"cluster\"", 0},
        {"ssh_config", "{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"%s\", " SSH1 "}}", "/home/me/cfg",
         "\"cluster\"", 0},
        {"worker", "{\"cluster\": {\"backend\": \"ssh\", \"worker\": \"%s\", " SSH1 "}}", "/opt/taas-worker",
         "\"cluster\"", 0},
        {"worker", "{\"cluster\": {\"backend\": \"slurm\", \"worker\": \"%s\"}}", "/opt/taas-worker", "\"cluster\"", 0},
        {"munge_socket", "{\"cluster\": {\"backend\": \"slurm\", \"munge_socket\": \"%s\"}}", "/run/munge/s",
         "\"cluster\"", 0},
        {"kernel_address", "{\"cluster\": {\"backend\": \"ssh\", \"kernel_address\": \"%s\", " SSH1 "}}", "10.0.0.1",
         "\"cluster\"", 0},
        {"address", "{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"gpu1\", \"address\": \"%s\", "
         "\"gpus\": 8, \"cpus\": 96}]}}", "me@gpu1", "\"cluster\": host 'gpu1'", 0},
        {"partition", "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"partition\": \"%s\"}}}", "gpu",
         "configuration 'g4.4'", 1},
        {"gres", "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"gres\": \"%s\"}}}", "gpu:a100:8",
         "configuration 'g4.4'", 1},
        {"constraint", "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"constraint\": \"%s\"}}}", "a100",
         "configuration 'g4.4'", 1},
    };
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        for (size_t i = 0; i < sizeof inject / sizeof *inject; i++) {
            /* & and | are Slurm's constraint syntax (sbatch's argv only) */
            if (!strcmp(keys[k].key, "constraint") && strchr("&|", inject[i].json[0])) continue;
            char value[256], doc[1024], msg[256];
            snprintf(value, sizeof value, "%s%s", keys[k].start, inject[i].json);
            snprintf(doc, sizeof doc, keys[k].doc, value);
            snprintf(msg, sizeof msg, "%s: \"%s\" may not contain %s: \"%s", keys[k].where, keys[k].key,
                     inject[i].named, keys[k].start);
            if (keys[k].config) file_bad(doc, msg, "ASCII letters, digits and _ @ % + = : , . / - only");
            else cluster_bad(doc, msg, "ASCII letters, digits and _ @ % + = : , . / - only");
        }
    }
    /* the issue's own: the injection inside a path, and with backticks */
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"/tmp/x/cfg$(touch${IFS}/tmp/pwned)\", " SSH1 "}}",
                "\"cluster\": \"ssh_config\" may not contain '$': \"/tmp/x/cfg$(touch${IFS}/tmp/pwned)\"",
                "\"ssh_config\" (the file ssh -F reads) is in the ssh agent string that Open MPI hands to a shell: an "
                "absolute path of 1 to 1023 bytes of ASCII letters, digits and _ @ % + = : , . / - only, not starting "
                "with '-'; e.g. \"ssh_config\": \"/home/me/.ssh/config\"");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"/tmp/x/cfg`touch /tmp/pwned`\", " SSH1 "}}",
                "\"ssh_config\" may not contain '`'", "");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"gpu1\", \"address\": "
                "\"a;touch${IFS}/tmp/pwned\", \"gpus\": 8, \"cpus\": 96}]}}",
                "\"cluster\": host 'gpu1': \"address\" may not contain ';'",
                "\"address\" (a host name, user@host or an IP address) is what ssh connects to, which its config's "
                "ProxyCommand (%h) hands to a shell");
    /* a host's name is its address when none is given: the name rule is plain, and a name
     * starting with '-' needs an address */
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"gpu1;id\", \"gpus\": 8, \"cpus\": 96}]}}",
                "\"cluster\": host name 'gpu1;id' is not valid", "letters, digits, '.', '_' and '-'");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"gpu1$(id)\", \"gpus\": 8, \"cpus\": 96}]}}",
                "host name 'gpu1$(id)' is not valid", "");
    cluster_bad("{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"-oProxyCommand\", \"gpus\": 8, "
                "\"cpus\": 96}]}}",
                "\"cluster\": host '-oProxyCommand': a name that starts with '-' cannot be what ssh connects to",
                "give the host an \"address\"");
    taas_cluster c;
    cluster_ok("{\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"-x\", \"address\": \"10.0.0.21\", "
               "\"gpus\": 8, \"cpus\": 96}]}}", &c);
    assert_string_equal(c.hosts[0].address, "10.0.0.21");
    taas_cluster_free(&c);
    /* user@host, IPv6 with a zone: plain */
    cluster_ok("{\"cluster\": {\"backend\": \"ssh\", \"kernel_address\": \"fe80::2%eth0\", \"hosts\": [{\"name\": "
               "\"a\", \"address\": \"me@gpu1.example.org\", \"gpus\": 8, \"cpus\": 96}, {\"name\": \"b\", "
               "\"address\": \"fe80::1%eth0\", \"gpus\": 0, \"cpus\": 4}]}}", &c);
    assert_string_equal(c.hosts[0].address, "me@gpu1.example.org");
    assert_string_equal(c.hosts[1].address, "fe80::1%eth0");
    assert_string_equal(c.kernel_address, "fe80::2%eth0");
    taas_cluster_free(&c);
    /* a constraint's & | [ ]: Slurm's syntax, kept */
    use_file("{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"constraint\": \"[a100&ib|h100]\"}}}");
    taas_machine_config m;
    find_ok("g4.4", &m);
    assert_string_equal(m.constraint, "[a100&ib|h100]");
    assert_int_equal(access(pwned, F_OK), -1);
}

/* A constraint may hold & | [ ], which a shell would read: it goes to sbatch's and salloc's
 * argv (execve) and nowhere else. Every use of the field in the sources (kernel, pragma,
 * workers, dataloader, common) is the parse in pragma/config.c or one of the two argv words
 * of component_args in kernel/job/backend_slurm.c; a new use must be checked, then listed. */
static int constraint_uses, constraint_parse, constraint_argv;
static char constraint_other[8192];

static int scan_constraint(const char *p, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    size_t n = strlen(p);
    if (type != FTW_F || n < 2 || (strcmp(p + n - 2, ".c") && strcmp(p + n - 2, ".h") && (n < 3 || strcmp(p + n - 3, ".cu"))))
        return 0;
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "->constraint") && !strstr(line, ".constraint")) continue;
        constraint_uses++;
        if (strstr(p, "/pragma/config.c") && strstr(line, "c->constraint, sizeof c->constraint"))
            constraint_parse++;
        else if (strstr(p, "/kernel/job/backend_slurm.c") &&
                 strstr(line, "out[n++] = \"--constraint\", out[n++] = (char *)c->constraint;"))
            constraint_argv++;
        else
            snprintf(constraint_other + strlen(constraint_other), sizeof constraint_other - strlen(constraint_other),
                     "%s: %s", p, line);
    }
    fclose(f);
    return 0;
}

static void test_constraint_reaches_argv_only(void **state) {
    (void)state;
    const char *src = getenv("TAAS_SOURCE_DIR");
    assert_non_null(src);
    static const char *const dirs[] = {"kernel", "pragma", "workers", "dataloader", "common"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", src, dirs[i]);
        assert_int_equal(nftw(p, scan_constraint, 16, FTW_PHYS), 0);
    }
    if (constraint_other[0]) fail_msg("a configuration's constraint used outside sbatch's and salloc's argv:\n%s", constraint_other);
    assert_int_equal(constraint_parse, 1);
    assert_int_equal(constraint_argv, 2);
    assert_int_equal(constraint_uses, 3);
}

/* Anything but a regular file is refused at once: a FIFO would otherwise block the kernel. */
static void test_not_a_file(void **state) {
    (void)state;
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/fifo.json", dir);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    setenv("TAAS_CONFIG", fifo, 1);
    taas_machine_config m;
    assert_int_equal(taas_config_find("g2.8", &m, &E), -1);
    assert_string_equal(E.ename, "TaasConfigError");
    assert_non_null(strstr(E.message, "is a FIFO, not a configuration file"));
    assert_non_null(strstr(E.hint, "point $TAAS_CONFIG at a JSON file"));
    taas_cluster c;
    assert_int_equal(taas_cluster_load(&c, &E), -1);
    assert_non_null(strstr(E.message, "is a FIFO, not a configuration file"));
    unlink(fifo);
    setenv("TAAS_CONFIG", "/dev/null", 1);
    assert_int_equal(taas_cluster_load(&c, &E), -1);
    assert_string_equal(E.message, "/dev/null: is a character device, not a configuration file");
    setenv("TAAS_CONFIG", dir, 1);
    assert_int_equal(taas_cluster_load(&c, &E), -1);
    assert_non_null(strstr(E.message, "is a directory, not a configuration file"));
    /* a path longer than the cluster's path field */
    char longp[1100];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    setenv("TAAS_CONFIG", longp, 1);
    assert_int_equal(taas_cluster_load(&c, &E), -1);
    assert_non_null(strstr(E.message, "the configuration file's path is longer than 1023 bytes"));
    assert_non_null(strstr(E.hint, "shorter path"));
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
        cmocka_unit_test(test_slurm_keys),
        cmocka_unit_test(test_price_per_hour),
        cmocka_unit_test(test_cluster_defaults),
        cmocka_unit_test(test_cluster_ssh),
        cmocka_unit_test(test_cluster_slurm_and_local),
        cmocka_unit_test(test_cluster_bad_section),
        cmocka_unit_test(test_cluster_bad_hosts),
        cmocka_unit_test(test_cluster_bad_values),
        cmocka_unit_test(test_cluster_values_reach_no_shell),
        cmocka_unit_test(test_constraint_reaches_argv_only),
        cmocka_unit_test(test_not_a_file),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
