/* workers/train/loss.c against real PyTorch 1.13 (tests/data/optim/loss.json, made by
 * tests/gen_optim_ref.py): loss values within 1e-5 and input gradients within 1e-4
 * relative, with and without ignore_index, and the errors a user can reach (bad targets,
 * bad label_smoothing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_testutil.h"
#include "loss.h"
#include "fixture_testutil.h"

TU_FIXTURE_GROUP(REF, "optim/loss.json")

static float *floats(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    float *out = malloc(*n * sizeof *out + 1);
    for (size_t i = 0; i < *n; i++) out[i] = (float)json_number_value(json_array_get(arr, i));
    return out;
}

static int64_t *targets(json_t *arr) {
    size_t n = json_array_size(arr);
    int64_t *out = malloc(n * sizeof *out + 1);
    for (size_t i = 0; i < n; i++) out[i] = json_integer_value(json_array_get(arr, i));
    return out;
}

static void close_to(double got, double want, double rel, const char *what, size_t i) {
    double tol = rel * fabs(want) + 1e-7;
    if (!(fabs(got - want) <= tol)) {
        fprintf(stderr, "%s[%zu]: got %.9g, torch %.9g\n", what, i, got, want);
        fail();
    }
}

/* The case of that kind, label_smoothing (CrossEntropyLoss's) and ignore_index (absent in
 * the file: torch's -100). */
static json_t *find_case(const char *kind, double ls, json_int_t ignore_index) {
    size_t i;
    json_t *c;
    json_array_foreach(REF, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "kind")), kind) != 0) continue;
        json_t *s = json_object_get(c, "label_smoothing"), *ii = json_object_get(c, "ignore_index");
        if ((ii ? json_integer_value(ii) : -100) != ignore_index) continue;
        if (!s || fabs(json_number_value(s) - ls) < 1e-12) return c;
    }
    return NULL;
}

/* An NLLLoss or CrossEntropyLoss case: the loss (null in the file: torch's nan) and the
 * gradient of a plain backward. */
static void check_case(json_t *c) {
    int ce = !strcmp(json_string_value(json_object_get(c, "kind")), "cross_entropy");
    int n = (int)json_integer_value(json_object_get(c, "n")), k = (int)json_integer_value(json_object_get(c, "c"));
    json_t *ii = json_object_get(c, "ignore_index"), *want_loss = json_object_get(c, "loss");
    int64_t ignore = ii ? json_integer_value(ii) : -100;
    float ls = (float)json_number_value(json_object_get(c, "label_smoothing"));
    size_t cnt, gcnt;
    float *x = floats(json_object_get(c, "input"), &cnt), *want = floats(json_object_get(c, "grad"), &gcnt);
    int64_t *t = targets(json_object_get(c, "target"));
    float loss, *probs = malloc(cnt * sizeof *probs), *grad = malloc(cnt * sizeof *grad);
    assert_int_equal(cnt, (size_t)n * k);
    assert_int_equal(gcnt, cnt);
    taas_error err;
    taas_error_clear(&err);
    if (ce) {
        assert_int_equal(taas_cross_entropy_forward(&loss, probs, x, t, n, k, ls, ignore, &err), 0);
        taas_cross_entropy_backward(grad, probs, t, n, k, ls, ignore, 1.0f);
    } else {
        assert_int_equal(taas_nll_loss_forward(&loss, x, t, n, k, ignore, &err), 0);
        taas_nll_loss_backward(grad, t, n, k, ignore, 1.0f);
    }
    if (json_is_null(want_loss)) {
        if (!isnan(loss)) fail_msg("%s with every target ignored: loss %g, torch nan", ce ? "ce" : "nll", (double)loss);
    } else {
        close_to(loss, json_number_value(want_loss), 1e-5, ce ? "ce loss" : "nll loss", 0);
    }
    for (size_t i = 0; i < cnt; i++) close_to(grad[i], want[i], 1e-4, ce ? "ce grad" : "nll grad", i);
    free(x), free(want), free(t), free(probs), free(grad);
}

static void test_nll_matches_torch(void **state) {
    (void)state;
    json_t *c = find_case("nll", 0, -100);
    assert_non_null(c);
    check_case(c);
}

static void test_cross_entropy_matches_torch(void **state) {
    (void)state;
    const double smoothing[] = {0.0, 0.1, 0.35};
    for (int s = 0; s < 3; s++) {
        json_t *c = find_case("cross_entropy", smoothing[s], -100);
        assert_non_null(c);
        check_case(c);
    }
}

/* Samples whose target is ignore_index count in neither the mean nor the smoothing term and
 * get no gradient; an ignored target may be out of range; with all of them ignored the loss
 * is nan and the gradient zero. */
