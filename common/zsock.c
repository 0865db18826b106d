/* Sockets, keys and the ZAP handler (ZeroMQ RFC 27) that admits only a job's own clients. */
#include "zsock.h"
#include "errnames.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "taas"

int taas_zkeys_new(taas_zkeys *k, taas_error *err) {
    unsigned char pub[crypto_box_PUBLICKEYBYTES], sec[crypto_box_SECRETKEYBYTES];
    _Static_assert(crypto_box_PUBLICKEYBYTES == 32 && crypto_box_SECRETKEYBYTES == 32, "CURVE keys are 32 bytes");
    if (sodium_init() < 0) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "libsodium cannot start, so the job's keys cannot be made");
        taas_error_hint(err, "the system's random source may be missing (/dev/urandom)");
        return -1;
    }
    char *out[2][2] = {{k->server_public, k->server_secret}, {k->client_public, k->client_secret}};
    for (int i = 0; i < 2; i++) {
        crypto_box_keypair(pub, sec);
        zmq_z85_encode(out[i][0], pub, sizeof pub);
        zmq_z85_encode(out[i][1], sec, sizeof sec);
    }
    sodium_memzero(sec, sizeof sec);
    return 0;
}

void taas_zkeys_text(const taas_zkeys *k, char *out) {
    snprintf(out, TAAS_ZKEYS_TEXT + 1, "%s%s%s%s", k->server_public, k->server_secret, k->client_public,
             k->client_secret);
}

int taas_zkeys_parse(const char *text, const char *from, taas_zkeys *k, taas_error *err) {
    unsigned char raw[32];
    char *dst[4] = {k->server_public, k->server_secret, k->client_public, k->client_secret};
    size_t n = text ? strlen(text) : 0;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) n--;
    int ok = n == TAAS_ZKEYS_TEXT;
    for (int i = 0; ok && i < 4; i++) {
        memcpy(dst[i], text + 40 * i, 40);
        dst[i][40] = '\0';
        ok = zmq_z85_decode(raw, dst[i]) != NULL;
    }
    sodium_memzero(raw, sizeof raw);
    if (ok) return 0;
    memset(k, 0, sizeof *k);
    taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "%s does not hold a job's keys (four Z85 keys, %d characters; "
                   "it has %zu)", from, TAAS_ZKEYS_TEXT, n);
    taas_error_hint(err, "the kernel starts the workers of a job with its keys; a worker cannot join a job without "
                         "them");
    return -1;
}

/* ---- the ZAP handler --------------------------------------------------------------------- */

struct taas_zsec {
    taas_zkeys keys;
    int server;
    unsigned char client_key[32];  /* the one key the handler admits */
    void *zctx;
    void *rep, *stop_rx, *stop_tx;
    pthread_t thread;
    int running;
    uint64_t refused;              /* read with atomic loads */
};

static void send_frame(void *sock, const void *data, size_t n, int more) {
    zmq_send(sock, data, n, more ? ZMQ_SNDMORE : 0);
}

/* One request: [version, request id, domain, address, routing id, mechanism, credentials...]. */
static void answer(taas_zsec *s) {
    zmq_msg_t f[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->rep, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < 8) f[n++] = m;
        else zmq_msg_close(&m);
    }
    if (n < 6) {  /* not a ZAP request: a REP must still answer to stay usable */
        for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
        send_frame(s->rep, "1.0", 3, 1);
        send_frame(s->rep, "", 0, 1);
        send_frame(s->rep, "500", 3, 1);
        send_frame(s->rep, "malformed request", 17, 1);
        send_frame(s->rep, "", 0, 1);
        send_frame(s->rep, "", 0, 0);
        return;
    }
    int ok = n == 7 && zmq_msg_size(&f[2]) == strlen(ZAP_DOMAIN) &&
             !memcmp(zmq_msg_data(&f[2]), ZAP_DOMAIN, strlen(ZAP_DOMAIN)) && zmq_msg_size(&f[5]) == 5 &&
             !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) && zmq_msg_size(&f[6]) == 32 &&
             sodium_memcmp(zmq_msg_data(&f[6]), s->client_key, 32) == 0;
    if (!ok) __atomic_add_fetch(&s->refused, 1, __ATOMIC_RELAXED);
    send_frame(s->rep, "1.0", 3, 1);
    send_frame(s->rep, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), 1);
    send_frame(s->rep, ok ? "200" : "400", 3, 1);
    send_frame(s->rep, ok ? "OK" : "not a client of this job", ok ? 2 : 24, 1);
    send_frame(s->rep, ok ? "taas-worker" : "", ok ? 11 : 0, 1);
    send_frame(s->rep, "", 0, 0);
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

