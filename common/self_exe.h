/* The running binary's own path: the kernel writes it into its kernelspec and starts the
 * coordinators of detached jobs with it. */
#ifndef TAAS_SELF_EXE_H
#define TAAS_SELF_EXE_H

#include <stddef.h>

#include "error.h"

/* The absolute path of the running binary (/proc/self/exe). 0, or -1 with err. */
int taas_self_exe(char *out, size_t n, taas_error *err);

#endif
