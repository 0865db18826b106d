/* pragma/pragma.c: the header of a cell, #pragma taas flags and #!CONFIG lines, and every
 * error they can give (message, hint, line, column and caret width). The user file is
 * pointed at a path that does not exist, so only the built-ins g2.8 and c1.4 are known;
 * test_config.c covers the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pragma.h"
#include "utf8.h"

static taas_pragma P;
static taas_error E;

static int no_user_file(void **state) {
    (void)state;
    return setenv("TAAS_CONFIG", "/nonexistent/taas-unit-test/config.json", 1);
}

static void parse_ok(const char *cell) {
    if (taas_pragma_parse(cell, &P, &E) != 0)
        fail_msg("cell %s\nfailed: %s: %s (hint: %s)", cell ? cell : "(null)", E.ename, E.message, E.hint);
    assert_false(taas_error_is_set(&E));
}

/* The cell fails with a TaasPragmaError whose message and hint contain msg and hint, at
 * line:col with a caret width wide. */
static void parse_bad(const char *cell, int line, int col, int width, const char *msg, const char *hint) {
    if (taas_pragma_parse(cell, &P, &E) != -1) fail_msg("cell %s\nwas accepted", cell);
    if (strcmp(E.ename, "TaasPragmaError") || !strstr(E.message, msg) || !strstr(E.hint, hint) ||
        E.pos.line != line || E.pos.col != col || E.width != width)
        fail_msg("cell %s\ngave %s at %d:%d width %d: %s\nhint: %s\nwanted '%s' at %d:%d width %d, hint '%s'",
                 cell, E.ename, E.pos.line, E.pos.col, E.width, E.message, E.hint, msg, line, col, width,
                 hint);
    assert_true(taas_utf8_valid(E.message, strlen(E.message)));
    assert_true(taas_utf8_valid(E.hint, strlen(E.hint)));
}

/* ---- valid cells ---- */

static void test_no_directives(void **state) {
    (void)state;
    parse_ok("x = 1\nprint(x)\n");
    assert_int_equal(P.present, 0);
    assert_int_equal(P.has_config, 0);
    assert_int_equal(P.body_line, 1);
    parse_ok("# just a comment\n\nx = 1  # and another\n# after code, a plain comment\n");
    assert_int_equal(P.present, 0);
    assert_int_equal(P.body_line, 3);
    parse_ok("");
    assert_int_equal(P.present, 0);
    parse_ok(NULL);
    assert_int_equal(P.present, 0);
}

static void test_gpus_only_defaults(void **state) {
    (void)state;
    parse_ok("#pragma taas --gpus 8\nfit(net, train)\n");
    assert_int_equal(P.present, 1);
    assert_int_equal(P.line, 1);
    assert_int_equal(P.gpus, 8);
    assert_int_equal(P.cpus, 1);
    assert_int_equal(P.units, 0);
    assert_int_equal(P.detach, 0);
    assert_int_equal(P.cpus_auto, 0);
    assert_int_equal(P.cpus_max, 0);
    assert_int_equal(P.budget_kind, 0);
    assert_true(P.budget == 0);
    assert_int_equal(P.has_config, 0);
    assert_true(P.config.price_per_hour == -1); /* no configuration, no price */
    assert_int_equal(P.machines, 1);
    assert_int_equal(P.ranks_per_machine, 8);
    assert_int_equal(P.body_line, 2);
}

static void test_all_flags_both_forms(void **state) {
    (void)state;
    parse_ok("#pragma taas --gpus=2 --cpus=3 --units=1_000\nfit(net, train)");
    assert_int_equal(P.gpus, 2);
    assert_int_equal(P.cpus, 3);
    assert_int_equal(P.units, 1000);
    parse_ok("#pragma taas --units 20480000 --cpus 8 --gpus 4096\nfit(net, train)");
    assert_int_equal(P.gpus, 4096);
    assert_int_equal(P.cpus, 8);
    assert_int_equal(P.units, 20480000);
    parse_ok("#pragma taas\t--gpus\t1   --units 9_223_372_036_854_775_807\nfit(net, train)");
    assert_int_equal(P.gpus, 1);
    assert_int_equal(P.units, 9223372036854775807LL);
}

static void test_detach_is_a_switch(void **state) {
    (void)state;
    parse_ok("#pragma taas --gpus 2 --detach\nfit(net, train)");
    assert_int_equal(P.detach, 1);
    assert_int_equal(P.gpus, 2);
    parse_ok("#pragma taas --detach --gpus=2 --cpus 3  # keeps running\nfit(net, train)");
    assert_int_equal(P.detach, 1);
    assert_int_equal(P.cpus, 3);
    parse_bad("#pragma taas --gpus 2 --detach=1", 1, 23, 10, "--detach takes no value", "write --detach alone");
    parse_bad("#pragma taas --gpus 2 --detach --detach", 1, 32, 8, "--detach is given twice", "keep one --detach");
    parse_bad("#pragma taas --gpus 2 --detatch", 1, 23, 9, "unknown flag '--detatch'", "did you mean --detach?");
    parse_bad("#pragma taas --detach", 1, 1, 12, "#pragma taas needs --gpus N", "--detach (no value)");
}

