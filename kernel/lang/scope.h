/* The session's state: variables (kept in definition order, for completion) and the
 * registered data loaders. Lives as long as the interpreter, i.e. the kernel. */
#ifndef TAAS_SCOPE_H
#define TAAS_SCOPE_H

#include <stddef.h>

#include "error.h"
#include "value.h"

typedef struct taas_scope taas_scope;

taas_scope *taas_scope_new(void);
void taas_scope_free(taas_scope *s);

/* The value bound to name (borrowed), NULL when unbound. */
taas_value *taas_scope_get(const taas_scope *s, const char *name);
/* Binds name to v (the scope takes its own reference). A rebound name keeps its place in
 * definition order. -1 only when out of memory. */
int taas_scope_set(taas_scope *s, const char *name, taas_value *v);

/* Variables in definition order. */
size_t taas_scope_count(const taas_scope *s);
const char *taas_scope_name_at(const taas_scope *s, size_t i);
taas_value *taas_scope_value_at(const taas_scope *s, size_t i);
/* The first-defined variable bound to exactly this value, or NULL. */
const char *taas_scope_name_of(const taas_scope *s, const taas_value *v);
/* A malloc'd NULL-terminated array: every variable name, then `more` (may be NULL). The
 * strings are borrowed. NULL when out of memory. */
const char **taas_scope_names(const taas_scope *s, const char *const *more);

/* Registered loaders (see taas_interp_register_loader). */
int taas_scope_register(taas_scope *s, taas_value *loader, taas_error *err);
int taas_scope_unregister(taas_scope *s, taas_value *loader, taas_error *err);
size_t taas_scope_loader_count(const taas_scope *s);
taas_value *taas_scope_loader_at(const taas_scope *s, size_t i);
/* What to call loader i in messages: its variable now, else the variable it had when it
 * was registered, else NULL. */
const char *taas_scope_loader_name(const taas_scope *s, size_t i);

#endif
