/* CIFAR-10's binary archive (dataloader/format_cifar.c): cifar-10-binary.tar.gz (or the
 * plain tar) unpacked in memory, its batches and batches.meta.txt found, the records
 * checked; opened for the test split and for the training split (five batches), then
 * samples read. */
#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *root = fz_write("cifar-10-binary.tar.gz", data, size);
    for (int train = 0; train < 2; train++) {
        json_t *spec = json_pack("{s:s, s:s, s:b}", "type", "CIFAR10", "root", root, "train", train);
        if (!spec) abort();
        fz_dataset_run(spec);
    }
    return 0;
}