static void test_with_config(void **state) {
    (void)state;
    parse_ok("#!g2.8\n#pragma taas --gpus 16 --cpus 2 --units 20480000\nfit(net, train)\n");
    assert_int_equal(P.has_config, 1);
    assert_string_equal(P.config.name, "g2.8");
    assert_int_equal(P.config.gpus_per_machine, 8);
    assert_int_equal(P.config.cpus_per_machine, 96);
    assert_int_equal(P.gpus, 16);
    assert_int_equal(P.machines, 2);
    assert_int_equal(P.ranks_per_machine, 8);
    assert_int_equal(P.line, 2);
    assert_int_equal(P.body_line, 3);
    /* fewer GPUs than one machine has: one machine, partly used */
    parse_ok("#!g2.8\n#pragma taas --gpus 3\nfit(net, train)");
    assert_int_equal(P.machines, 1);
    assert_int_equal(P.ranks_per_machine, 3);
    parse_ok("#!g2.8\n#pragma taas --gpus 8\nfit(net, train)");
    assert_int_equal(P.machines, 1);
    assert_int_equal(P.ranks_per_machine, 8);
    parse_ok("#!g2.8\n#pragma taas --gpus 4096\nfit(net, train)");
    assert_int_equal(P.machines, 512);
    /* the configuration line may also follow the pragma */
    parse_ok("#pragma taas --gpus 24\n#!g2.8\nfit(net, train)");
    assert_int_equal(P.machines, 3);
    assert_int_equal(P.line, 1);
}

static void test_header_blank_and_comment_lines(void **state) {
    (void)state;
    parse_ok("\n# training\n   \n  # indented comment\n#!g2.8\n# eight GPUs\n"
             "#pragma taas --gpus 8  # trailing comment\n\nfit(net, train)\n");
    assert_int_equal(P.present, 1);
    assert_int_equal(P.line, 7);
    assert_int_equal(P.gpus, 8);
    assert_int_equal(P.body_line, 9);
    /* indented directives, and "# pragma" with a space as C allows */
    parse_ok("  #!g2.8\n\t#pragma taas --gpus 2\nfit(net, train)");
    assert_int_equal(P.gpus, 2);
    assert_int_equal(P.has_config, 1);
    parse_ok("# pragma taas --gpus 5\nfit(net, train)");
    assert_int_equal(P.gpus, 5);
    /* words that merely start like a directive are comments */
    parse_ok("# pragma: no cover\n#pragmatic note\n#pragma taas --gpus 1\nfit(net, train)");
    assert_int_equal(P.line, 3);
    parse_ok("#!g2.8  # the big machines\n#pragma taas --gpus 1\n");
    assert_int_equal(P.has_config, 1);
    /* a header with nothing after it */
    parse_ok("#pragma taas --gpus 1");
    assert_int_equal(P.body_line, 2);
}

static void test_windows_line_endings(void **state) {
    (void)state;
    parse_ok("# data\r\n\r\n#!g2.8\r\n#pragma taas --gpus 16 --cpus 2\r\nfit(net, train)\r\n");
    assert_int_equal(P.gpus, 16);
    assert_int_equal(P.cpus, 2);
    assert_int_equal(P.machines, 2);
    assert_int_equal(P.line, 4);
    assert_int_equal(P.body_line, 5);
    parse_bad("#pragma taas --gpus 8 --cpus\r\nfit(net)\r\n", 1, 23, 6, "--cpus has no value", "1 to 8");
}

static void test_statement_ends_header(void **state) {
    (void)state;
    /* a statement that starts with whitespace is still a statement */
    parse_ok("#pragma taas --gpus 1\n   fit(net, train)\n");
    assert_int_equal(P.body_line, 2);
    parse_ok("   x = 1\n");
    assert_int_equal(P.present, 0);
    assert_int_equal(P.body_line, 1);
    /* '#' inside strings of the body is no directive */
    parse_ok("#pragma taas --gpus 1\nprint(\"#pragma taas --gpus 2\")\nprint('#!g2.8')\n");
    parse_ok("x = \"\"\"\n#pragma taas --gpus 2\n#!g2.8\n\"\"\"\ny = 1\n");
    parse_ok("x = '''a\\'''\n#pragma taas\n'''\n");
    parse_ok("x = 'a\\\n#pragma taas'\n");
    assert_int_equal(P.present, 0);
}

/* ---- flag errors ---- */

static void test_unknown_flag(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpu 8\nfit(net)", 1, 14, 5, "unknown flag '--gpu'", "did you mean --gpus?");
    parse_bad("#pragma taas --gpus 8 --cpu 2", 1, 23, 5, "unknown flag '--cpu'", "did you mean --cpus?");
    parse_bad("#pragma taas --gpus 8 --Units=5", 1, 23, 7, "unknown flag '--Units'", "did you mean --units?");
    parse_bad("#pragma taas --num-gpus 8", 1, 14, 10, "unknown flag '--num-gpus'", "did you mean --gpus?");
    parse_bad("#pragma taas --nodes 2", 1, 14, 7, "unknown flag '--nodes'",
              "#pragma taas takes --gpus N (1 to 4096, required), --cpus M (1 to 8, default 1)");
    assert_null(strstr(E.hint, "did you mean"));
    parse_bad("#pragma taas -g 8", 1, 14, 2, "unknown flag '-g'", "did you mean --gpus?");
    /* "—gpus" with an em dash, as word processors write "--" */
    parse_bad("#pragma taas \xE2\x80\x94gpus 8", 1, 14, 5, "unknown flag '\xE2\x80\x94gpus'",
              "did you mean --gpus? flags begin with two ASCII hyphens");
}

