/* The "offload" section of a job spec, and reaching the kernel from a worker of the job. */
#include "offload.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jobctl.h"
#include "role.h"

static const taas_srcpos NOPOS = {0, 0};

static int bad(taas_error *err, const char *what) {
    taas_error_set(err, "TaasValueError", NOPOS, "the job spec's \"offload\" section %s", what);
    taas_error_hint(err, "taas-worker trainer and loader run the specs taas-kernel writes for #pragma taas cells "
                         "(docs/jobspec.md)");
    return -1;
}

int taas_offload_parse(const json_t *job, taas_offload *o, taas_error *err) {
    memset(o, 0, sizeof *o);
    const json_t *off = json_object_get(job, "offload");
    if (!json_is_object(off)) return bad(err, "is missing");
    o->control = json_string_value(json_object_get(off, "control"));
    o->bind = json_string_value(json_object_get(off, "bind"));
    const json_t *w = json_object_get(off, "world"), *c = json_object_get(off, "credit");
    const json_t *streams = json_object_get(off, "streams");
    if (!o->control || !o->bind) return bad(err, "has no \"control\" or \"bind\" endpoint");
    if (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > 65536)
        return bad(err, "has no valid \"world\" (1 to 65536 ranks)");
    if (!json_is_integer(c) || json_integer_value(c) < 1 || json_integer_value(c) > 1024)
        return bad(err, "has no valid \"credit\" (1 to 1024 batches)");
    if (!json_is_array(streams) || json_array_size(streams) > TAAS_OFFLOAD_MAX_STREAMS)
        return bad(err, "has no \"streams\" list of at most two loaders");
    o->world = (uint32_t)json_integer_value(w);
    o->credit = (uint32_t)json_integer_value(c);
    size_t i;
    const json_t *s;
    json_array_foreach(streams, i, s) {
        const char *role = json_string_value(json_object_get(s, "role"));
        const json_t *m = json_object_get(s, "workers");
        if (!role || (strcmp(role, "train") && strcmp(role, "validate")) || !json_is_integer(m) ||
            json_integer_value(m) < 1 || json_integer_value(m) > 256)
            return bad(err, "has a stream without a role (train or validate) or 1 to 256 workers");
        o->role[i] = role;
        o->workers[i] = (uint32_t)json_integer_value(m);
        o->facts[i] = json_object_get(s, "facts");
    }
    o->nstreams = (uint32_t)i;
    return 0;
}

int taas_offload_stream_of(const taas_offload *o, const char *role) {
    for (uint32_t s = 0; s < o->nstreams; s++)
        if (!strcmp(o->role[s], role)) return (int)s;
    return -1;
}

taas_ctl_client *taas_offload_connect(const taas_offload *o, const char *identity, json_t *hello, taas_error *err) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_object_set_new(hello, "host", taas_cli_text(host));
    json_object_set_new(hello, "pid", json_integer((json_int_t)getpid()));
    return taas_ctl_client_new(o->control, identity, hello, err);
}

void taas_offload_report(taas_ctl_client *c, const taas_error *err, long long step) {
    if (!c) {
        taas_cli_report(stderr, err);
        return;
    }
    json_t *b = taas_ctl_body("error");
    json_object_set_new(b, "ename", taas_cli_text(err->ename[0] ? err->ename : "TaasError"));
    json_object_set_new(b, "message", taas_cli_text(err->message));
    json_object_set_new(b, "hint", taas_cli_text(err->hint));
    json_object_set_new(b, "step", step > 0 ? json_integer(step) : json_null());
    taas_error e;
    taas_ctl_client_send(c, b, NULL, 0, &e);
}
