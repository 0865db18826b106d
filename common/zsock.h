/* The one place that makes ZeroMQ sockets. Every socket of the kernel and the workers is made
 * here, with the security of what it belongs to:
 *   - a Jupyter channel: plain (Jupyter signs each message with the connection file's key);
 *   - a job's control or data plane on this machine: ipc:// endpoints in the job folder
 *     (mode 0700: the filesystem is the access check), plain;
 *   - a job's plane that leaves the machine: CURVE (encrypted, authenticated) with keys made
 *     fresh for the job. Its servers (the kernel's control ROUTER, each rank's data ROUTER)
 *     have a ZAP handler that accepts only the job's own client key, so a process without the
 *     keys can neither connect, send, nor read.
 * A socket's security comes from a taas_zsec made for its context; a CURVE server cannot be
 * made without the ZAP handler running, so the check cannot be forgotten on one socket. */
#ifndef TAAS_ZSOCK_H
#define TAAS_ZSOCK_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Z85 text of 32-byte Curve25519 keys (40 characters each). One key pair for the servers
 * (the kernel and the ranks), one for the clients (every worker's connections). */
typedef struct taas_zkeys {
    char server_public[41], server_secret[41];
    char client_public[41], client_secret[41];
} taas_zkeys;

/* The environment variable that hands a worker its job's keys: never a command-line
 * argument, which `ps` shows to every user of the machine. */
#define TAAS_ZKEYS_ENV "TAAS_JOB_KEYS"
/* Length of the keys as text: the four keys, one after the other. */
#define TAAS_ZKEYS_TEXT 160

/* Fresh keys from libsodium. 0, or -1 with err. */
int taas_zkeys_new(taas_zkeys *k, taas_error *err);
/* The keys as TAAS_ZKEYS_TEXT characters and a NUL (out holds at least 161 bytes). */
void taas_zkeys_text(const taas_zkeys *k, char *out);
/* Parses that text; -1 with err naming where it came from when it is not four Z85 keys. */
int taas_zkeys_parse(const char *text, const char *from, taas_zkeys *k, taas_error *err);

/* A context's security: NULL everywhere means plain sockets. */
typedef struct taas_zsec taas_zsec;

/* CURVE with keys for sockets of zctx. server: its sockets may bind (and a ZAP handler
 * thread is started on zctx, which accepts the job's client key only); else they connect.
 * Free it before zmq_ctx_term, after its sockets are closed. NULL with err. */
taas_zsec *taas_zsec_new(void *zctx, const taas_zkeys *keys, int server, taas_error *err);
void taas_zsec_free(taas_zsec *s);
/* Handshakes the ZAP handler refused so far (a client without the job's key). */
uint64_t taas_zsec_refused(const taas_zsec *s);

enum {
    TAAS_ZSOCK_HANDOVER = 1,   /* ROUTER: a peer that reconnects with its name takes over */
    TAAS_ZSOCK_MANDATORY = 2,  /* ROUTER: sending to an unknown peer fails (EHOSTUNREACH) */
    TAAS_ZSOCK_IMMEDIATE = 4,  /* queue nothing for a connection that is not up */
    TAAS_ZSOCK_VERBOSE = 8     /* XPUB: every subscription is read, a repeated one too */
};

typedef struct taas_zsock_cfg {
    int type;                  /* ZMQ_ROUTER, ZMQ_DEALER, ... */
    const char *what;          /* "the job's control plane": for error messages */
    const taas_zsec *sec;      /* NULL: plain */
    int linger_ms;
    int sndhwm, rcvhwm;        /* high-water marks; 0 = none; -1 = ZeroMQ's default */
    int64_t maxmsg;            /* largest message accepted; 0 = no limit */
    const char *identity;      /* routing id, or NULL */
    unsigned flags;            /* TAAS_ZSOCK_* */
} taas_zsock_cfg;

/* A socket bound to endpoint; the endpoint it got (the port the system chose) into bound
 * (when not NULL). NULL with err naming what and where. */
void *taas_zsock_bind(void *zctx, const taas_zsock_cfg *c, const char *endpoint, char *bound, size_t n,
                      taas_error *err);
/* A socket connected to endpoint (a CURVE client when c->sec is). NULL with err. */
void *taas_zsock_connect(void *zctx, const taas_zsock_cfg *c, const char *endpoint, taas_error *err);
/* A socket neither bound nor connected yet, for one that does both or connects later. */
void *taas_zsock_new(void *zctx, const taas_zsock_cfg *c, int server, taas_error *err);

/* The address of this machine that packets to host (a name or an address) leave from, as
 * the routing table says (a UDP socket connected there; nothing is sent), into addr (at
 * least 46 bytes); *v6 says whether it is IPv6. -1 with err naming host. For a job across
 * machines: the kernel binds its control plane there, a rank its data plane. */
int taas_zsock_route(const char *host, char *addr, size_t n, int *v6, taas_error *err);

/* The network of this machine's IPv4 address addr ("10.1.2.1" -> "10.1.2.0/24"), for Open
 * MPI's *_if_include, which the hosts read in CIDR form (their interfaces have other names).
 * -1 when addr is not an IPv4 address of this machine. */
int taas_zsock_network(const char *addr, char *out, size_t n);

#endif