static void test_missing_value(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus", 1, 14, 6, "--gpus has no value", "e.g. --gpus 8; --gpus takes 1 to 4096");
    parse_bad("#pragma taas --gpus --cpus 2", 1, 14, 6, "--gpus has no value", "1 to 4096");
    parse_bad("#pragma taas --gpus= 8", 1, 14, 7, "--gpus= has no value", "after the '='");
    parse_bad("#pragma taas --gpus 8 --units # all of them", 1, 23, 7, "--units has no value",
              "--units takes a number of samples");
}

static void test_not_an_integer(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus eight", 1, 21, 5, "--gpus needs a whole number, not 'eight'",
              "underscores (20_480_000)");
    parse_bad("#pragma taas --gpus 8.0", 1, 21, 3, "not '8.0'", "no fractions or suffixes");
    parse_bad("#pragma taas --gpus 8 --units 20M", 1, 31, 3, "--units needs a whole number, not '20M'",
              "--units takes a number of samples");
    parse_bad("#pragma taas --gpus 8 --units=1__000", 1, 31, 6, "not '1__000'", "underscores");
    parse_bad("#pragma taas --gpus 8 --units _1000", 1, 31, 5, "not '_1000'", "underscores");
    parse_bad("#pragma taas --gpus 8 --units 1000_", 1, 31, 5, "not '1000_'", "underscores");
    parse_bad("#pragma taas --gpus 0x10", 1, 21, 4, "not '0x10'", "1 to 4096");
    parse_bad("#pragma taas --gpus -", 1, 21, 1, "not '-'", "1 to 4096");
    /* no number of the pragma takes a '+', as --budget never did: one rule for every flag */
    parse_bad("#pragma taas --gpus +1", 1, 21, 2, "--gpus needs a whole number, not '+1'",
              "write the number without a sign. write digits");
    parse_bad("#pragma taas --gpus 1 --cpus +2", 1, 30, 2, "--cpus needs a whole number or auto, not '+2'",
              "write the number without a sign");
    parse_bad("#pragma taas --gpus 1 --cpus auto:+4", 1, 35, 2, "--cpus auto:MAX needs a whole number, not '+4'",
              "write the number without a sign");
    parse_bad("#pragma taas --gpus 1 --units=+5", 1, 31, 2, "--units needs a whole number, not '+5'",
              "write the number without a sign");
    parse_bad("#pragma taas --gpus 1 --budget +3", 1, 32, 2, "not '+3'", "write the number without a sign");
}

static void test_out_of_range(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus 0", 1, 21, 1, "--gpus 0 is out of range", "--gpus takes 1 to 4096");
    parse_bad("#pragma taas --gpus 4097", 1, 21, 4, "--gpus 4097 is out of range", "1 to 4096");
    parse_bad("#pragma taas --gpus=-1", 1, 21, 2, "--gpus -1 is out of range", "1 to 4096");
    parse_bad("#pragma taas --gpus 1 --cpus 0", 1, 30, 1, "--cpus 0 is out of range", "--cpus takes 1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus 9", 1, 30, 1, "--cpus 9 is out of range", "--cpus takes 1 to 8");
    parse_bad("#pragma taas --gpus 1 --units 0", 1, 31, 1, "--units 0 is out of range", "from 1 to");
    parse_bad("#pragma taas --gpus 1 --units 99999999999999999999", 1, 31, 20,
              "--units 99999999999999999999 is out of range", "9223372036854775807");
    parse_bad("#pragma taas --gpus 99999999999999999999999", 1, 21, 23, "is out of range", "1 to 4096");
}

static void test_duplicate_flag(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus 8 --gpus 4", 1, 23, 6, "--gpus is given twice",
              "keep one --gpus; the first is at column 14");
    parse_bad("#pragma taas --cpus=2 --gpus 8 --cpus=3", 1, 32, 6, "--cpus is given twice", "column 14");
}

static void test_missing_gpus(void **state) {
    (void)state;
    parse_bad("#pragma taas --cpus 2\nfit(net)", 1, 1, 12, "#pragma taas needs --gpus N",
              "e.g. `#pragma taas --gpus 8`");
    parse_bad("  #pragma taas", 1, 3, 12, "#pragma taas needs --gpus N", "1 to 4096");
    parse_bad("# pragma taas # nothing else", 1, 1, 13, "needs --gpus N", "--gpus 8");
}

static void test_stray_word(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus 8 9", 1, 23, 1, "unexpected '9' in #pragma taas",
              "a number needs its flag in front of it");
    parse_bad("#pragma taas 8", 1, 14, 1, "unexpected '8'", "e.g. --gpus 8");
    parse_bad("#pragma taas --gpus 8 please", 1, 23, 6, "unexpected 'please'", "each flag takes one value");
}

/* ---- --cpus auto ---- */

