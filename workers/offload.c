/* Joining a job from a worker, and the "offload" section of its spec. */
#include "offload.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "errnames.h"
#include "safetensors.h"
#include "fdio.h"
#include "jobctl.h"
#include "role.h"

/* Seconds for the kernel to answer a hello with the spec. */
#define SPEC_TIMEOUT_S 60.0
/* how long a worker that is done waits for the kernel to take its last word */
#define LEAVE_TIMEOUT_S 10.0

static int bad(taas_error *err, const char *what) {
    taas_error_set(err, TAAS_ERR_VALUE, TAAS_NOPOS, "the job spec's \"offload\" section %s", what);
    taas_error_hint(err, "taas-worker trainer and loader run the specs taas-kernel sends them (docs/jobspec.md); "
                         "install the kernel and the workers together");
    return -1;
}

int taas_offload_parse(const json_t *job, taas_offload *o, taas_error *err) {
    memset(o, 0, sizeof *o);
    const json_t *off = json_object_get(job, "offload");
    if (!json_is_object(off)) return bad(err, "is missing");
    o->bind = json_string_value(json_object_get(off, "bind"));
    const json_t *w = json_object_get(off, "world"), *c = json_object_get(off, "credit");
    const json_t *streams = json_object_get(off, "streams"), *resume = json_object_get(off, "resume");
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
        const json_t *sl = json_object_get(s, "slots");
        if (sl && (!json_is_integer(sl) || json_integer_value(sl) < json_integer_value(m) || json_integer_value(sl) > 256))
            return bad(err, "has a stream whose \"slots\" is not a whole number from its workers to 256");
        o->role[i] = role;
        o->workers[i] = (uint32_t)json_integer_value(m);
        o->slots[i] = sl ? (uint32_t)json_integer_value(sl) : o->workers[i];
        o->facts[i] = json_object_get(s, "facts");
    }
    o->nstreams = (uint32_t)i;
    if (resume) {
        const json_t *e = json_object_get(resume, "epoch"), *t = json_object_get(resume, "step");
        if (!json_is_integer(e) || !json_is_integer(t) || json_integer_value(e) < 0 || json_integer_value(t) < 0)
            return bad(err, "has a \"resume\" without a whole epoch and step");
        o->resume_epoch = (long long)json_integer_value(e);
        o->resume_step = (long long)json_integer_value(t);
    }
    return 0;
}

int taas_offload_stream_of(const taas_offload *o, const char *role) {
    for (uint32_t s = 0; s < o->nstreams; s++)
        if (!strcmp(o->role[s], role)) return (int)s;
    return -1;
}

/* The host of tcp://HOST:PORT (brackets of an IPv6 address removed) into out. */
static int endpoint_host(const char *ep, char *out, size_t n) {
    if (strncmp(ep, "tcp://", 6)) return -1;
    const char *h = ep + 6, *end;
    if (*h == '[') {
        end = strchr(++h, ']');
    } else {
        end = strrchr(h, ':');
    }
    if (!end || (size_t)(end - h) >= n) return -1;
    memcpy(out, h, (size_t)(end - h));
    out[end - h] = '\0';
    return 0;
}

int taas_offload_bind(const taas_offload *o, const char *control, char *out, size_t n, taas_error *err) {
    if (!o->bind) return bad(err, "gives a rank no \"bind\" endpoint");
    if (strcmp(o->bind, "route") != 0) {
        snprintf(out, n, "%s", o->bind);
        return 0;
    }
    /* the address of this host that routes to the kernel's */
    char host[256], addr[64];
    int v6 = 0;
    int bad_endpoint = endpoint_host(control, host, sizeof host) != 0;
    if (bad_endpoint)
        taas_error_set(err, TAAS_ERR_OFFLOAD, TAAS_NOPOS, "the control endpoint %s is not tcp://HOST:PORT", control);
    if (bad_endpoint || taas_zsock_route(host, addr, sizeof addr, &v6, err)) {
        taas_error_prefix(err, "a rank cannot choose its data plane's address: ");
        taas_error_hint(err, "the hosts of the job must reach the kernel's address; set \"kernel_address\" in the "
                             "cluster section of the configuration file (docs/cluster.md)");
        return -1;
    }
    snprintf(out, n, v6 ? "tcp://[%s]:*" : "tcp://%s:*", addr);
    return 0;
}

int taas_offload_private(char *path, size_t n, const char *stem, taas_error *err) {
    const char *tmp = getenv("TMPDIR");
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", stem) >= sizeof p)
        snprintf(p, sizeof p, "/tmp/%s-XXXXXX", stem);
    int fd = mkostemp(p, O_CLOEXEC);
    if (fd < 0 || unlink(p) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot make a private file %s: %s", p, strerror(e));
        taas_error_hint(err, "the worker's temporary folder ($TMPDIR or /tmp on its host) must be writable with "
                             "free space");
        return -1;
    }
    snprintf(path, n, "%s%d", TAAS_ST_HELD, fd);
    return fd;
}

