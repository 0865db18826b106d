/* The worker's control thread. Other threads never touch the DEALER (ZeroMQ sockets are not
 * thread-safe): they queue messages under a mutex and wake the thread through an eventfd,
 * which zmq_poll watches beside the socket. */
#include "ctl_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "errnames.h"
#include "jobctl.h"

typedef struct out_msg {
    struct out_msg *next;
    json_t *body;
    void *blob;
    size_t n;
} out_msg;

/* What the kernel sent besides heartbeats and cancel, kept until a wait takes it. */
typedef struct in_msg {
    struct in_msg *next;
    taas_ctl_msg m;
} in_msg;

struct taas_ctl_client {
    void *zctx, *sock;
    taas_zsec *sec;
    pthread_t thread;
    int started;
    int wake;                 /* eventfd: a message is queued, or quit */
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* start arrived, stop rose, or the queue drained */
    out_msg *head, *tail;
    int quit;                 /* free asked the thread to end */
    in_msg *inbox;            /* in order of arrival */
    volatile int stop;
    int gone;                 /* the kernel went silent */
};

static void wake(taas_ctl_client *c) {
    uint64_t one = 1;
    ssize_t w = write(c->wake, &one, sizeof one);
    (void)w;  /* a full counter still wakes the poll */
}

static void raise_stop(taas_ctl_client *c, int gone) {
    pthread_mutex_lock(&c->mu);
    c->gone = c->gone || gone;
    __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);  /* read with atomic loads (stream_wire.h) */
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Sends everything queued; 0, or -1 when the socket failed. */
static int flush_queue(taas_ctl_client *c) {
    for (;;) {
        pthread_mutex_lock(&c->mu);
        out_msg *m = c->head;
        if (m) {
            c->head = m->next;
            if (!c->head) c->tail = NULL;
        } else {
            pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
        if (!m) return 0;
        taas_error e;
        int rc = taas_ctl_send(c->sock, NULL, m->body, m->blob, m->n, 0, &e);
        free(m->blob);
        free(m);
        if (rc) return -1;
    }
}

static void *run(void *arg) {
    taas_ctl_client *c = arg;
    double last_heard = taas_now(), last_beat = 0;
    for (;;) {
        double now = taas_now();
        if (now - last_beat >= TAAS_CTL_HEARTBEAT_S) {
            taas_error e;
            taas_ctl_send(c->sock, NULL, taas_ctl_body("hb"), NULL, 0, ZMQ_DONTWAIT, &e);
            last_beat = now;
        }
        if (now - last_heard > TAAS_CTL_SILENCE_S) raise_stop(c, 1);
        zmq_pollitem_t items[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {NULL, c->wake, ZMQ_POLLIN, 0}};
        long ms = (long)((last_beat + TAAS_CTL_HEARTBEAT_S - taas_now()) * 1000) + 1;
        if (zmq_poll(items, 2, ms < 1 ? 1 : ms) < 0 && errno != EINTR) break;
        if (items[1].revents & ZMQ_POLLIN) {
            uint64_t v;
            ssize_t r = read(c->wake, &v, sizeof v);
            (void)r;
        }
        if (flush_queue(c)) raise_stop(c, 1);
        taas_ctl_msg m;
        taas_error e;
        int rc;
        while ((rc = taas_ctl_recv(c->sock, 0, ZMQ_DONTWAIT, &m, &e)) != 1) {
            if (rc < 0) continue;  /* malformed: dropped */
            last_heard = taas_now();
            const char *t = taas_ctl_type(&m);
            if (!strcmp(t, "cancel")) {
                raise_stop(c, 0);
            } else if (strcmp(t, "hb") != 0) {
                in_msg *im = calloc(1, sizeof *im);
                if (im) {
                    im->m = m;
                    memset(&m, 0, sizeof m);
                    pthread_mutex_lock(&c->mu);
                    in_msg **at = &c->inbox;
                    while (*at) at = &(*at)->next;
                    *at = im;
                    pthread_cond_broadcast(&c->cv);
                    pthread_mutex_unlock(&c->mu);
                }
            }
            taas_ctl_msg_clear(&m);
        }
        pthread_mutex_lock(&c->mu);
        int quit = c->quit && !c->head;
        pthread_mutex_unlock(&c->mu);
        if (quit) break;
    }
    return NULL;
}

taas_ctl_client *taas_ctl_client_new(const char *endpoint, const taas_zkeys *keys, const char *identity,
                                     json_t *hello, taas_error *err) {
    taas_ctl_client *c = calloc(1, sizeof *c);
    if (!c) {
        json_decref(hello);
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the control client");
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->zctx = zmq_ctx_new();
    if (c->wake < 0 || !c->zctx || (keys && !(c->sec = taas_zsec_new(c->zctx, keys, 0, err))) ||
        !(c->sock = taas_ctl_connect(c->zctx, c->sec, endpoint, identity, err))) {
        if (c->wake < 0 || !c->zctx)
            taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot set up the control plane: %s", strerror(errno));
        json_decref(hello);
        taas_ctl_client_free(c);
        return NULL;
    }
    json_object_set_new(hello, "t", json_string("hello"));
    if (taas_ctl_send(c->sock, NULL, hello, NULL, 0, 0, err) || pthread_create(&c->thread, NULL, run, c)) {
        if (!taas_error_is_set(err)) taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot start the control thread");
        taas_ctl_client_free(c);
        return NULL;
    }
    c->started = 1;
    return c;
}

static void drop_queue(taas_ctl_client *c) {
    while (c->head) {
        out_msg *m = c->head;
        c->head = m->next;
        json_decref(m->body);
        free(m->blob);
        free(m);
    }
    c->tail = NULL;
}

void taas_ctl_client_free(taas_ctl_client *c) {
    if (!c) return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->quit = 1;
        /* a kernel that went silent gets nothing more; one that is there gets what is queued */
        if (c->gone) drop_queue(c);
        pthread_mutex_unlock(&c->mu);
        wake(c);
        pthread_join(c->thread, NULL);
    }
    if (c->sock) {
        int linger = c->gone ? 0 : 5000;  /* let the last messages (done, the weights) leave */
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(c->sock);
    }
    taas_zsec_free(c->sec);
    if (c->zctx) zmq_ctx_term(c->zctx);
    if (c->wake >= 0) close(c->wake);
    drop_queue(c);
    while (c->inbox) {
        in_msg *im = c->inbox;
        c->inbox = im->next;
        taas_ctl_msg_clear(&im->m);
        free(im);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

int taas_ctl_client_send(taas_ctl_client *c, json_t *body, const void *blob, size_t n, taas_error *err) {
    out_msg *m = calloc(1, sizeof *m);
    void *copy = n ? malloc(n) : NULL;
    if (!m || (n && !copy)) {
        free(m);
        free(copy);
        json_decref(body);
        return taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for a control message");
    }
    if (n) memcpy(copy, blob, n);
    m->body = body;
    m->blob = copy;
    m->n = n;
    pthread_mutex_lock(&c->mu);
    if (c->tail) c->tail->next = m;
    else c->head = m;
    c->tail = m;
    pthread_mutex_unlock(&c->mu);
    wake(c);
    return 0;
}

void taas_ctl_client_log(taas_ctl_client *c, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_t *b = taas_ctl_body("log");
    json_object_set_new(b, "text", json_string(text));
    taas_error e;
    taas_ctl_client_send(c, b, NULL, 0, &e);
}

/* The first message of this type in the inbox, taken out of it; NULL when none. */
static in_msg *take(taas_ctl_client *c, const char *type) {
    for (in_msg **at = &c->inbox; *at; at = &(*at)->next)
        if (!strcmp(taas_ctl_type(&(*at)->m), type)) {
            in_msg *im = *at;
            *at = im->next;
            return im;
        }
    return NULL;
}

/* Waits under c->mu until a message of this type is in the inbox (taken out), the stop
 * flag rises (when stops is set) or the kernel goes silent, or timeout_s passes. */
static in_msg *await(taas_ctl_client *c, const char *type, double timeout_s, int stops) {
    double until = taas_now() + timeout_s;
    in_msg *im = NULL;
    while (!(im = take(c, type)) && !(stops && c->stop) && !c->gone) {
        double left = until - taas_now();
        if (left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + ts.tv_nsec / 1e9 + (left > 0.2 ? 0.2 : left);
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    return im;
}

json_t *taas_ctl_client_wait(taas_ctl_client *c, const char *type, double timeout_s, void **blob, size_t *n,
                             taas_error *err) {
    pthread_mutex_lock(&c->mu);
    in_msg *im = await(c, type, timeout_s, 1);
    int stopped = c->stop;
    pthread_mutex_unlock(&c->mu);
    if (!im) {
        taas_error_set(err, stopped ? TAAS_ERR_INTERRUPT : TAAS_ERR_TIMEOUT, TAAS_NOPOS,
                       stopped ? "the job was cancelled before it started"
                               : "the kernel did not send the job's %s within %.0f s", type, timeout_s);
        taas_error_hint(err, "run the cell again");
        return NULL;
    }
    json_t *body = im->m.body;
    if (blob) {
        *blob = im->m.blob;
        *n = im->m.blob_len;
        im->m.blob = NULL;
    }
    free(im->m.blob);
    free(im);
    return body;
}

int taas_ctl_client_leave(taas_ctl_client *c, double timeout_s) {
    taas_error e;
    if (!c || !c->started || taas_ctl_client_send(c, taas_ctl_body("leaving"), NULL, 0, &e)) return -1;
    pthread_mutex_lock(&c->mu);
    in_msg *im = await(c, "bye", timeout_s, 0);
    pthread_mutex_unlock(&c->mu);
    if (!im) return -1;
    taas_ctl_msg_clear(&im->m);
    free(im);
    return 0;
}

volatile int *taas_ctl_client_stop_flag(taas_ctl_client *c) {
    return &c->stop;
}

int taas_ctl_client_kernel_gone(const taas_ctl_client *c) {
    return c->gone;
}
