/* llm.c's token shards (dataloader/format_tokens.c): the header parser on the input's bytes,
 * and TokenShards opened on the input as a shard (llm.c's format) and as a bare uint16 file,
 * its first, middle and last windows read as a loader reads them. */
#include <string.h>

#include "formats.h"
#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_error err;
    uint64_t tokens;
    taas_error_clear(&err);
    if (taas_token_shard_header(data, size, size, "input", &tokens, &err) == 0 && 1024 + 2 * tokens > size) abort();
    const char *path = fz_write("shard.bin", data, size);
    for (int raw = 0; raw < 2; raw++) {
        json_t *spec = json_pack("{s:s, s:s, s:i, s:b}", "type", "TokenShards", "urls", path, "block_size", 8, "raw", raw);
        if (!spec) abort();
        fz_dataset_run(spec);
    }
    return 0;
}
