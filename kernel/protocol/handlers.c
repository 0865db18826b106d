/* The dispatch table: msg_type -> handler, shared by shell and control. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cursor.h"
#include "errnames.h"
#include "kernel_priv.h"
#include "log.h"

#define PROTO_ERROR TAAS_ERR_PROTOCOL

/* Returns 1 when the handler took msg (and will send its idle status itself). */
typedef int (*handler_fn)(taas_kernel *k, void *sock, taas_msg *msg);

static const char BANNER[] =
    "taas " TAAS_VERSION " - a Jupyter kernel for training neural networks\n"
    "Cells use Python's expression syntax with PyTorch's names (nn.Conv2d, DataLoader, "
    "fit, ...).\nhelp(name) describes a builtin; Tab completes; Shift-Tab inspects.";

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

/* A request that cannot be served (a field missing or out of range, undecodable): "<msg_type>:
 * what" in the matching *_reply with status error. A message that is not a request has no
 * reply, so it is only logged. */
static void error_reply(taas_kernel *k, void *sock, const taas_msg *msg, const char *what) {
    const char *t = msg->msg_type;
    char evalue[640];
    snprintf(evalue, sizeof evalue, "%.80s: %s", t, what);
    taas_log("bad request: %s", evalue);
    if (!ends_with(t, "_request")) return;
    char reply_type[128];
    snprintf(reply_type, sizeof reply_type, "%.*s_reply", (int)(strlen(t) - 8), t);
    json_t *c = taas_error_reply_content(PROTO_ERROR, evalue);
    /* the spec has execution_count in every execute_reply; nothing ran, so it stays */
    if (strcmp(t, "execute_request") == 0)
        json_object_set_new(c, "execution_count", json_integer(k->execution_count));
    taas_kernel_reply(k, sock, msg, reply_type, c);
}

/* A number as short as it reads back: 1e+30 -> "1e30". */
static void format_number(double v, char *out, size_t size) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v) break;
    }
    char *e = strchr(out, 'e');
    if (!e) return;
    char *from = e + 1, *to = e + 1;
    if (*from == '+') from++;
    else if (*from == '-') *to++ = *from++;
    while (*from == '0' && from[1]) from++;
    memmove(to, from, strlen(from) + 1);
}

/* A numeric member that is to become a 64-bit integer: 0 when it can (or is missing or
 * not a number), -1 after an error reply when it is out of range. jansson gives a real for
 * an integer literal beyond 64 bits (wire.c), so that it gets here to be named. */
static int check_range(taas_kernel *k, void *sock, const taas_msg *msg, const char *key) {
    const json_t *v = json_object_get(msg->content, key);
    if (!json_is_real(v)) return 0;
    double x = json_real_value(v);
    if (x >= -9223372036854775808.0 && x < 9223372036854775808.0) return 0;
    char num[40], what[160];
    format_number(x, num, sizeof num);
    snprintf(what, sizeof what, "%s %s is out of range: it must be an integer from -2^63 to "
             "2^63-1", key, num);
    error_reply(k, sock, msg, what);
    return -1;
}

static int h_kernel_info(taas_kernel *k, void *sock, taas_msg *msg) {
    json_t *c = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:[], s:b}", "status", "ok",
        "protocol_version", TAAS_PROTOCOL_VERSION, "implementation", "taas",
        "implementation_version", TAAS_VERSION, "language_info", "name", "taas", "version",
        TAAS_VERSION, "mimetype", "text/x-python", "file_extension", ".taas", "pygments_lexer",
        "python", "codemirror_mode", "python", "banner", BANNER, "help_links", "debugger", 0);
    taas_kernel_reply(k, sock, msg, "kernel_info_reply", c);
    return 0;
}

static int h_is_complete(taas_kernel *k, void *sock, taas_msg *msg) {
    const char *code = taas_json_get_str(msg->content, "code", NULL);
    if (!code) {
        error_reply(k, sock, msg, "the content has no \"code\" string");
        return 0;
    }
    const char *status = taas_interp_is_complete(k->interp, code);
    if (!status) status = "unknown";
    json_t *c = strcmp(status, "incomplete") == 0
                    ? json_pack("{s:s, s:s}", "status", status, "indent", "")
                    : json_pack("{s:s}", "status", status);
    taas_kernel_reply(k, sock, msg, "is_complete_reply", c);
    return 0;
}