static void *zap_loop(void *arg) {
    taas_zsec *s = arg;
    for (;;) {
        zmq_pollitem_t items[2] = {{s->rep, 0, ZMQ_POLLIN, 0}, {s->stop_rx, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (items[1].revents & ZMQ_POLLIN) break;
        if (items[0].revents & ZMQ_POLLIN) answer(s);
    }
    return NULL;
}

static void close_all(taas_zsec *s) {
    if (s->rep) zmq_close(s->rep);
    if (s->stop_rx) zmq_close(s->stop_rx);
    if (s->stop_tx) zmq_close(s->stop_tx);
    s->rep = s->stop_rx = s->stop_tx = NULL;
}

static int start_handler(taas_zsec *s, taas_error *err) {
    char pipe_ep[64];
    snprintf(pipe_ep, sizeof pipe_ep, "inproc://taas-zap-stop-%p", (void *)s);
    int zero = 0;
    s->rep = zmq_socket(s->zctx, ZMQ_REP);
    s->stop_rx = zmq_socket(s->zctx, ZMQ_PAIR);
    s->stop_tx = zmq_socket(s->zctx, ZMQ_PAIR);
    if (s->rep) zmq_setsockopt(s->rep, ZMQ_LINGER, &zero, sizeof zero);
    if (!s->rep || !s->stop_rx || !s->stop_tx || zmq_bind(s->rep, ZAP_ENDPOINT) < 0 ||
        zmq_bind(s->stop_rx, pipe_ep) < 0 || zmq_connect(s->stop_tx, pipe_ep) < 0) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "cannot start the job's authentication handler: %s",
                       zmq_strerror(errno));
        taas_error_hint(err, "the process may be out of file descriptors; a context has one handler at most");
        close_all(s);
        return -1;
    }
    /* the handler thread takes no signal: they belong to the process's main loop */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, zap_loop, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "cannot start the job's authentication thread: %s",
                       strerror(rc));
        taas_error_hint(err, "the process may be out of threads or memory");
        close_all(s);
        return -1;
    }
    s->running = 1;
    return 0;
}

taas_zsec *taas_zsec_new(void *zctx, const taas_zkeys *keys, int server, taas_error *err) {
    if (!zmq_has("curve")) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "this libzmq has no CURVE security, which a job across "
                       "machines needs");
        taas_error_hint(err, "install Debian's libzmq5 (built with libsodium)");
        return NULL;
    }
    taas_zsec *s = calloc(1, sizeof *s);
    if (!s) {
        taas_error_set(err, TAAS_ERR_MEMORY, TAAS_NOPOS, "out of memory for the job's security");
        return NULL;
    }
    s->keys = *keys;
    s->server = server;
    s->zctx = zctx;
    if (!zmq_z85_decode(s->client_key, s->keys.client_public)) {
        free(s);
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "the job's client key is not a Z85 key");
        taas_error_hint(err, "this is a bug in taas; please report it");
        return NULL;
    }
    if (server && start_handler(s, err)) {
        free(s);
        return NULL;
    }
    return s;
}

void taas_zsec_free(taas_zsec *s) {
    if (!s) return;
    if (s->running) {
        send_frame(s->stop_tx, "", 0, 0);
        pthread_join(s->thread, NULL);
    }
    close_all(s);
    sodium_memzero(&s->keys, sizeof s->keys);
    free(s);
}

uint64_t taas_zsec_refused(const taas_zsec *s) {
    return s ? __atomic_load_n(&s->refused, __ATOMIC_RELAXED) : 0;
}

/* ---- sockets ----------------------------------------------------------------------------- */

static int set(void *sock, int opt, const void *v, size_t n) {
    return zmq_setsockopt(sock, opt, v, n) == 0;
}