/* The starting weights the kernel sent, into a file of this worker's own. */
static int keep_weights(taas_joined *j, const void *blob, size_t n, taas_error *err) {
    const char *from = json_string_value(json_object_get(j->spec, "weights"));
    snprintf(j->weights_from, sizeof j->weights_from, "%s", from ? from : "the model's weights");
    j->weights_fd = taas_offload_private(j->weights, sizeof j->weights, "taas-weights", err);
    if (j->weights_fd < 0) {
        j->weights[0] = '\0';
        return -1;
    }
    if (taas_write_all(j->weights_fd, blob, n) == 0) {
        json_object_set_new(j->spec, "weights", json_string(j->weights));
        return 0;
    }
    taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "cannot keep the model's weights (%s) in the worker's temporary "
                   "folder: %s", j->weights_from, strerror(errno));
    taas_error_hint(err, "the worker's temporary folder ($TMPDIR or /tmp on its host) must be writable with free "
                         "space");
    return -1;
}

void taas_offload_name_weights(const taas_joined *j, taas_error *err) {
    if (!j->weights[0] || !j->weights_from[0]) return;
    char *texts[] = {err->message, err->hint};
    size_t sizes[] = {sizeof err->message, sizeof err->hint}, n = strlen(j->weights);
    for (int t = 0; t < 2; t++) {
        taas_buf b = {0};
        const char *at = texts[t], *hit;
        while ((hit = strstr(at, j->weights))) {
            int whole = hit[n] < '0' || hit[n] > '9';  /* /proc/self/fd/7, not /proc/self/fd/70 */
            taas_buf_printf(&b, "%.*s%s", (int)(hit - at), at, whole ? j->weights_from : j->weights);
            at = hit + n;
        }
        if (at == texts[t]) continue;
        taas_buf_printf(&b, "%s", at);
        if (b.data) snprintf(texts[t], sizes[t], "%s", b.data);
        taas_buf_free(&b);
    }
}

/* The keys' line from stdin, read a byte at a time so that nothing after it is taken. */
static int read_keys_line(char *out, size_t n) {
    size_t k = 0;
    while (k + 1 < n) {
        char c;
        ssize_t r = read(0, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || c == '\n') break;
        out[k++] = c;
    }
    out[k] = '\0';
    return (int)k;
}

static void *lifeline(void *arg) {
    (void)arg;
    char buf[256];
    for (;;) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
    }
    static const char msg[] = "taas-worker: the kernel's connection ended: stopping\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(TAAS_EXIT_ERROR);
}

/* The first line of a keys file that is this user's and no one else's. */
static int read_keys_file(const char *path, char *out, size_t n, taas_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        int e = errno;
        if (fd >= 0) close(fd);
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "the job's keys file %s %s", path,
                       fd < 0 ? strerror(e) : "is not a file of this user's that only it can read");
        taas_error_hint(err, "the kernel writes it (mode 0600) before it starts the ranks; run the cell again");
        return -1;
    }
    ssize_t r = read(fd, out, n - 1);
    close(fd);
    out[r > 0 ? r : 0] = '\0';
    return 0;
}

/* The keys in the MUNGE credential $TAAS_JOB_MUNGE: `unmunge` decodes it (munged checks that
 * it is this user's and fresh) and writes the payload on stdout. */