static void test_cpus_auto(void **state) {
    (void)state;
    parse_ok("#pragma taas --gpus 2 --cpus auto\nfit(net, train)");
    assert_int_equal(P.cpus, 1); /* the starting pool */
    assert_int_equal(P.cpus_auto, 1);
    assert_int_equal(P.cpus_max, 0); /* the backend's default */
    parse_ok("#pragma taas --cpus=auto --gpus 2  # grows as needed\nfit(net, train)");
    assert_int_equal(P.cpus_auto, 1);
    assert_int_equal(P.cpus_max, 0);
    parse_ok("#pragma taas --gpus 2 --cpus auto:4\nfit(net, train)");
    assert_int_equal(P.cpus, 1);
    assert_int_equal(P.cpus_auto, 1);
    assert_int_equal(P.cpus_max, 4);
    parse_ok("#pragma taas --gpus 2 --cpus=auto:8");
    assert_int_equal(P.cpus_max, 8);
    parse_ok("#pragma taas --gpus 2 --cpus auto:1");
    assert_int_equal(P.cpus_max, 1);
    parse_ok("#pragma taas --gpus 2 --cpus auto:0_8"); /* MAX follows the rules of a whole number */
    assert_int_equal(P.cpus_max, 8);
    parse_ok("#!g2.8\r\n#pragma taas --gpus 16 --cpus auto:3 --detach\r\nfit(net, train)");
    assert_int_equal(P.cpus_max, 3);
    assert_int_equal(P.machines, 2);
    /* a fixed pool */
    parse_ok("#pragma taas --gpus 2 --cpus 3");
    assert_int_equal(P.cpus, 3);
    assert_int_equal(P.cpus_auto, 0);
    assert_int_equal(P.cpus_max, 0);
}

static void test_cpus_auto_errors(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus 1 --cpus auto:", 1, 30, 5, "--cpus auto: has no MAX after the ':'",
              "e.g. --cpus auto:4, or write --cpus auto for the default (8); auto:MAX takes 1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus=auto: --units 5", 1, 30, 5, "--cpus auto: has no MAX", "auto:MAX");
    parse_bad("#pragma taas --gpus 1 --cpus auto:0", 1, 35, 1, "--cpus auto:0 is out of range",
              "auto:MAX takes 1 to 8: the most loader workers for each registered loader");
    parse_bad("#pragma taas --gpus 1 --cpus auto:9", 1, 35, 1, "--cpus auto:9 is out of range", "auto:MAX takes 1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus=auto:9", 1, 35, 1, "--cpus auto:9 is out of range", "1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus auto:-1", 1, 35, 2, "--cpus auto:-1 is out of range", "1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus auto:99999999999999999999", 1, 35, 20, "is out of range", "1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus auto:x", 1, 35, 1, "--cpus auto:MAX needs a whole number, not 'x'",
              "auto:MAX takes 1 to 8");
    parse_bad("#pragma taas --gpus 1 --cpus auto:4.5", 1, 35, 3, "--cpus auto:MAX needs a whole number, not '4.5'",
              "e.g. --cpus auto:4");
    parse_bad("#pragma taas --gpus 1 --cpus auto:1__0", 1, 35, 4, "not '1__0'", "underscores");
    /* a misspelt auto */
    parse_bad("#pragma taas --gpus 1 --cpus Auto", 1, 30, 4, "--cpus needs a whole number or auto, not 'Auto'",
              "did you mean auto? auto is written in lower case");
    parse_bad("#pragma taas --gpus 1 --cpus automatic", 1, 30, 9,
              "--cpus needs a whole number or auto, not 'automatic'", "did you mean auto?");
    parse_bad("#pragma taas --gpus 1 --cpus AUTO:4", 1, 30, 6, "not 'AUTO:4'", "did you mean auto:4?");
    parse_bad("#pragma taas --gpus 1 --cpus auto4", 1, 30, 5, "not 'auto4'", "did you mean auto:4?");
    parse_bad("#pragma taas --gpus 1 --cpus aut", 1, 30, 3, "not 'aut'", "did you mean auto?");
    /* the whole-number message says that auto is accepted too */
    parse_bad("#pragma taas --gpus 1 --cpus many", 1, 30, 4, "--cpus needs a whole number or auto, not 'many'",
              "--cpus takes 1 to 8: the loader workers for each registered loader; or auto (auto:MAX)");
    assert_null(strstr(E.hint, "did you mean"));
    parse_bad("#pragma taas --gpus 1 --cpus 2.5", 1, 30, 3, "--cpus needs a whole number or auto, not '2.5'",
              "no fractions or suffixes");
    parse_bad("#pragma taas --gpus 1 --cpus", 1, 23, 6, "--cpus has no value", "or auto (auto:MAX)");
    parse_bad("#pragma taas --gpus 1 --cpus auto --cpus 2", 1, 35, 6, "--cpus is given twice",
              "the first is at column 23");
    /* auto is for --cpus only */
    parse_bad("#pragma taas --gpus auto", 1, 21, 4, "--gpus needs a whole number, not 'auto'", "1 to 4096");
}

/* ---- --budget ---- */

static void budget_ok(const char *value, int kind, double amount) {
    char cell[200], text[64];
    snprintf(cell, sizeof cell, "#pragma taas --gpus 2 --budget %s\nfit(net, train)", value);
    parse_ok(cell);
    if (P.budget_kind != kind || P.budget != amount)
        fail_msg("--budget %s gave kind %d, %.17g; wanted kind %d, %.17g", value, P.budget_kind, P.budget, kind,
                 amount);
    /* what messages show: the budget as written, without its underscores */
    size_t k = 0;
    for (const char *c = value; *c; c++)
        if (*c != '_') text[k++] = *c;
    text[k] = '\0';
    assert_string_equal(P.budget_text, text);
}