static int h_complete(taas_kernel *k, void *sock, taas_msg *msg) {
    const char *code = taas_json_get_str(msg->content, "code", NULL);
    if (!code) {
        error_reply(k, sock, msg, "the content has no \"code\" string");
        return 0;
    }
    if (check_range(k, sock, msg, "cursor_pos")) return 0;
    size_t len = strlen(code);
    size_t cursor = taas_cursor_to_byte(code, json_object_get(msg->content, "cursor_pos"));
    size_t start = cursor, end = cursor;
    json_t *matches = taas_interp_complete(k->interp, code, cursor, &start, &end);
    if (!json_is_array(matches)) {
        json_decref(matches);
        matches = json_array();
    }
    if (end > len) end = len;
    if (start > end) start = end;
    json_t *c = json_pack("{s:s, s:o, s:I, s:I, s:{}}", "status", "ok", "matches", matches,
                          "cursor_start", (json_int_t)taas_cursor_from_byte(code, start),
                          "cursor_end", (json_int_t)taas_cursor_from_byte(code, end),
                          "metadata");
    taas_kernel_reply(k, sock, msg, "complete_reply", c);
    return 0;
}

static int h_inspect(taas_kernel *k, void *sock, taas_msg *msg) {
    const char *code = taas_json_get_str(msg->content, "code", NULL);
    if (!code) {
        error_reply(k, sock, msg, "the content has no \"code\" string");
        return 0;
    }
    if (check_range(k, sock, msg, "cursor_pos")) return 0;
    size_t cursor = taas_cursor_to_byte(code, json_object_get(msg->content, "cursor_pos"));
    json_t *dl = json_object_get(msg->content, "detail_level");
    int detail = json_is_integer(dl) && json_integer_value(dl) > 0 ? 1 : 0;
    json_t *bundle = taas_interp_inspect(k->interp, code, cursor, detail);
    if (bundle && !json_is_object(bundle)) {
        json_decref(bundle);
        bundle = NULL;
    }
    json_t *c = json_pack("{s:s, s:b, s:o, s:{}}", "status", "ok", "found", bundle != NULL,
                          "data", bundle ? bundle : json_object(), "metadata");
    taas_kernel_reply(k, sock, msg, "inspect_reply", c);
    return 0;
}

/* An integer member; dflt when missing or null. Numbers with a fraction are truncated;
 * check_range has refused those beyond a long. */
static long get_long(const json_t *obj, const char *key, long dflt) {
    const json_t *v = json_object_get(obj, key);
    if (json_is_integer(v)) return (long)json_integer_value(v);
    if (json_is_real(v)) return (long)json_real_value(v);
    return dflt;
}

static int h_history(taas_kernel *k, void *sock, taas_msg *msg) {
    static const char *const NUMBERS[] = {"n", "session", "start", "stop"};
    for (size_t i = 0; i < sizeof NUMBERS / sizeof NUMBERS[0]; i++)
        if (check_range(k, sock, msg, NUMBERS[i])) return 0;
    const json_t *c = msg->content;
    const char *type = taas_json_get_str(c, "hist_access_type", "tail");
    int output = taas_json_get_bool(c, "output", 0);
    json_t *hist;
    if (strcmp(type, "tail") == 0) {
        /* IPython's default is the last 10 */
        hist = taas_history_tail(k->history, get_long(c, "n", 10), output);
    } else if (strcmp(type, "range") == 0) {
        hist = taas_history_range(k->history, get_long(c, "session", 0),
                                  get_long(c, "start", 0), get_long(c, "stop", 0), output);
    } else if (strcmp(type, "search") == 0) {
        hist = taas_history_search(k->history, taas_json_get_str(c, "pattern", "*"),
                                   get_long(c, "n", -1), taas_json_get_bool(c, "unique", 0),
                                   output);
    } else {
        error_reply(k, sock, msg, "hist_access_type must be \"tail\", \"range\" or \"search\"");
        return 0;
    }
    taas_kernel_reply(k, sock, msg, "history_reply",
                      json_pack("{s:s, s:o}", "status", "ok", "history", hist));
    return 0;
}

static int h_comm_info(taas_kernel *k, void *sock, taas_msg *msg) {
    taas_kernel_reply(k, sock, msg, "comm_info_reply",
                      json_pack("{s:s, s:{}}", "status", "ok", "comms"));
    return 0;
}

/* No comm targets exist: every comm_open is closed at once, as the protocol asks. */
static int h_comm_open(taas_kernel *k, void *sock, taas_msg *msg) {
    (void)sock;
    const char *id = taas_json_get_str(msg->content, "comm_id", NULL);
    const char *target = taas_json_get_str(msg->content, "target_name", "");
    if (!id) {
        taas_log("comm_open without a comm_id: ignored");
        return 0;
    }
    taas_log("comm_open for target '%.80s', which taas does not have: closing it", target);
    taas_kernel_publish(k, "comm_close", msg->header,
                        json_pack("{s:o, s:{}}", "comm_id", taas_json_string(id), "data"));
    return 0;
}

