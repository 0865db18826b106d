/* Values that reach a shell, and commands shown to be pasted into one. Open MPI hands its
 * ssh agent string (plm_rsh_agent) to a shell, ssh runs a remote command through the remote
 * user's shell and expands a host into its config's ProxyCommand: a value on the way there
 * is refused unless it is plain (docs/cluster.md), never quoted and hoped for. */
#ifndef TAAS_SHELL_H
#define TAAS_SHELL_H

#include <stddef.h>

#include "buf.h"

/* The rule, for hints (it holds '%': pass it as an argument, never in a format). */
#define TAAS_SHELL_PLAIN_RULE "ASCII letters, digits and _ @ % + = : , . / - only, not starting with '-'"

/* 1 for a byte a plain word may hold: ASCII letters, digits and _ @ % + = : , . / -, the
 * characters Python's shlex.quote leaves unquoted. */
int taas_shell_plain_char(char c);

/* NULL when s is a plain word (non-empty, plain bytes only, not starting with '-', which a
 * program reads as an option); else where it breaks the rule: s itself when it is empty or
 * starts with '-', otherwise its first byte that is not plain. */
const char *taas_shell_unplain(const char *s);

/* Appends s as one word of a POSIX shell: as it is when every byte is plain, else in single
 * quotes with each ' as '\'' ("''" for an empty s). */
void taas_shell_quote(taas_buf *b, const char *s);

/* Appends the words argv[0..n) as a command line to paste, each quoted, spaces between. */
void taas_shell_command(taas_buf *b, const char *const *argv, size_t n);

#endif
