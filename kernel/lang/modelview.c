/* A model before a job: its plan for a loader's samples, and a weights file against it. */
#include "modelview.h"

#include <stdlib.h>

#include "dataview.h"
#include "safetensors.h"

static const taas_srcpos NOPOS = {0, 0};

int taas_model_plan_for(taas_interp *in, const taas_value *model, const taas_value *loader, const char *what,
                        taas_model_plan *plan, taas_error *err) {
    const taas_value *ds = taas_data_dataset_of(loader);
    const json_t *info;
    if (!ds) {
        taas_error_set(err, "TaasTypeError", NOPOS, "%s is a %s, not a DataLoader", what, taas_value_type_name(loader));
        taas_error_hint(err, "give a DataLoader(dataset, batch_size=...)");
        return -1;
    }
    if (taas_data_probe(in, ds, &info, err)) return -1;
    const json_t *shape = json_object_get(info, "shape");
    if (!json_is_array(shape) || json_array_size(shape) != 3) {
        taas_error_set(err, "TaasValueError", NOPOS, "the samples of %s (%s) have no single shape", what,
                       ds->u.obj.def->name);
        taas_error_hint(err, "add Resize and CenterCrop to its transform so every sample has one shape");
        return -1;
    }
    int c = (int)json_integer_value(json_array_get(shape, 0)), h = (int)json_integer_value(json_array_get(shape, 1)),
        w = (int)json_integer_value(json_array_get(shape, 2));
    /* the worker's rule: a (C, 1, 1) sample is a feature vector */
    if (h == 1 && w == 1) h = w = 0;
    json_t *spec = taas_value_spec(model);
    int rc = taas_model_plan_build(plan, spec, c, h, w, err);
    json_decref(spec);
    return rc;
}

int taas_model_check_weights(const taas_value *model, const char *path, taas_error *err) {
    taas_model_plan plan;
    json_t *spec = taas_value_spec(model);
    int rc = taas_model_plan_build(&plan, spec, 0, 0, 0, err);
    json_decref(spec);
    if (rc) return -1;
    taas_st_tensor *t = taas_param_table_tensors(plan.table, plan.ntable, NULL, NULL, NULL);
    if (!t) {
        taas_model_plan_free(&plan);
        return taas_error_set(err, "MemoryError", NOPOS, "out of memory checking %s", path);
    }
    rc = taas_safetensors_read(path, t, plan.ntable, err);  /* data NULL: the header is checked, nothing read */
    free(t);
    taas_model_plan_free(&plan);
    return rc;
}