static void test_budget(void **state) {
    (void)state;
    /* an amount, in the unit of the configuration file's price_per_hour */
    budget_ok("25", TAAS_BUDGET_MONEY, 25);
    budget_ok("2.50", TAAS_BUDGET_MONEY, 2.5);
    budget_ok("0.01", TAAS_BUDGET_MONEY, 0.01);
    budget_ok("1_000", TAAS_BUDGET_MONEY, 1000);
    budget_ok("1_000.250_5", TAAS_BUDGET_MONEY, 1000.2505);
    budget_ok("007", TAAS_BUDGET_MONEY, 7);
    budget_ok("9007199254740992", TAAS_BUDGET_MONEY, 9007199254740992.0); /* 2^53, the most */
    budget_ok("9_007_199_254_740_992.000", TAAS_BUDGET_MONEY, 9007199254740992.0);
    /* a time, in seconds */
    budget_ok("45s", TAAS_BUDGET_TIME, 45);
    budget_ok("90m", TAAS_BUDGET_TIME, 5400);
    budget_ok("2h", TAAS_BUDGET_TIME, 7200);
    budget_ok("1.5h", TAAS_BUDGET_TIME, 5400);
    budget_ok("2d", TAAS_BUDGET_TIME, 172800);
    budget_ok("0.5s", TAAS_BUDGET_TIME, 0.5);
    budget_ok("0.000001s", TAAS_BUDGET_TIME, 0.000001);
    budget_ok("0.0000001", TAAS_BUDGET_MONEY, 0.0000001);
    budget_ok("1_440m", TAAS_BUDGET_TIME, 86400);
    budget_ok("365d", TAAS_BUDGET_TIME, 31536000); /* the most */
    budget_ok("8760h", TAAS_BUDGET_TIME, 31536000);
    budget_ok("31536000s", TAAS_BUDGET_TIME, 31536000);
    /* after '=', among the other flags, before a comment */
    parse_ok("#pragma taas --budget=2h --gpus 8 --cpus auto:4 --units 1_000  # two hours at most\nfit(net, train)");
    assert_int_equal(P.budget_kind, TAAS_BUDGET_TIME);
    assert_true(P.budget == 7200);
    assert_int_equal(P.gpus, 8);
    assert_int_equal(P.cpus_max, 4);
    assert_int_equal(P.units, 1000);
    parse_ok("#!g2.8\n#pragma taas --gpus 16 --budget=12.5\nfit(net, train)");
    assert_int_equal(P.budget_kind, TAAS_BUDGET_MONEY);
    assert_true(P.budget == 12.5);
    assert_int_equal(P.has_config, 1);
    assert_true(P.config.price_per_hour == -1); /* the built-ins have no price */
}

