/* A cell's outputs that go nowhere: the harnesses that run cells or feed the training
 * display look at what the code does, not at what it shows. Header-only, as fuzz_util.h. */
#ifndef TAAS_FUZZ_IO_H
#define TAAS_FUZZ_IO_H

#include <jansson.h>

#include "interp.h"

static void fz_io_stream(void *ctx, const char *name, const char *text) {
    (void)ctx;
    (void)name;
    (void)text;
}

static void fz_io_display(void *ctx, json_t *data, json_t *metadata, const char *display_id, int update) {
    (void)ctx;
    (void)display_id;
    (void)update;
    json_decref(data);
    json_decref(metadata);
}

static void fz_io_clear(void *ctx, int wait) {
    (void)ctx;
    (void)wait;
}

static void fz_io_page(void *ctx, json_t *data) {
    (void)ctx;
    json_decref(data);
}

static const taas_io IO = {.stream = fz_io_stream, .display = fz_io_display, .clear_output = fz_io_clear, .page = fz_io_page};

#endif
