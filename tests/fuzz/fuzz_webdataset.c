/* A WebDataset shard (dataloader/format_webdataset.c): the tar index, grouping members into
 * samples, labels (.cls integers and class names), and each sample's image member decoded
 * (PNG, JPEG or .npy) from a range read of the shard, as a loader reads it. */
#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *shard = fz_write("shard-000000.tar", data, size);
    json_t *spec = json_pack("{s:s, s:s, s:s, s:s}", "type", "WebDataset", "urls", shard, "image_key",
                             "png;jpg;npy", "label_key", "cls;txt");
    if (!spec) abort();
    fz_dataset_run(spec);
    return 0;
}
