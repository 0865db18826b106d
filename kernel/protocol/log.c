#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void taas_log(const char *fmt, ...) {
    /* Formatted into one buffer and written with one call, so that lines from the
     * heartbeat thread never interleave with the loop's. */
    char line[2048];
    int n = snprintf(line, sizeof line, "taas-kernel: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}
