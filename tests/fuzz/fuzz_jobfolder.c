/* A detached job's folder (kernel/job/detached.h): its state.json, journal.jsonl and
 * view.json as the user's folder may hold them, read by what reads them: the jobs() table
 * (taas_detached_list, rendered as text and HTML), the state attach() follows and the error
 * of a job that ended (taas_detached_ended_error), cancel() (no lock file: nothing holds it,
 * so nothing is ever signalled) and attach()'s reading of the journal and the view
 * (taas_follow_poll). A healthy job sits beside the fuzzed one: a damaged folder must never
 * hide it, and the table must always render.
 *
 * Input: state.json, 0x1f, journal.jsonl, 0x1f, view.json; a part that is absent is a file
 * that is not there. */
#include <stdlib.h>
#include <string.h>

#include "detached.h"
#include "errnames.h"
#include "fuzz_io.h"
#include "fuzz_util.h"
#include "result.h"

static const char *const FILES[] = {"state.json", "journal.jsonl", "view.json"};
static const char JOB[] = "job-20000101-000000-fuzzed", GOOD[] = "job-20000101-000000-good";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char rel[128];
    snprintf(rel, sizeof rel, "jobs/%s/state.json", GOOD);
    static const char good[] = "{\"id\": \"job-20000101-000000-good\", \"state\": \"done\", \"created\": 1}";
    fz_write(rel, good, sizeof good - 1);
    setenv("TAAS_JOBS_DIR", fz_path("jobs"), 1);
    return 0;
}

/* The table has a row for the healthy job, and renders as text and HTML. */
static void check_list(void) {
    taas_error err;
    taas_error_clear(&err);
    json_t *list = taas_detached_list(&err);
    if (!list) abort();
    int good = 0;
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) good += !strcmp(json_string_value(json_object_get(s, "id")), GOOD);
    if (good != 1) abort();
    taas_value *v = taas_result_of_jobs(list);
    json_t *b = taas_result_mimebundle(v);
    const char *text = json_string_value(json_object_get(b, "text/plain"));
    if (!text || !strstr(text, GOOD) || !json_is_string(json_object_get(b, "text/html"))) abort();
    json_decref(b);
    taas_unref(v);
    json_decref(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3];
    size_t n = fz_split(data, size, 0x1f, part, len, 3);
    char rel[128], dir[640];
    snprintf(dir, sizeof dir, "%s", fz_path("jobs"));
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", JOB);
    for (size_t i = 0; i < 3; i++) {
        snprintf(rel, sizeof rel, "jobs/%s/%s", JOB, FILES[i]);
        if (i < n) fz_write(rel, part[i], len[i]);
        else unlink(fz_path(rel));
    }
    check_list();

    json_t *state = taas_detached_state(dir);
    const char *st = json_string_value(json_object_get(state, "state"));
    if (state && !st) abort();  /* every state the readers pass on has one */
    taas_error err;
    taas_error_clear(&err);
    if (st && strcmp(st, "done") && strcmp(st, "running") && strcmp(st, "starting")) {
        taas_detached_ended_error(state, JOB, dir, size && (data[0] & 1) ? "net" : NULL, 0, &err);
        /* a NULL string printed is "(null)", unless the folder's own text says it */
        if (!taas_error_name_known(err.ename) || (strstr(err.message, "(null)") && !memmem(data, size, "(null)", 6)))
            abort();
    }
    json_decref(state);
    taas_error_clear(&err);
    if (taas_detached_cancel(dir, &err) == 0) abort();  /* no lock: there is no coordinator */

    taas_error_clear(&err);
    taas_follow *f = taas_follow_open(dir, &err);
    if (!f) abort();
    json_t *end = NULL;
    if (taas_follow_poll(f, &IO, &end) == 0) json_decref(end);
    taas_follow_free(f);
    return 0;
}
