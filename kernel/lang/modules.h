/* A model as a tree of modules, as PyTorch sees one: its children (named_children), an
 * attribute or an item of it (net.fc, net[-1]), a part replaced (net.fc = Linear(512, 10)),
 * requires_grad_ and the parameter counts. Private to kernel/lang.
 *
 * Models are changed in place, as PyTorch's are: every variable that holds the model (or
 * the part) sees the change. A change that would make a model hold itself is refused. */
#ifndef TAAS_MODULES_H
#define TAAS_MODULES_H

#include <stdint.h>

#include "buf.h"
#include "rows.h"

/* The words every "a model" message uses. */
#define TAAS_MODEL_WORDS "a model (Sequential, ResNet, BasicBlock, Bottleneck or a layer)"

/* 1 when v is a module (an object of the Layers family: a layer, a Sequential, a block, a
 * ResNet). */
int taas_value_is_model(const taas_value *v);

/* v's children (none for a leaf or a non-module); free with taas_children_free. 0, or -1
 * when out of memory. */
int taas_module_children(const taas_value *v, taas_children *out);
void taas_children_free(taas_children *c);

/* The repr of a module that holds modules, as torch's Module.__repr__: "Name(", then each
 * child "(name): repr" indented by two spaces, then ")". A row's repr hook. */
void taas_module_repr(const taas_value *v, taas_buf *out);

/* Parameters of v and how many of them train (a module's requires_grad_, the nearest
 * enclosing-or-own flag). 1 with both set, 0 when a size is not known yet (a Lazy layer). */
int taas_module_count(const taas_value *v, int64_t *total, int64_t *trainable);

/* obj.name: a child (net.fc), else an argument (fc.in_features). 0 with a new reference
 * (*derived, when not NULL: 1 for a block's child made from its arguments, a copy), or -1
 * with a TaasTypeError naming the attribute and listing those there are (no position: the
 * caller places it). */
int taas_value_attr(const taas_value *obj, const char *name, taas_value **out, int *derived, taas_error *err);
/* Calls f with each name obj.<name> reads, in order: children, arguments, requires_grad_
 * (a module's method). 0, or -1 when out of memory. */
int taas_value_attr_each(const taas_value *obj, void (*f)(const char *name, void *ctx), void *ctx);

/* obj[index] for a Sequential, a tuple or a list; a negative index counts from the end.
 * 0 with a new reference, or -1 (TaasTypeError, TaasValueError out of range). *key gets
 * the item's state_dict name ("3") when key is not NULL. */
int taas_value_item(const taas_value *obj, const taas_value *index, taas_value **out, char key[24],
                    taas_error *err);

/* obj.name = v, obj[index] = v: replaces a child of a model (v a module, or None for a
 * ResNet's or a block's downsample: torch's None child). A block's derived children are
 * read-only; a change that makes obj hold itself is refused. Remeasures obj (its holders are
 * the caller's). key gets the child's state_dict name ("fc", "3"). 0, or -1 with err. */
int taas_module_set_attr(taas_value *obj, const char *name, taas_value *v, char key[24], taas_error *err);
int taas_module_set_item(taas_value *obj, const taas_value *index, taas_value *v, char key[24], taas_error *err);

/* module.requires_grad_(flag): sets the flag on the module and on every module it stores
 * (a later child is then as its own flag says, as in PyTorch). A block's derived children
 * take the block's. */
void taas_module_requires_grad(taas_value *obj, int flag);

#endif
