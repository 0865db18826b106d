/* taas-kernel: the Jupyter kernel process, its kernelspec installer, and the generator of
 * docs/language.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "connection.h"
#include "detached.h"
#include "errnames.h"
#include "install.h"
#include "kernel.h"
#include "log.h"

/* Exit statuses: 0 ok; 1 the kernel failed while running (or could not bind);
 * 2 bad arguments or a connection file that cannot be used. */
enum { EXIT_USAGE = 2 };

static const char USAGE[] =
    "usage: taas-kernel -f CONNECTION_FILE\n"
    "       taas-kernel install [--user | --prefix DIR] [--name NAME] [--display-name TEXT]\n"
    "       taas-kernel --doc\n"
    "       taas-kernel --errors\n"
    "       taas-kernel --run-job DIR\n"
    "       taas-kernel --version\n"
    "       taas-kernel --help\n";

static const char HELP[] =
    "taas-kernel " TAAS_VERSION " - a Jupyter kernel for training neural networks.\n\n"
    "  -f CONNECTION_FILE   run the kernel; Jupyter starts it this way (kernel.json)\n"
    "  install              write the kernelspec where Jupyter finds it:\n"
    "      --user           in your Jupyter data directory (~/.local/share/jupyter)\n"
    "      --prefix DIR     in DIR/share/jupyter (default: /usr/local/share/jupyter)\n"
    "      --name NAME      kernel name (default: taas)\n"
    "      --display-name TEXT  name shown in menus (default: taas)\n"
    "  --doc                print the language reference (docs/language.md) in Markdown\n"
    "  --errors             print the error names and what they mean (docs/errors.md)\n"
    "  --run-job DIR        coordinate the detached job in DIR (a kernel starts it this way)\n"
    "  --version            print the version\n"
    "  --help               print this help\n\n"
    "Diagnostics go to stderr, prefixed \"taas-kernel:\".\n";

static int usage(const char *why) {
    if (why) taas_log("%s", why);
    fputs(USAGE, stderr);
    return EXIT_USAGE;
}

static void report(const taas_error *err) {
    taas_log("%s", err->message);
    if (err->hint[0]) taas_log("hint: %s", err->hint);
}

static int run_install(int argc, char **argv) {
    taas_install_opts o;
    taas_error err;
    taas_error_clear(&err);
    if (taas_install_parse(argc, argv, &o, &err)) {
        report(&err);
        fputs(USAGE, stderr);
        return EXIT_USAGE;
    }
    char exe[4096], where[4096];
    /* the installed copy of the logos first, then the source tree's (a build-tree binary) */
    const char *const specs[] = {TAAS_INSTALLED_KERNELSPEC, TAAS_SOURCE_KERNELSPEC, NULL};
    if (taas_self_exe(exe, sizeof exe, &err) ||
        taas_install(&o, specs, exe, where, sizeof where, &err)) {
        report(&err);
        return 1;
    }
    printf("Installed kernelspec %s in %s\n", o.name, where);
    return 0;
}

static int run_kernel(const char *path) {
    taas_error err;
    taas_error_clear(&err);
    taas_connection *c = taas_connection_load(path, &err);
    if (!c) {
        report(&err);
        return EXIT_USAGE;
    }
    taas_kernel *k = taas_kernel_new(c, &err);
    taas_connection_free(c);
    if (!k) {
        report(&err);
        return 1;
    }
    int rc = taas_kernel_run(k, &err);
    if (rc) report(&err);
    taas_kernel_free(k);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage("no arguments: Jupyter runs the kernel as taas-kernel -f FILE");
    const char *a = argv[1];
    if (strcmp(a, "install") == 0) return run_install(argc - 1, argv + 1);
    if (argc == 2 && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
        fputs(HELP, stdout);
        return 0;
    }
    if (argc == 2 && strcmp(a, "--version") == 0) {
        printf("taas-kernel %s\n", TAAS_VERSION);
        return 0;
    }
    if (argc == 2 && strcmp(a, "--doc") == 0) {
        char *md = taas_builtins_markdown();
        if (!md) {
            taas_log("cannot generate the language reference (out of memory)");
            return 1;
        }
        fputs(md, stdout);
        free(md);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (argc == 2 && strcmp(a, "--errors") == 0) {
        taas_error_names_markdown(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (strcmp(a, "--run-job") == 0) {
        if (argc != 3) return usage("--run-job needs the job's folder");
        return taas_detached_run(argv[2]);
    }
    const char *file = NULL;
    if (strcmp(a, "-f") == 0 || strcmp(a, "--connection-file") == 0) {
        if (argc != 3) return usage(argc < 3 ? "-f needs the path of a connection file"
                                             : "too many arguments after -f FILE");
        file = argv[2];
    } else if (strncmp(a, "-f=", 3) == 0 || strncmp(a, "--f=", 4) == 0 ||
               strncmp(a, "--connection-file=", 18) == 0) {
        if (argc != 2) return usage("too many arguments after -f=FILE");
        file = strchr(a, '=') + 1;
    }
    if (!file || !*file) {
        char why[160];
        snprintf(why, sizeof why, "unknown argument '%.100s'", a);
        return usage(file ? "-f needs the path of a connection file" : why);
    }
    return run_kernel(file);
}