static int read_keys_munge(char *out, size_t n, taas_error *err) {
    /* one credential for each task (munged decodes a credential once): a step's task r has
     * its own in TAAS_JOB_MUNGE_r, r its $SLURM_PROCID */
    const char *cred = getenv("TAAS_JOB_MUNGE"), *sock = getenv("TAAS_MUNGE_SOCKET"), *procid = getenv("SLURM_PROCID");
    char name[64];
    if ((!cred || !cred[0]) && procid && strlen(procid) < 16) {
        snprintf(name, sizeof name, "TAAS_JOB_MUNGE_%s", procid);
        cred = getenv(name);
    }
    if (!cred || !cred[0]) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "$TAAS_JOB_MUNGE is not set: the job's keys did not come");
        taas_error_hint(err, "the kernel starts the workers of a Slurm job with it; run the cell again");
        return -1;
    }
    int in[2], outp[2];
    if (pipe2(in, O_CLOEXEC) < 0) {
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "pipe: %s", strerror(errno));
        return -1; /* said here: the caller reads out on 0, and taas_error_set's -1 is in another file */
    }
    if (pipe2(outp, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        taas_error_set(err, TAAS_ERR_IO, TAAS_NOPOS, "pipe: %s", strerror(errno));
        return -1; /* as above */
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    char *argv[] = {"unmunge", "--metadata=/dev/null", sock && sock[0] ? "--socket" : NULL, (char *)sock, NULL};
    pid_t pid;
    extern char **environ;
    int rc = posix_spawnp(&pid, "unmunge", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    if (rc == 0) taas_write_all(in[1], cred, strlen(cred));  /* unmunge's end says if it failed */
    close(in[1]);
    size_t got = 0;
    while (rc == 0 && got + 1 < n) {
        ssize_t r = read(outp[0], out + got, n - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    out[got] = '\0';
    close(outp[0]);
    int st = 0;
    if (rc == 0) waitpid(pid, &st, 0);
    if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        taas_error_set(err, TAAS_ERR_SECURITY, TAAS_NOPOS, "cannot open the job's keys with unmunge: %s",
                       rc ? strerror(rc) : "munged refused the credential (another user's, expired, or another "
                                           "cluster's key)");
        taas_error_hint(err, "every host of the Slurm cluster needs munge (apt-get install munge) with the "
                             "cluster's key; a credential lasts munged's TTL (5 minutes by default)");
        return -1;
    }
    return 0;
}

int taas_offload_join(const char *control, const char *identity, json_t *hello, const char *keys_from,
                      taas_joined *j, taas_error *err) {
    memset(j, 0, sizeof *j);
    char line[TAAS_ZKEYS_TEXT + 8];
    const char *keys = getenv(TAAS_ZKEYS_ENV);
    if (keys_from && !strcmp(keys_from, "-")) {
        read_keys_line(line, sizeof line);
        keys = line;
        pthread_t t;
        if (pthread_create(&t, NULL, lifeline, NULL) == 0) pthread_detach(t);
    } else if (keys_from && !strcmp(keys_from, "munge")) {
        if (read_keys_munge(line, sizeof line, err)) {
            json_decref(hello);
            return -1;
        }
        keys = line;
    } else if (keys_from) {
        if (read_keys_file(keys_from, line, sizeof line, err)) {
            json_decref(hello);
            return -1;
        }
        keys = line;
    }
    if (keys && keys[0]) {
        if (taas_zkeys_parse(keys, !keys_from                 ? "$" TAAS_ZKEYS_ENV
                                   : !strcmp(keys_from, "-")     ? "the first line of stdin"
                                   : !strcmp(keys_from, "munge") ? "the MUNGE credential $TAAS_JOB_MUNGE"
                                                                 : keys_from,
                             &j->keys, err)) {
            json_decref(hello);
            return -1;
        }
        j->curve = 1;
    }
    unsetenv(TAAS_ZKEYS_ENV);  /* the worker's children (none planned) are not the job's */
    explicit_bzero(line, sizeof line);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_object_set_new(hello, "host", taas_cli_text(host));
    json_object_set_new(hello, "pid", json_integer((json_int_t)getpid()));
    if (!(j->ctl = taas_ctl_client_new(control, j->curve ? &j->keys : NULL, identity, hello, err))) return -1;
    void *blob = NULL;
    size_t n = 0;
    json_t *msg = taas_ctl_client_wait(j->ctl, "spec", SPEC_TIMEOUT_S, &blob, &n, err);
    if (!msg) return -1;
    j->spec = json_incref(json_object_get(msg, "spec"));
    json_decref(msg);
    int rc = 0;
    if (!json_is_object(j->spec)) rc = bad(err, "did not come: the kernel's spec message has no spec");
    else if (blob && n) rc = keep_weights(j, blob, n, err);
    free(blob);
    return rc;
}

void taas_offload_leave(taas_joined *j) {
    taas_ctl_client_leave(j->ctl, LEAVE_TIMEOUT_S);
    taas_ctl_client_free(j->ctl);  /* sends what is queued: the error, or done and the weights */
    json_decref(j->spec);
    if (j->weights[0]) close(j->weights_fd);
    explicit_bzero(j, sizeof *j);
}

void taas_offload_report(taas_ctl_client *c, const taas_error *err, long long step) {
    if (!c) {
        taas_cli_report(stderr, err);
        return;
    }
    json_t *b = taas_ctl_body("error");
    json_object_set_new(b, "ename", taas_cli_text(err->ename[0] ? err->ename : TAAS_ERR_INTERNAL));
    json_object_set_new(b, "message", taas_cli_text(err->message));
    json_object_set_new(b, "hint", taas_cli_text(err->hint));
    json_object_set_new(b, "step", step > 0 ? json_integer(step) : json_null());
    taas_error e;
    taas_ctl_client_send(c, b, NULL, 0, &e);
}
