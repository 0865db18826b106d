/* What fit() and evaluate() return, as values of the cell language (TAAS_V_RESULT):
 * a History, one row per epoch (epoch, train_loss, val_loss, val_accuracy, time_s,
 * samples_per_s, as the worker's epoch lines give them), and an Evaluation (loss,
 * accuracy, samples). Both show as tables. */
#ifndef TAAS_RESULT_H
#define TAAS_RESULT_H

#include <jansson.h>

#include "buf.h"
#include "value.h"

/* From the worker's "done" line; NULL when it lacks what the value needs, or when out of
 * memory (taas_json_lost tells). New reference. */
taas_value *taas_result_of_fit(const json_t *done);
taas_value *taas_result_of_evaluate(const json_t *done);
/* jobs(): the detached jobs' states (kernel/job/detached.h), the newest first. */
taas_value *taas_result_of_jobs(const json_t *states);

/* load(): torch's _IncompatibleKeys, data {"missing_keys": [...], "unexpected_keys": [...]}
 * (taken). */
taas_value *taas_result_of_load(json_t *data);

/* repr(): the History's table as aligned text; Evaluation(loss=..., accuracy=..., samples=...). */
void taas_result_repr(const taas_value *v, taas_buf *out);
/* text/plain (the repr) and a text/html table. New reference. */
json_t *taas_result_mimebundle(const taas_value *v);

#endif
