#include "cursor.h"

#include <string.h>

#include "utf8.h"

size_t taas_cursor_to_byte(const char *code, const json_t *cursor_pos) {
    size_t len = strlen(code);
    if (!json_is_number(cursor_pos)) return len;
    double cp = json_number_value(cursor_pos);
    if (!(cp > 0)) return 0;   /* also NaN */
    if (cp >= (double)len) return len;   /* never more code points than bytes */
    return taas_utf8_offset(code, (size_t)cp);
}

size_t taas_cursor_from_byte(const char *code, size_t byte) {
    size_t len = strlen(code);
    if (byte > len) byte = len;
    /* a byte offset inside a sequence counts the partial sequence as one code point,
     * which is what the front end would see there */
    return taas_utf8_count(code, byte);
}
