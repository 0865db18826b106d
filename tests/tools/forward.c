/* taas-test-forward: the training core's forward pass on raw float32 input, for tests that
 * compare it with PyTorch (tests/protocol/test_torch_roundtrip.py). Not installed.
 *
 *   taas-test-forward MODEL.json WEIGHTS.safetensors INPUT.f32 N C H W OUTPUT.f32
 *
 * MODEL.json is a Sequential spec; the weights are read through the model's state_dict
 * table; the output of the eval-mode forward (N x features) is written as raw float32. */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"
#include "safetensors.h"

static int fail(const char *what, const taas_error *e) {
    fprintf(stderr, "taas-test-forward: %s: %s\n", what, e ? e->message : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: taas-test-forward MODEL.json WEIGHTS.safetensors INPUT.f32 N C H W OUTPUT.f32\n");
        return 2;
    }
    int n = atoi(argv[4]), c = atoi(argv[5]), h = atoi(argv[6]), w = atoi(argv[7]);
    taas_error e;
    taas_error_clear(&e);
    json_error_t je;
    json_t *spec = json_load_file(argv[1], 0, &je);
    if (!spec) {
        fprintf(stderr, "taas-test-forward: %s: %s\n", argv[1], je.text);
        return 1;
    }
    taas_model *m = taas_model_new(spec, c, h, w, 0, &e);
    json_decref(spec);
    if (!m) return fail("model", &e);
    taas_st_tensor *t = taas_param_table_tensors(m->table, m->ntable, m->params, m->stats, m->counters);
    int bad = !t || taas_safetensors_read(argv[2], t, m->ntable, &e);
    free(t);
    if (bad) {
        taas_model_free(m);
        return fail("weights", &e);
    }
    size_t in = (size_t)n * c * (h ? h : 1) * (w ? w : 1);
    float *x = malloc(in * sizeof *x);
    FILE *f = fopen(argv[3], "rb");
    int rc = 0;
    if (!x || !f || fread(x, sizeof *x, in, f) != in) {
        rc = fail("input", NULL);
        if (f) fclose(f);
        goto done;
    }
    fclose(f);
    const float *y;
    if (taas_model_forward(m, x, n, 0, 0, &y, &e)) {
        rc = fail("forward", &e);
        goto done;
    }
    size_t out = (size_t)n * taas_model_out_numel(m);
    f = fopen(argv[8], "wb");
    int wrote = f && fwrite(y, sizeof *y, out, f) == out;
    if ((f && fclose(f)) || !wrote) rc = fail("output", NULL);
done:
    free(x);
    taas_model_free(m);
    return rc;
}
