/* The error names a user can see, each once, with what it means. Code names an error by
 * its constant (TAAS_ERR_VALUE), never by a string of its own; docs/errors.md is what
 * `taas-kernel --errors` prints from this list (a test keeps them equal). */
#ifndef TAAS_ERRNAMES_H
#define TAAS_ERRNAMES_H

#include <stdio.h>

#define TAAS_ERROR_NAMES(X)                                                                                      \
    X(TAAS_ERR_SYNTAX, "TaasSyntaxError", "the cell is not taas code: a typo, an unclosed bracket, a statement "   \
                                        "taas does not have (import, def, class)")                              \
    X(TAAS_ERR_NAME, "TaasNameError", "a name that is not defined, or a builtin misspelt")                       \
    X(TAAS_ERR_TYPE, "TaasTypeError", "a value of the wrong type: an argument, an operand, a missing or "          \
                                    "unknown argument")                                                          \
    X(TAAS_ERR_VALUE, "TaasValueError", "a value outside what it may be: a range, a shape that does not fit the "  \
                                      "model, weights of another model, a non-finite number")                   \
    X(TAAS_ERR_PRAGMA, "TaasPragmaError", "a #pragma taas or #! line that is wrong")                               \
    X(TAAS_ERR_CONFIG, "TaasConfigError", "the configuration file (~/.config/taas/config.json) is wrong")          \
    X(TAAS_ERR_DATA, "TaasDataError", "a data or weights file that is malformed, truncated, or not what it claims " \
                                    "to be (a gzip bomb included)")                                              \
    X(TAAS_ERR_IO, "TaasIOError", "a file, folder or URL that cannot be read or written: missing, not allowed, "   \
                                "not a regular file, the network")                                               \
    X(TAAS_ERR_MEMORY, "TaasMemoryError", "more memory than there is: a model, the session's values, a file, an "  \
                                        "allocation that failed")                                                \
    X(TAAS_ERR_TIMEOUT, "TaasTimeoutError", "something did not answer in time: a worker reading data, a download") \
    X(TAAS_ERR_WORKER, "TaasWorkerError", "a taas-worker process is missing, failed, or died")                     \
    X(TAAS_ERR_OFFLOAD, "TaasOffloadError", "a #pragma taas job cannot be planned or started: machines, GPUs, the " \
                                          "launcher, the cluster")                                               \
    X(TAAS_ERR_COLLECTIVE, "TaasCollectiveError", "a rank's sum with the other ranks failed (another rank died, "  \
                                                "the network)")                                                  \
    X(TAAS_ERR_DEVICE, "TaasDeviceError", "a GPU failed: the driver, CUDA, NCCL, its memory")                      \
    X(TAAS_ERR_JOB, "TaasJobError", "a detached job that cannot be reached, was cancelled, or lost its "            \
                                  "coordinator; a job its --budget ended before it trained a step")              \
    X(TAAS_ERR_SECURITY, "TaasSecurityError", "the keys or the encryption of a job's planes, or the message "      \
                                            "signature key")                                                     \
    X(TAAS_ERR_PROTOCOL, "TaasProtocolError", "a Jupyter message the kernel cannot use")                           \
    X(TAAS_ERR_CONNECTION, "TaasConnectionError", "the kernel's connection file or its sockets")                   \
    X(TAAS_ERR_INSTALL, "TaasInstallError", "`taas-kernel install` could not write the kernelspec")                \
    X(TAAS_ERR_USAGE, "TaasUsageError", "a command line of taas-kernel or taas-worker that is wrong")              \
    X(TAAS_ERR_INTERNAL, "TaasInternalError", "a bug in taas: please report it")                                   \
    X(TAAS_ERR_INTERRUPT, "KeyboardInterrupt", "the stop button (or an interrupt_request) ended the cell")

#define TAAS_ERRNAME_DECLARE(id, name, meaning) extern const char id[];
TAAS_ERROR_NAMES(TAAS_ERRNAME_DECLARE)
#undef TAAS_ERRNAME_DECLARE

/* 1 when name is one of these (a name read from a file may be anything). */
int taas_error_name_known(const char *name);

/* docs/errors.md: every name and what it means, as a Markdown table. */
void taas_error_names_markdown(FILE *out);

#endif