static int setup(void *sock, const taas_zsock_cfg *c, int server) {
    int one = 1;
    int ok = set(sock, ZMQ_LINGER, &c->linger_ms, sizeof c->linger_ms);
    if (ok && c->sndhwm >= 0) ok = set(sock, ZMQ_SNDHWM, &c->sndhwm, sizeof c->sndhwm);
    if (ok && c->rcvhwm >= 0) ok = set(sock, ZMQ_RCVHWM, &c->rcvhwm, sizeof c->rcvhwm);
    if (ok && c->maxmsg > 0) ok = set(sock, ZMQ_MAXMSGSIZE, &c->maxmsg, sizeof c->maxmsg);
    if (ok && c->identity) ok = set(sock, ZMQ_ROUTING_ID, c->identity, strlen(c->identity));
    if (ok && (c->flags & TAAS_ZSOCK_HANDOVER)) ok = set(sock, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    if (ok && (c->flags & TAAS_ZSOCK_MANDATORY)) ok = set(sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (ok && (c->flags & TAAS_ZSOCK_IMMEDIATE)) ok = set(sock, ZMQ_IMMEDIATE, &one, sizeof one);
    if (ok && (c->flags & TAAS_ZSOCK_VERBOSE)) ok = set(sock, ZMQ_XPUB_VERBOSE, &one, sizeof one);
    if (ok && c->sec && server) {
        ok = set(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) &&
             set(sock, ZMQ_CURVE_SERVER, &one, sizeof one) &&
             set(sock, ZMQ_CURVE_SECRETKEY, c->sec->keys.server_secret, 40);
    } else if (ok && c->sec) {
        ok = set(sock, ZMQ_CURVE_SERVERKEY, c->sec->keys.server_public, 40) &&
             set(sock, ZMQ_CURVE_PUBLICKEY, c->sec->keys.client_public, 40) &&
             set(sock, ZMQ_CURVE_SECRETKEY, c->sec->keys.client_secret, 40);
    }
    return ok;
}

void *taas_zsock_new(void *zctx, const taas_zsock_cfg *c, int server, taas_error *err) {
    const char *what = c->what ? c->what : "a";
    if (c->sec && server && !c->sec->server) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "%s socket would listen with a client's keys", what);
        taas_error_hint(err, "this is a bug in taas; please report it");
        return NULL;
    }
    void *sock = zctx ? zmq_socket(zctx, c->type) : NULL;
    if (!sock) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot create %s socket: %s", what,
                       zctx ? zmq_strerror(errno) : "no ZeroMQ context");
        taas_error_hint(err, "the process may be out of file descriptors or memory");
        return NULL;
    }
    if (!setup(sock, c, server)) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot set up %s socket: %s", what, zmq_strerror(errno));
        taas_error_hint(err, "this libzmq lacks an option taas needs: install libzmq 4.3 or later");
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

void *taas_zsock_bind(void *zctx, const taas_zsock_cfg *c, const char *endpoint, char *bound, size_t n,
                      taas_error *err) {
    void *sock = taas_zsock_new(zctx, c, 1, err);
    if (!sock) return NULL;
    int one = 1;
    if (strchr(endpoint, '[')) zmq_setsockopt(sock, ZMQ_IPV6, &one, sizeof one);
    if (zmq_bind(sock, endpoint) < 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot bind %s socket to %s: %s", c->what ? c->what : "a",
                       endpoint, zmq_strerror(errno));
        taas_error_hint(err, "the address must belong to this machine and the port be free (or *)");
        zmq_close(sock);
        return NULL;
    }
    size_t len = n;
    if (bound && zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, bound, &len) < 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot read the address of %s socket: %s",
                       c->what ? c->what : "a", zmq_strerror(errno));
        taas_error_hint(err, "the address may be too long");
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

void *taas_zsock_connect(void *zctx, const taas_zsock_cfg *c, const char *endpoint, taas_error *err) {
    void *sock = taas_zsock_new(zctx, c, 0, err);
    if (!sock) return NULL;
    int one = 1;
    if (strchr(endpoint, '[')) zmq_setsockopt(sock, ZMQ_IPV6, &one, sizeof one);
    if (zmq_connect(sock, endpoint) < 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot connect %s socket to %s: %s", c->what ? c->what : "a",
                       endpoint, zmq_strerror(errno));
        taas_error_hint(err, "the address comes from the job; a worker of another version may read it differently");
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

int taas_zsock_route(const char *host, char *addr, size_t n, int *v6, taas_error *err) {
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
    int rc = getaddrinfo(host, "9", &hints, &ai);
    int fd = rc ? -1 : socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage me = {0}; /* getsockname fills it; the analyzer cannot see that */
    socklen_t len = sizeof me;
    addr[0] = '\0';
    *v6 = ai && ai->ai_family == AF_INET6;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)&me, &len) == 0) {
        if (me.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&me)->sin_addr, addr, (socklen_t)n);
        else
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&me)->sin6_addr, addr, (socklen_t)n);
    }
    int e = errno;
    if (fd >= 0) close(fd);
    if (ai) freeaddrinfo(ai);
    if (addr[0]) return 0;
    taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "no route from this machine to %s: %s", host,
                   rc ? gai_strerror(rc) : strerror(e));
    taas_error_hint(err, "check the address, or that this machine is on the hosts' network");
    return -1;
}

int taas_zsock_network(const char *addr, char *out, size_t n) {
    struct ifaddrs *ifs = NULL, *i;
    struct in_addr want;
    if (inet_pton(AF_INET, addr, &want) != 1 || getifaddrs(&ifs) < 0) return -1;
    int rc = -1;
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        struct in_addr m = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr;
        if (a.s_addr != want.s_addr) continue;
        struct in_addr net = {a.s_addr & m.s_addr};
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &net, text, sizeof text);
        snprintf(out, n, "%s/%d", text, __builtin_popcount(ntohl(m.s_addr)));
        rc = 0;
        break;
    }
    freeifaddrs(ifs);
    return rc;
}