static void test_budget_errors(void **state) {
    (void)state;
    /* no value */
    parse_bad("#pragma taas --gpus 1 --budget", 1, 23, 8, "--budget has no value",
              "write an amount or a time after it, e.g. --budget 25 or --budget 2h; --budget takes an amount above 0 "
              "in the unit of the configuration file's price_per_hour");
    parse_bad("#pragma taas --gpus 1 --budget --units 5", 1, 23, 8, "--budget has no value", "--budget 2h");
    parse_bad("#pragma taas --gpus 1 --budget  # none", 1, 23, 8, "--budget has no value", "--budget 2h");
    parse_bad("#pragma taas --gpus 1 --budget=", 1, 23, 9, "--budget= has no value", "e.g. --budget=25 or --budget=2h");
    /* zero, negative, too large */
    parse_bad("#pragma taas --gpus 1 --budget 0", 1, 32, 1, "--budget 0 is out of range",
              "a budget is above 0: an amount such as --budget 25 (in the unit of the configuration file's "
              "price_per_hour) or a time such as --budget 2h; without --budget there is no limit");
    parse_bad("#pragma taas --gpus 1 --budget 0.00", 1, 32, 4, "--budget 0.00 is out of range", "above 0");
    parse_bad("#pragma taas --gpus 1 --budget 0h", 1, 32, 2, "--budget 0h is out of range", "above 0");
    parse_bad("#pragma taas --gpus 1 --budget -3", 1, 32, 2, "--budget -3 is a negative budget",
              "a budget is above 0: e.g. --budget 3");
    parse_bad("#pragma taas --gpus 1 --budget=-1.5h", 1, 32, 5, "--budget -1.5h is a negative budget", "--budget 1.5h");
    parse_bad("#pragma taas --gpus 1 --budget 9007199254740993", 1, 32, 16, "--budget 9007199254740993 is out of range",
              "an amount takes at most 9007199254740992 (2^53), in the unit of the configuration file's price_per_hour");
    parse_bad("#pragma taas --gpus 1 --budget 9007199254740992.5", 1, 32, 18, "is out of range", "2^53");
    parse_bad("#pragma taas --gpus 1 --budget 100_000_000_000_000_000", 1, 32, 23, "is out of range", "2^53");
    parse_bad("#pragma taas --gpus 1 --budget 366d", 1, 32, 4, "--budget 366d is out of range",
              "a time takes at most 365 days: 365d, 8760h, 525600m or 31536000s");
    parse_bad("#pragma taas --gpus 1 --budget 8761h", 1, 32, 5, "--budget 8761h is out of range", "365 days");
    parse_bad("#pragma taas --gpus 1 --budget 31536001s", 1, 32, 9, "is out of range", "365 days");
    /* the limit compared digit by digit, in the unit written: strtod reads these as the limit */
    parse_bad("#pragma taas --gpus 1 --budget 365.000000000000001d", 1, 32, 20, "is out of range", "365 days");
    parse_bad("#pragma taas --gpus 1 --budget 8760.0000000000000001h", 1, 32, 22, "is out of range", "365 days");
    parse_bad("#pragma taas --gpus 1 --budget 525600.00000000000001m", 1, 32, 22, "is out of range", "365 days");
    parse_bad("#pragma taas --gpus 1 --budget 31536000.000000001s", 1, 32, 19, "is out of range", "365 days");
    parse_bad("#pragma taas --gpus 1 --budget 9007199254740992.0000001", 1, 32, 24, "is out of range", "2^53");
    budget_ok("365.000d", TAAS_BUDGET_TIME, 31536000);
    budget_ok("0_365d", TAAS_BUDGET_TIME, 31536000);
    /* -0 has no positive twin to suggest */
    parse_bad("#pragma taas --gpus 1 --budget -0", 1, 32, 2, "--budget -0 is a negative budget",
              "a budget is above 0: e.g. --budget 25 or --budget 2h;");
    parse_bad("#pragma taas --gpus 1 --budget -0.00h", 1, 32, 6, "negative budget", "e.g. --budget 25 or --budget 2h");
    /* too many digits to show as written */
    parse_bad("#pragma taas --gpus 1 --budget 0.0000000000000000000000000000000000000000000001", 1, 32, 48,
              "has too many digits: a budget's number is at most 46 characters long", "write fewer decimals");
    /* units */
    parse_bad("#pragma taas --gpus 1 --budget 2x", 1, 33, 1, "--budget 2x has an unknown unit 'x'",
              "a time ends in s (seconds), m (minutes), h (hours) or d (days), e.g. --budget 2h; a bare number "
              "is money, in the unit of the configuration file's price_per_hour");
    assert_null(strstr(E.hint, "did you mean"));
    parse_bad("#pragma taas --gpus 1 --budget 2ms", 1, 33, 2, "--budget 2ms has an unknown unit 'ms'", "s (seconds)");
    parse_bad("#pragma taas --gpus 1 --budget 5k", 1, 33, 1, "unknown unit 'k'", "No other suffixes (k, M)");
    parse_bad("#pragma taas --gpus 1 --budget 2H", 1, 33, 1, "--budget 2H has an unknown unit 'H'",
              "did you mean 2h? a time ends in s");
    parse_bad("#pragma taas --gpus 1 --budget 2hours", 1, 33, 5, "unknown unit 'hours'", "did you mean 2h?");
    parse_bad("#pragma taas --gpus 1 --budget 1.5min", 1, 35, 3, "unknown unit 'min'", "did you mean 1.5m?");
    parse_bad("#pragma taas --gpus 1 --budget 3days", 1, 33, 4, "unknown unit 'days'", "did you mean 3d?");
    parse_bad("#pragma taas --gpus 1 --budget 2 h", 1, 34, 1, "unexpected 'h' after --budget 2",
              "write the unit right after the number: --budget 2h");
    parse_bad("#pragma taas --gpus 1 --budget=90 min --units 5", 1, 35, 3, "unexpected 'min' after --budget 90",
              "write the unit right after the number: --budget 90m");
    parse_bad("#pragma taas --gpus 1 --budget 2 hours", 1, 34, 5, "unexpected 'hours'", "--budget 2h");
    /* a currency */
    parse_bad("#pragma taas --gpus 1 --budget $5", 1, 32, 2, "--budget $5 has a currency sign",
              "the amount is in the unit of the configuration file's price_per_hour, whatever currency that is; "
              "write the bare number: --budget 5");
    parse_bad("#pragma taas --gpus 1 --budget 5$", 1, 32, 2, "--budget 5$ has a currency sign", "--budget 5");
    parse_bad("#pragma taas --gpus 1 --budget 2.50\xE2\x82\xAC", 1, 32, 5, "--budget 2.50\xE2\x82\xAC has a currency sign",
              "write the bare number: --budget 2.50");
    parse_bad("#pragma taas --gpus 1 --budget \xC2\xA3" "12", 1, 32, 3, "has a currency sign", "--budget 12");
    parse_bad("#pragma taas --gpus 1 --budget $", 1, 32, 1, "has a currency sign", "--budget 25");
    parse_bad("#pragma taas --gpus 1 --budget 5USD", 1, 32, 4, "--budget 5USD names a currency",
              "price_per_hour, whatever currency that is; write the bare number: --budget 5");
    parse_bad("#pragma taas --gpus 1 --budget 5eur", 1, 32, 4, "--budget 5eur names a currency", "--budget 5");
    parse_bad("#pragma taas --gpus 1 --budget 5 USD", 1, 34, 3, "unexpected 'USD' after --budget 5",
              "write the bare number: --budget 5");
    parse_bad("#pragma taas --gpus 1 --budget 5 dollars", 1, 34, 7, "unexpected 'dollars'", "--budget 5");
    /* other malformed numbers */
    parse_bad("#pragma taas --gpus 1 --budget 1e3", 1, 32, 3, "--budget 1e3 has an exponent",
              "write the number out in digits, e.g. --budget 1000 rather than 1e3");
    parse_bad("#pragma taas --gpus 1 --budget 2.5E-1", 1, 32, 6, "--budget 2.5E-1 has an exponent", "in digits");
    parse_bad("#pragma taas --gpus 1 --budget +3", 1, 32, 2, "--budget needs an amount or a duration, not '+3'",
              "write the number without a sign");
    parse_bad("#pragma taas --gpus 1 --budget 1,5", 1, 32, 3, "not '1,5'", "the decimal separator is a point");
    parse_bad("#pragma taas --gpus 1 --budget .5", 1, 32, 2, "not '.5'", "(0.5, not .5)");
    parse_bad("#pragma taas --gpus 1 --budget 5.", 1, 32, 2, "not '5.'", "with an optional point and digits after it");
    parse_bad("#pragma taas --gpus 1 --budget 1__000", 1, 32, 6, "not '1__000'", "optionally grouped by underscores");
    parse_bad("#pragma taas --gpus 1 --budget _5", 1, 32, 2, "not '_5'", "underscores");
    parse_bad("#pragma taas --gpus 1 --budget 2h30m", 1, 32, 5, "not '2h30m'", "one unit at most (150m, not 2h30m)");
    parse_bad("#pragma taas --gpus 1 --budget lots", 1, 32, 4,
              "--budget needs an amount or a duration, not 'lots'",
              "--budget takes an amount above 0 in the unit of the configuration file's price_per_hour (25, 2.50, "
              "1_000), or a time: a number with s, m, h or d right after it (45s, 90m, 1.5h, 2d)");
    parse_bad("#pragma taas --gpus 1 --budget h", 1, 32, 1, "not 'h'", "");
    /* once */
    parse_bad("#pragma taas --gpus 1 --budget 2h --budget 3", 1, 35, 8, "--budget is given twice",
              "keep one --budget; the first is at column 23");
    /* a stray number after an amount is no unit */
    parse_bad("#pragma taas --gpus 1 --budget 2 3", 1, 34, 1, "unexpected '3' in #pragma taas", "");
    parse_bad("#pragma taas --gpus 1 --budgte 2", 1, 23, 8, "unknown flag '--budgte'", "did you mean --budget?");
    parse_bad("#pragma taas --gpus 1 --max-budget 2", 1, 23, 12, "unknown flag '--max-budget'", "did you mean --budget?");
    parse_bad("#pragma taas --budget 2h", 1, 1, 12, "#pragma taas needs --gpus N",
              "--budget B (an amount such as 25 or a time such as 2h; default: no limit)");
}