static int h_ignore(taas_kernel *k, void *sock, taas_msg *msg) {
    (void)k;
    (void)sock;
    (void)msg;   /* comm_msg / comm_close for comms that do not exist */
    return 0;
}

static int h_connect(taas_kernel *k, void *sock, taas_msg *msg) {
    json_t *c = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "status", "ok", "shell_port",
                          k->ports[0], "iopub_port", k->ports[1], "stdin_port", k->ports[2],
                          "control_port", k->ports[3], "hb_port", k->ports[4]);
    taas_kernel_reply(k, sock, msg, "connect_reply", c);
    return 0;
}

static int h_shutdown(taas_kernel *k, void *sock, taas_msg *msg) {
    int restart = taas_json_get_bool(msg->content, "restart", 0);
    json_t *c = json_pack("{s:s, s:b}", "status", "ok", "restart", restart);
    /* also on iopub, so that every connected client learns of it, as ipykernel does */
    taas_kernel_publish(k, "shutdown_reply", msg->header, json_deep_copy(c));
    taas_kernel_reply(k, sock, msg, "shutdown_reply", c);
    taas_log("shutdown requested%s", restart ? " (restart)" : "");
    k->stopping = 1;
    k->restart = restart;
    return 0;
}

static int h_interrupt(taas_kernel *k, void *sock, taas_msg *msg) {
    if (k->in_walk)
        k->walk_interrupted = 1;
    else if (k->running)
        taas_execute_interrupt(k);
    else
        taas_log("interrupt_request with no cell running: nothing to interrupt");
    taas_kernel_reply(k, sock, msg, "interrupt_reply", json_pack("{s:s}", "status", "ok"));
    return 0;
}

static int h_execute(taas_kernel *k, void *sock, taas_msg *msg) {
    if (k->aborting) {
        taas_execute_abort(k, sock, msg);
        return 0;
    }
    taas_execute_request(k, sock, msg);
    return 1;
}

enum { SHELL = TAAS_CH_SHELL, CONTROL = TAAS_CH_CONTROL, BOTH = SHELL | CONTROL };

static const struct route {
    const char *msg_type;
    handler_fn fn;
    unsigned channels;   /* where it is served; the interpreter is reached from shell only */
} ROUTES[] = {
    {"kernel_info_request", h_kernel_info, BOTH},
    {"execute_request", h_execute, SHELL},
    {"is_complete_request", h_is_complete, SHELL},
    {"complete_request", h_complete, SHELL},
    {"inspect_request", h_inspect, SHELL},
    {"history_request", h_history, BOTH},
    {"comm_info_request", h_comm_info, BOTH},
    {"comm_open", h_comm_open, BOTH},
    {"comm_msg", h_ignore, BOTH},
    {"comm_close", h_ignore, BOTH},
    {"connect_request", h_connect, BOTH},
    {"shutdown_request", h_shutdown, BOTH},
    {"interrupt_request", h_interrupt, BOTH},
};

void taas_kernel_dispatch(taas_kernel *k, void *sock, taas_channel ch, taas_msg *msg) {
    const char *chname = ch == TAAS_CH_SHELL ? "shell" : "control";
    /* a shell request answered while a cell waits says no busy and idle of its own: the
     * kernel stays busy with the cell, and an idle would tell front ends it has ended */
    int quiet = k->running && ch == TAAS_CH_SHELL;
    k->served = 1;
    if (!quiet) taas_kernel_status(k, "busy", msg->header);
    const struct route *r = NULL;
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0] && !r; i++)
        if (strcmp(ROUTES[i].msg_type, msg->msg_type) == 0) r = &ROUTES[i];
    int kept = 0;
    if (msg->undecodable) {
        /* signed, so its sender is known and waits: told why, never acted on */
        error_reply(k, sock, msg, msg->undecodable);
    } else if (r && (r->channels & ch)) {
        kept = r->fn(k, sock, msg);
    } else if (r) {
        char what[128];
        snprintf(what, sizeof what, "it is served on the shell channel, not on %s", chname);
        error_reply(k, sock, msg, what);
    } else {
        taas_log("unknown message type '%.80s' on %s", msg->msg_type, chname);
        if (ends_with(msg->msg_type, "_request")) {
            char reply_type[128], evalue[160];
            snprintf(evalue, sizeof evalue, "unknown message type '%.80s'", msg->msg_type);
            snprintf(reply_type, sizeof reply_type, "%.*s_reply",
                     (int)(strlen(msg->msg_type) - 8), msg->msg_type);
            taas_kernel_reply(k, sock, msg, reply_type,
                              taas_error_reply_content(PROTO_ERROR, evalue));
        }
    }
    if (!kept) {
        if (!quiet) taas_kernel_status(k, "idle", msg->header);
        taas_msg_free(msg);
    }
}
