/* execute_request: the cell's outputs (taas_io), its result or error, the reply, history,
 * and the waiting, resuming and interrupting of a cell as a state of the loop. */
#include <stdlib.h>
#include <string.h>

#include "errnames.h"
#include "kernel_priv.h"
#include "log.h"

/* Outputs go straight to iopub from the loop thread; the interpreter calls these while
 * taas_interp_run / taas_interp_resume run. A silent cell publishes nothing. */
static taas_exec *live(void *ctx) {
    taas_kernel *k = ctx;
    return (k->current && !k->current->silent) ? k->current : NULL;
}

static void io_stream(void *ctx, const char *name, const char *text) {
    taas_kernel *k = ctx;
    taas_exec *x = live(ctx);
    if (!x || !text) return;
    const char *n = (name && strcmp(name, "stderr") == 0) ? "stderr" : "stdout";
    taas_kernel_publish(k, "stream", x->req->header,
                        json_pack("{s:s, s:o}", "name", n, "text", taas_json_string(text)));
}

static void io_display(void *ctx, json_t *data, json_t *metadata, const char *display_id,
                       int update) {
    taas_kernel *k = ctx;
    taas_exec *x = live(ctx);
    if (!x || !json_is_object(data) || (update && !display_id)) {
        if (x && update && !display_id) taas_log("update_display_data without a display_id: dropped");
        json_decref(data);
        json_decref(metadata);
        return;
    }
    if (!json_is_object(metadata)) {
        json_decref(metadata);
        metadata = json_object();
    }
    json_t *transient = display_id
                            ? json_pack("{s:o}", "display_id", taas_json_string(display_id))
                            : json_object();
    taas_kernel_publish(k, update ? "update_display_data" : "display_data", x->req->header,
                        json_pack("{s:o, s:o, s:o}", "data", data, "metadata", metadata,
                                  "transient", transient));
}

static void io_clear_output(void *ctx, int wait) {
    taas_kernel *k = ctx;
    taas_exec *x = live(ctx);
    if (!x) return;
    taas_kernel_publish(k, "clear_output", x->req->header, json_pack("{s:b}", "wait", wait));
}

/* help() output travels in the execute_reply's payload, which Jupyter shows in its pager */
static void io_page(void *ctx, json_t *data) {
    taas_kernel *k = ctx;
    taas_exec *x = k->current;
    if (!x || !json_is_object(data)) {
        json_decref(data);
        return;
    }
    json_t *p = json_pack("{s:s, s:o, s:i}", "source", "page", "data", data, "start", 0);
    if (p) json_array_append_new(x->payload, p);
}

/* exit(), quit(): the reply's ask_exit payload asks the front end to end the session, and
 * the front end shuts the kernel down (jupyter console does). The kernel does not end by
 * itself: a client that sees the process gone before it has read the reply (jupyter
 * console asks its KernelManager) would never see the request. */
static void io_ask_exit(void *ctx) {
    taas_kernel *k = ctx;
    taas_exec *x = k->current;
    if (!x) return;
    json_t *p = json_pack("{s:s, s:b}", "source", "ask_exit", "keepkernel", 0);
    if (p) json_array_append_new(x->payload, p);
}

void taas_execute_io_init(taas_kernel *k) {
    k->io.ctx = k;
    k->io.stream = io_stream;
    k->io.display = io_display;
    k->io.clear_output = io_clear_output;
    k->io.page = io_page;
    k->io.ask_exit = io_ask_exit;
}

static void exec_free(taas_exec *x) {
    if (!x) return;
    taas_msg_free(x->req);
    free(x->code);
    json_decref(x->payload);
    free(x);
}

static json_t *reply_metadata(const taas_exec *x, const char *status) {
    return json_pack("{s:s, s:s, s:b}", "started", x->started, "status", status,
                     "dependencies_met", 1);
}

static void finish_ok(taas_kernel *k, taas_exec *x, json_t *result) {
    char *text = NULL;   /* the result's text/plain, for history with output */
    if (result && !json_is_object(result)) {
        taas_log("the interpreter returned a result that is not a mime bundle: dropped");
        json_decref(result);
        result = NULL;
    }
    if (result) {
        const char *t = taas_json_get_str(result, "text/plain", NULL);
        if (t) text = strdup(t);
        if (!x->silent)
            taas_kernel_publish(k, "execute_result", x->req->header,
                                json_pack("{s:i, s:o, s:{}}", "execution_count", x->count, "data",
                                          result, "metadata"));
        else
            json_decref(result);
    }
    if (x->store_history && taas_history_add(k->history, x->count, x->code, text))
        taas_log("out of memory: cell %d is not in the history", x->count);
    free(text);
    json_t *c = json_pack("{s:s, s:i, s:O, s:{}}", "status", "ok", "execution_count", x->count,
                          "payload", x->payload, "user_expressions");
    taas_session_send(k->session, x->sock, x->req->ids, x->req->n_ids, "execute_reply",
                      x->req->header, reply_metadata(x, "ok"), c);
}

