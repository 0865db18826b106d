/* `taas-kernel install`: writes the kernelspec (kernel.json pointing at this binary, and
 * the logos) where Jupyter finds it, as `ipykernel install` does. */
#ifndef TAAS_INSTALL_H
#define TAAS_INSTALL_H

#include <stddef.h>

#include "error.h"
#include "self_exe.h"

typedef struct taas_install_opts {
    int user;                  /* --user: the user's Jupyter data directory */
    const char *prefix;        /* --prefix P: P/share/jupyter/kernels/NAME */
    const char *name;          /* --name N: the kernel's name (directory); "taas" */
    const char *display_name;  /* --display-name D: as shown in menus; kernel.json's */
} taas_install_opts;

/* Parses the arguments after "install" (argv[0] is "install"). -1 with a TaasUsageError
 * for an unknown option, a missing value, --user together with --prefix, or a name that
 * Jupyter would not accept ([A-Za-z0-9._-]+). */
int taas_install_parse(int argc, char **argv, taas_install_opts *o, taas_error *err);

/* The directory o installs into: --user: $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter,
 * else ~/.local/share/jupyter, then kernels/NAME; --prefix P: P/share/jupyter/kernels/NAME;
 * neither: /usr/local/share/jupyter/kernels/NAME. */
int taas_install_dest(const taas_install_opts *o, char *out, size_t n, taas_error *err);

/* Installs from the first of spec_dirs (NULL-terminated) that holds kernel.json and both
 * logos, with argv[0] set to exe (an absolute path). The directory written goes to
 * where[0..n). -1 with a TaasInstallError naming the file or directory that failed. */
int taas_install(const taas_install_opts *o, const char *const *spec_dirs, const char *exe,
                 char *where, size_t n, taas_error *err);

#endif
