/* One page of an S3 ListObjectsV2 answer (or an S3 <Error>), read by a small strict parser
 * for exactly the elements the listing needs: ListBucketResult's Contents/Key and
 * Contents/Size, IsTruncated and NextContinuationToken; Error's Code and Message. Others
 * are skipped; text is entity-decoded (&amp; &lt; &gt; &quot; &apos; and &#N; / &#xH;). */
#ifndef TAAS_S3_LIST_H
#define TAAS_S3_LIST_H

#include <stddef.h>

#include "error.h"
#include "fetch.h"

typedef struct s3_list_page {
    taas_strvec keys;     /* Contents/Key, in the answer's order */
    int is_error;         /* the root was <Error>: code and message are set */
    int truncated;        /* IsTruncated was true */
    char *next_token;     /* NextContinuationToken, or NULL */
    char *code, *message; /* Error/Code, Error/Message, or NULL */
} s3_list_page;

/* 0 with page filled (free it with s3_list_page_free, also after an error), or -1 with a
 * TaasIOError saying what is wrong and at which byte. */
int s3_list_parse(const char *xml, size_t n, s3_list_page *page, taas_error *err);
void s3_list_page_free(s3_list_page *page);

#endif
