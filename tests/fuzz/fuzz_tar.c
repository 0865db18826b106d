/* The tar reader (dataloader/format_tar.c) on an archive in memory, as CIFAR-10's archive
 * and WebDataset shards are read: pax, ustar, GNU and v7 headers, long names, base-256
 * sizes. Every member it returns must lie inside the archive: its bytes are read. */
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    taas_tar_iter it;
    taas_tar_iter_init(&it, data, size, "fuzz.tar");
    taas_tar_member m;
    taas_error err;
    taas_error_clear(&err);
    int rc = 0, k = 0;
    while (k++ < 100000 && (rc = taas_tar_next(&it, &m, &err)) == 1) {
        if (!m.name || m.offset > size || m.size > size - m.offset) abort();
        fz_touch(m.name, strlen(m.name));
        fz_touch(data + m.offset, (size_t)m.size);
    }
    fz_say("tar: %d members, then %s", k - 1, rc < 0 ? err.message : "the end");
    taas_tar_iter_free(&it);
    return 0;
}