static void finish_error(taas_kernel *k, taas_exec *x, taas_error *err) {
    if (!taas_error_is_set(err)) {
        taas_error_set(err, TAAS_ERR_INTERNAL, (taas_srcpos){0, 0},
                       "the cell failed without an error message");
        taas_error_hint(err, "this is a bug in taas-kernel; please report the cell that did it");
    }
    taas_error_attach_source(err, x->code);
    json_t *tb = json_array();
    char **lines = taas_error_traceback(err);
    for (char **l = lines; l && *l; l++) json_array_append_new(tb, taas_json_string(*l));
    taas_error_traceback_free(lines);
    json_t *ename = taas_json_string(err->ename), *evalue = taas_json_string(err->message);
    if (!x->silent)
        taas_kernel_publish(k, "error", x->req->header,
                            json_pack("{s:O, s:O, s:O}", "ename", ename, "evalue", evalue,
                                      "traceback", tb));
    if (x->store_history && taas_history_add(k->history, x->count, x->code, NULL))
        taas_log("out of memory: cell %d is not in the history", x->count);
    /* ipykernel aborts the queue only after a cell that was not silent */
    if (!x->silent && x->stop_on_error) taas_kernel_hold_queued(k);
    json_t *c = json_pack("{s:s, s:i, s:o, s:o, s:o, s:O, s:{}}", "status", "error",
                          "execution_count", x->count, "ename", ename, "evalue", evalue,
                          "traceback", tb, "payload", x->payload, "user_expressions");
    taas_session_send(k->session, x->sock, x->req->ids, x->req->n_ids, "execute_reply",
                      x->req->header, reply_metadata(x, "error"), c);
}

/* Where a run or resume left the cell: still waiting, or finished (reply, idle). */
static void settle(taas_kernel *k, taas_exec *x, taas_run_state st, json_t *result,
                   taas_error *err) {
    if (st == TAAS_RUN_WAIT) {
        json_decref(result);
        k->running = x;
        return;
    }
    if (st == TAAS_RUN_DONE) {
        finish_ok(k, x, result);
    } else {
        json_decref(result);
        finish_error(k, x, err);
    }
    k->running = NULL;
    k->current = NULL;
    taas_kernel_status(k, "idle", x->req->header);
    exec_free(x);
}

void taas_execute_request(taas_kernel *k, void *sock, taas_msg *msg) {
    const json_t *c = msg->content;
    const char *code = taas_json_get_str(c, "code", NULL);
    taas_exec *x = calloc(1, sizeof *x);
    if (x) {
        x->code = strdup(code ? code : "");
        x->payload = json_array();
    }
    if (!code || !x || !x->code || !x->payload) {
        const char *why = code ? "out of memory" : "execute_request: the content has no \"code\" string";
        taas_log("bad request: %s", why);
        taas_kernel_reply(k, sock, msg, "execute_reply",
                          taas_error_reply_content(TAAS_ERR_PROTOCOL, why));
        taas_kernel_status(k, "idle", msg->header);
        taas_msg_free(msg);
        exec_free(x);
        return;
    }
    x->req = msg;
    x->sock = sock;
    x->silent = taas_json_get_bool(c, "silent", 0);
    /* the protocol: silent forces store_history off; the count moves with stored cells */
    x->store_history = !x->silent && taas_json_get_bool(c, "store_history", 1);
    x->stop_on_error = taas_json_get_bool(c, "stop_on_error", 1);
    if (x->store_history) k->execution_count++;
    x->count = k->execution_count;
    taas_iso8601_now(x->started);
    if (!x->silent)
        taas_kernel_publish(k, "execute_input", msg->header,
                            json_pack("{s:o, s:i}", "code", taas_json_string(x->code),
                                      "execution_count", x->count));
    k->current = x;
    json_t *result = NULL;
    taas_error err;
    taas_error_clear(&err);
    taas_run_state st = taas_interp_run(k->interp, x->code, &k->io, &result, &err);
    settle(k, x, st, result, &err);
}

void taas_execute_resume(taas_kernel *k) {
    taas_exec *x = k->running;
    if (!x) return;
    json_t *result = NULL;
    taas_error err;
    taas_error_clear(&err);
    taas_run_state st = taas_interp_resume(k->interp, &result, &err);
    settle(k, x, st, result, &err);
}

void taas_execute_interrupt(taas_kernel *k) {
    if (!k->running) {
        taas_log("interrupt with no cell running: nothing to interrupt");
        return;
    }
    taas_interp_interrupt(k->interp);
    taas_execute_resume(k);
}

void taas_execute_abort(taas_kernel *k, void *sock, const taas_msg *msg) {
    taas_log("aborting a queued execute_request after an error");
    json_t *md = json_pack("{s:s}", "status", "aborted");
    taas_session_send(k->session, sock, msg->ids, msg->n_ids, "execute_reply", msg->header, md,
                      json_pack("{s:s}", "status", "aborted"));
}

void taas_execute_discard(taas_kernel *k) {
    if (k->running) exec_free(k->running);
    k->running = NULL;
    k->current = NULL;
}
