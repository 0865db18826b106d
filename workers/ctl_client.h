/* A worker's end of the control plane (jobctl.h): a thread that owns the DEALER to the
 * kernel, says hello, sends and answers heartbeats, passes on what the worker's other
 * threads queue (progress, logs, done with the weights), and raises the stop flag when the
 * kernel says cancel or has been silent for TAAS_CTL_SILENCE_S (the kernel died: a worker
 * never outlives its job for long). */
#ifndef TAAS_CTL_CLIENT_H
#define TAAS_CTL_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"
#include "zsock.h"

typedef struct taas_ctl_client taas_ctl_client;

/* Connects to endpoint as identity (a CURVE client with the job's keys, or plain when keys
 * is NULL), sends hello (the body, stolen: "t" is set to "hello") and starts the thread.
 * NULL with err. */
taas_ctl_client *taas_ctl_client_new(const char *endpoint, const taas_zkeys *keys, const char *identity,
                                     json_t *hello, taas_error *err);
/* Sends what is queued (for at most a few seconds when the kernel is there), stops the
 * thread and closes the socket. */
void taas_ctl_client_free(taas_ctl_client *c);

/* From any thread: queues body (stolen) and a copy of blob (n > 0) for the kernel. */
int taas_ctl_client_send(taas_ctl_client *c, json_t *body, const void *blob, size_t n, taas_error *err);
/* A log line for the kernel to show (printf-style). */
void taas_ctl_client_log(taas_ctl_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Waits for the kernel's first message of this type ("spec", "start"): its body (a new
 * reference) and, when blob is not NULL, its second frame (malloc'd, *n bytes; NULL when it
 * has none), or NULL when the stop flag rose first or timeout_s passed (err says which). */
json_t *taas_ctl_client_wait(taas_ctl_client *c, const char *type, double timeout_s, void **blob, size_t *n,
                             taas_error *err);

/* The worker's last word: sends "leaving" after everything queued and waits, at most
 * timeout_s and not once the kernel went silent, for its "bye". The kernel has then read
 * all this worker sent (done, an error, ended) before it can see the process end. 0, or -1
 * when no bye came. */
int taas_ctl_client_leave(taas_ctl_client *c, double timeout_s);

/* Non-zero once the kernel said cancel or went silent; the loops of the worker watch it. */
volatile int *taas_ctl_client_stop_flag(taas_ctl_client *c);
/* 1 when the stop came from the kernel's silence rather than a cancel. */
int taas_ctl_client_kernel_gone(const taas_ctl_client *c);

#endif
