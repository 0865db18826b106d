/* MNIST's IDX files (dataloader/format_idx.c), gzipped or not: the images and the labels
 * file of a root folder, opened as MNIST(root=...) opens them, then samples read.
 *
 * Input: the images file, the separator "\n--8<--\n", the labels file. */
#include <string.h>

#include "fuzz_dataset.h"

static const char SEP[] = "\n--8<--\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *cut = memmem(data, size, SEP, sizeof SEP - 1);
    size_t ni = cut ? (size_t)(cut - data) : size;
    const uint8_t *lab = cut ? cut + sizeof SEP - 1 : data + size;
    fz_write("mnist/train-images-idx3-ubyte", data, ni);
    fz_write("mnist/train-labels-idx1-ubyte", lab, (size_t)(data + size - lab));
    json_t *spec = json_pack("{s:s, s:s, s:b}", "type", "MNIST", "root", fz_path("mnist"), "train", 1);
    if (!spec) abort();
    fz_dataset_run(spec);
    return 0;
}
