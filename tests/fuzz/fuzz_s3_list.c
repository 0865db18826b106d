/* The S3 ListObjectsV2 answer parser (dataloader/s3_list.c), as the listing of an
 * ImageFolder's s3:// root reads each page the store sends. What it accepts must hold what
 * the lister relies on: keys non-empty, NUL-free UTF-8; the token and the error's code and
 * message UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "s3_list.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    s3_list_page pg;
    taas_error err;
    taas_error_clear(&err);
    int rc = s3_list_parse((const char *)data, size, &pg, &err);
    fz_say("parse: %s", rc ? err.message : "ok");
    if (rc == 0) {
        for (size_t i = 0; i < pg.keys.n; i++) {
            const char *k = pg.keys.v[i];
            if (!k || !k[0] || !taas_utf8_valid(k, strlen(k))) abort();
        }
        const char *texts[] = {pg.next_token, pg.code, pg.message};
        for (size_t i = 0; i < 3; i++)
            if (texts[i] && !taas_utf8_valid(texts[i], strlen(texts[i]))) abort();
        if (pg.is_error && pg.keys.n) abort();
    } else if (!err.message[0] || !taas_utf8_valid(err.message, strlen(err.message))) {
        abort();
    }
    s3_list_page_free(&pg);
    return 0;
}
