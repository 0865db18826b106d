/* Cursor positions: Jupyter (protocol 5.2 and later) counts them in Unicode code points,
 * the interpreter in bytes of UTF-8. */
#ifndef TAAS_CURSOR_H
#define TAAS_CURSOR_H

#include <jansson.h>
#include <stddef.h>

/* Byte offset in code of a request's cursor_pos (a JSON number, in code points).
 * Missing or not a number: the end of code, as a front end that omits it means.
 * Negative: 0. Past the end: the end. */
size_t taas_cursor_to_byte(const char *code, const json_t *cursor_pos);

/* Code points in code[0..byte) (byte clamped to the end): a reply's cursor_start and
 * cursor_end. */
size_t taas_cursor_from_byte(const char *code, size_t byte);

#endif
