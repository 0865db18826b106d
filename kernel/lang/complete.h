/* Completion and inspection for the front end (complete_request, inspect_request). Both
 * read the cell up to the cursor and tolerate cells that do not parse: the user is
 * typing them. Offsets are bytes of UTF-8. */
#ifndef TAAS_COMPLETE_H
#define TAAS_COMPLETE_H

#include <jansson.h>
#include <stddef.h>

#include "scope.h"

/* Matches for the (dotted) name before the cursor: keyword arguments of the innermost
 * open builtin call as "name=", session variables, True/False/None, then builtins and
 * module prefixes as typed ("Co" -> "Conv2d", "nn.Co" -> "nn.Conv2d", "tor" -> "torch").
 * *start..*end is the text the matches replace. A new JSON array of strings (empty
 * inside a string or a comment). */
json_t *taas_complete(const taas_scope *s, const char *code, size_t cursor, size_t *start, size_t *end);

/* A mime bundle about the name at or just before the cursor, else about the callee of the
 * innermost open call: a builtin's help text (detail 1 adds the parameter table), or a
 * variable's type and repr. NULL when there is nothing to say. */
json_t *taas_inspect(const taas_scope *s, const char *code, size_t cursor, int detail);

#endif