/* ---- directive errors ---- */

static void test_other_pragma(void **state) {
    (void)state;
    parse_bad("#pragma omp parallel\nx = 1", 1, 9, 3, "unknown pragma 'omp': expected #pragma taas",
              "other pragmas (such as #pragma omp) are not supported");
    parse_bad("#pragma TAAS --gpus 8", 1, 9, 4, "unknown pragma 'TAAS'", "write taas in lower case");
    parse_bad("#pragma taas--gpus 8", 1, 9, 10, "unknown pragma 'taas--gpus'", "#pragma taas --gpus N");
    parse_bad("#pragma\nx = 1", 1, 1, 7, "#pragma without a name: expected #pragma taas",
              "#pragma taas --gpus N");
}

static void test_duplicate_pragma_line(void **state) {
    (void)state;
    parse_bad("#pragma taas --gpus 8\n#pragma taas --cpus 2\nfit(net)", 2, 1, 21,
              "a second #pragma taas line", "the first is line 1");
}

static void test_duplicate_config(void **state) {
    (void)state;
    parse_bad("#!g2.8\n#!c1.4\n#pragma taas --gpus 8", 2, 1, 6, "a second #! machine configuration line",
              "line 1 already names #!g2.8");
}

static void test_config_without_pragma(void **state) {
    (void)state;
    parse_bad("#!g2.8\nfit(net, train)", 1, 1, 6,
              "#!g2.8 names a machine configuration for a #pragma taas cell",
              "add `#pragma taas --gpus N` below it");
}

static void test_config_line_errors(void **state) {
    (void)state;
    parse_bad("#!\n#pragma taas --gpus 8", 1, 1, 2, "#! without a machine configuration name", "e.g. #!g2.8");
    parse_bad("#!/usr/bin/env python\n#pragma taas --gpus 8", 1, 3, 12,
              "'/usr/bin/env' is not a machine configuration name", "letters, digits");
    parse_bad("#!g2.8 --gpus 8\n#pragma taas --gpus 8", 1, 8, 6, "unexpected '--gpus' after #!g2.8",
              "the flags go on the #pragma taas line");
    char cell[200];
    snprintf(cell, sizeof cell, "#!%s\n#pragma taas --gpus 8", "a123456789b123456789c123456789d123456789"
                                                            "e123456789f123456789g1234");
    parse_bad(cell, 1, 3, 65, "is too long", "at most 63 characters");
}

static void test_unknown_config(void **state) {
    (void)state;
    parse_bad("#!g2.9\n#pragma taas --gpus 8", 1, 3, 4, "unknown machine configuration 'g2.9'",
              "did you mean g2.8? known configurations: g2.8 (8 GPUs, 96 CPUs), c1.4 (no GPUs, 4 CPUs)");
    assert_non_null(strstr(E.hint, "/nonexistent/taas-unit-test/config.json"));
    parse_bad("#!bigbox\n#pragma taas --gpus 8", 1, 3, 6, "unknown machine configuration 'bigbox'",
              "known configurations: g2.8");
    assert_null(strstr(E.hint, "did you mean"));
}