static void test_ignore_index_matches_torch(void **state) {
    (void)state;
    const struct { const char *kind; double ls; json_int_t ignore; } want[] = {
        {"nll", 0, 1}, {"cross_entropy", 0.0, 1}, {"cross_entropy", 0.1, 1}, {"nll", 0, -1},
        {"cross_entropy", 0.35, -1}, {"nll", 0, 2}, {"cross_entropy", 0.1, 2},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        json_t *c = find_case(want[i].kind, want[i].ls, want[i].ignore);
        if (!c) fail_msg("no %s case with ignore_index=%lld in loss.json", want[i].kind, (long long)want[i].ignore);
        check_case(c);
    }
}

/* ignore_index exempts only its own value from the range check. */
static void test_ignore_index_still_checks_other_targets(void **state) {
    (void)state;
    const float x[6] = {0};
    float probs[6], loss;
    const int64_t t[2] = {-1, -2};
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_nll_loss_forward(&loss, x, t, 2, 3, -1, &err), -1);
    assert_non_null(strstr(err.message, "target -2 of sample 1"));
    taas_error_clear(&err);
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, x, t, 2, 3, 0.0f, -2, &err), -1);
    assert_non_null(strstr(err.message, "target -1 of sample 0"));
}

static void test_mse_matches_torch(void **state) {
    (void)state;
    json_t *c = find_case("mse", 0, -100);
    assert_non_null(c);
    size_t n, m, g;
    float *x = floats(json_object_get(c, "input"), &n), *y = floats(json_object_get(c, "target_values"), &m);
    float *want = floats(json_object_get(c, "grad"), &g), *grad = malloc(n * sizeof *grad);
    assert_int_equal(n, m);
    assert_int_equal(n, g);
    close_to(taas_mse_loss_forward(x, y, n), json_number_value(json_object_get(c, "loss")), 1e-5, "mse loss", 0);
    taas_mse_loss_backward(grad, x, y, n, 1.0f);
    for (size_t i = 0; i < n; i++) close_to(grad[i], want[i], 1e-4, "mse grad", i);
    free(x), free(y), free(want), free(grad);
}

/* The backward scales by dloss, as autograd does for loss * k. */
static void test_backward_scales_by_dloss(void **state) {
    (void)state;
    const float logits[6] = {0.5f, -1.0f, 2.0f, 0.0f, 0.3f, 0.1f};
    const int64_t t[2] = {2, 0};
    float probs[6], g1[6], g3[6], loss;
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, logits, t, 2, 3, 0.0f, -100, &err), 0);
    taas_cross_entropy_backward(g1, probs, t, 2, 3, 0.0f, -100, 1.0f);
    taas_cross_entropy_backward(g3, probs, t, 2, 3, 0.0f, -100, 3.0f);
    double rowsum = 0;
    for (int i = 0; i < 6; i++) {
        assert_true(fabsf(g3[i] - 3.0f * g1[i]) < 1e-6f);
        rowsum += g1[i];
    }
    assert_true(fabs(rowsum) < 1e-6);  /* softmax gradient rows sum to zero */
}

static void test_target_out_of_range_names_sample_and_classes(void **state) {
    (void)state;
    const float x[6] = {0};
    float probs[6], loss;
    const int64_t high[2] = {1, 3}, neg[2] = {-1, 0};
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_nll_loss_forward(&loss, x, high, 2, 3, -100, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "NLLLoss"));
    assert_non_null(strstr(err.message, "target 3 of sample 1"));
    assert_non_null(strstr(err.message, "3 classes"));
    assert_non_null(strstr(err.hint, "[0, 3)"));
    taas_error_clear(&err);
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, x, neg, 2, 3, 0.0f, -100, &err), -1);
    assert_non_null(strstr(err.message, "CrossEntropyLoss"));
    assert_non_null(strstr(err.message, "target -1 of sample 0"));
    assert_non_null(strstr(err.hint, "last layer"));
}

static void test_bad_label_smoothing_and_empty_batch(void **state) {
    (void)state;
    const float x[3] = {0};
    float probs[3], loss;
    const int64_t t[1] = {0};
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, x, t, 1, 3, 1.5f, -100, &err), -1);
    assert_non_null(strstr(err.message, "label_smoothing=1.5 is outside [0, 1]"));
    assert_true(err.hint[0] != '\0');
    taas_error_clear(&err);
    assert_int_equal(taas_cross_entropy_forward(&loss, probs, x, t, 1, 3, NAN, -100, &err), -1);
    taas_error_clear(&err);
    assert_int_equal(taas_nll_loss_forward(&loss, x, t, 0, 3, -100, &err), -1);
    assert_non_null(strstr(err.message, "0 samples"));
    assert_non_null(strstr(err.hint, "(N, C)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nll_matches_torch),
        cmocka_unit_test(test_cross_entropy_matches_torch),
        cmocka_unit_test(test_ignore_index_matches_torch),
        cmocka_unit_test(test_ignore_index_still_checks_other_targets),
        cmocka_unit_test(test_mse_matches_torch),
        cmocka_unit_test(test_backward_scales_by_dloss),
        cmocka_unit_test(test_target_out_of_range_names_sample_and_classes),
        cmocka_unit_test(test_bad_label_smoothing_and_empty_batch),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
