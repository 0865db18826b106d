/* Kernel diagnostics: one line per event on stderr, prefixed "taas-kernel: ", which
 * Jupyter front ends show in the server log. Never used for anything a user of a cell sees. */
#ifndef TAAS_LOG_H
#define TAAS_LOG_H

void taas_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