static void test_gpus_not_multiple(void **state) {
    (void)state;
    parse_bad("#!g2.8\n#pragma taas --gpus 12\nfit(net)", 2, 21, 2,
              "--gpus 12 with g2.8 (8 GPUs per machine): use a multiple of 8 or at most 8",
              "--gpus 8 (1 machine) or --gpus 16 (2 machines)");
    parse_bad("#pragma taas --gpus=20 --cpus 2\n#!g2.8", 1, 21, 2, "--gpus 20 with g2.8",
              "--gpus 16 (2 machines) or --gpus 24 (3 machines)");
}

static void test_config_without_gpus(void **state) {
    (void)state;
    parse_bad("#!c1.4\n#pragma taas --gpus 1\nfit(net)", 1, 3, 4,
              "#!c1.4 is a machine without GPUs (4 CPUs): it cannot run the training ranks",
              "name a configuration with GPUs (#!g2.8)");
}

static void test_directive_after_code(void **state) {
    (void)state;
    parse_bad("x = 1\n#pragma taas --gpus 8\nfit(net)", 2, 1, 12,
              "a #pragma taas line must come before any code in the cell", "above line 1");
    parse_bad("#pragma taas --gpus 8\n\nfit(net)\n  #pragma taas --gpus 2", 4, 3, 12,
              "a #pragma taas line must come before any code", "above line 3 (the first statement)");
    parse_bad("x = 1\n#!g2.8\n", 2, 1, 6, "#!g2.8 must come before any code in the cell", "above line 1");
    /* a comment line inside brackets is still after code */
    parse_bad("net = Sequential(\n    # layers\n    #pragma taas --gpus 2\n    Linear(1, 2))", 3, 5, 12,
              "must come before any code", "above line 1");
    /* a directive after code wins over the header's own problems: it is the real mistake */
    parse_bad("#!g2.8\nfit(net)\n#pragma taas --gpus 8", 3, 1, 12, "must come before any code", "line 2");
    parse_bad("x = 1\n#pragma omp parallel", 2, 9, 3, "unknown pragma 'omp'", "not supported");
}

/* ---- rendering ---- */

static void test_traceback_caret(void **state) {
    (void)state;
    const char *cell = "#!g2.8\n#pragma taas --gpus 12\nfit(net)";
    assert_int_equal(taas_pragma_parse(cell, &P, &E), -1);
    taas_error_attach_source(&E, cell);
    char **tb = taas_error_traceback(&E);
    assert_non_null(tb);
    assert_string_equal(tb[0], "Cell line 2, column 21");
    assert_string_equal(tb[1], "    #pragma taas --gpus 12");
    assert_string_equal(tb[2], "                        ^^");
    assert_non_null(strstr(tb[3], "TaasPragmaError: --gpus 12 with g2.8"));
    assert_non_null(strstr(tb[4], "hint: a run fills whole machines"));
    taas_error_traceback_free(tb);
}

static void test_odd_bytes_in_messages(void **state) {
    (void)state;
    /* invalid UTF-8 and very long words reach the message valid and clipped */
    parse_bad("#pragma taas --gpus 8 \xFF\xFEx", 1, 23, 3, "unexpected '\xEF\xBF\xBD\xEF\xBF\xBDx'", "");
    char cell[400];
    strcpy(cell, "#pragma taas --gpus ");
    for (int i = 0; i < 300; i++) strcat(cell, "9");
    parse_bad(cell, 1, 21, 300, "is out of range", "1 to 4096");
    assert_non_null(strstr(E.message, "\xE2\x80\xA6"));
    assert_true(strlen(E.message) < 120);
    /* columns count code points */
    parse_bad("# \xC3\xA9t\xC3\xA9\n#pragma taas --gpus 8 \xC3\xA9", 2, 23, 1, "unexpected '\xC3\xA9'", "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_directives),
        cmocka_unit_test(test_gpus_only_defaults),
        cmocka_unit_test(test_all_flags_both_forms),
        cmocka_unit_test(test_with_config),
        cmocka_unit_test(test_header_blank_and_comment_lines),
        cmocka_unit_test(test_windows_line_endings),
        cmocka_unit_test(test_statement_ends_header),
        cmocka_unit_test(test_unknown_flag),
        cmocka_unit_test(test_missing_value),
        cmocka_unit_test(test_not_an_integer),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_duplicate_flag),
        cmocka_unit_test(test_missing_gpus),
        cmocka_unit_test(test_stray_word),
        cmocka_unit_test(test_other_pragma),
        cmocka_unit_test(test_duplicate_pragma_line),
        cmocka_unit_test(test_duplicate_config),
        cmocka_unit_test(test_config_without_pragma),
        cmocka_unit_test(test_config_line_errors),
        cmocka_unit_test(test_unknown_config),
        cmocka_unit_test(test_gpus_not_multiple),
        cmocka_unit_test(test_config_without_gpus),
        cmocka_unit_test(test_directive_after_code),
        cmocka_unit_test(test_detach_is_a_switch),
        cmocka_unit_test(test_cpus_auto),
        cmocka_unit_test(test_cpus_auto_errors),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_budget_errors),
        cmocka_unit_test(test_traceback_caret),
        cmocka_unit_test(test_odd_bytes_in_messages),
    };
    return cmocka_run_group_tests(tests, no_user_file, NULL);
}
