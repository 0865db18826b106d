/* The configuration file's "cluster" section (cluster.h): where #pragma taas jobs run.
 * Read from the same file as the machine configurations (config_file.h), on every call, and
 * checked as strictly: every value that reaches a command line (ssh, mpirun, sbatch) or a
 * shell is checked here to be a plain word (common/shell.h), so that none can be read as an
 * option, split into two words or run as a command (docs/cluster.md). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cluster.h"
#include "config_file.h"
#include "cpu.h"
#include "pragma.h"
#include "shell.h"
#include "utf8.h"

#define DEFAULT_LOADERS "c1.4"
#define WHERE "\"cluster\""

static const char *const CLUSTER_KEYS[] = {"backend", "kernel_address", "loaders", "worker", "ssh_config", "hosts",
                                           "munge_socket", "kernels", "ssh"};
#define NCLUSTER_KEYS (sizeof CLUSTER_KEYS / sizeof CLUSTER_KEYS[0])
static const char *const HOST_KEYS[] = {"name", "address", "gpus", "cpus"};
#define NHOST_KEYS (sizeof HOST_KEYS / sizeof HOST_KEYS[0])
static const char *const BACKENDS[] = {"local", "slurm", "ssh"};
#define NBACKENDS (sizeof BACKENDS / sizeof BACKENDS[0])

#define SSH_EXAMPLE "\"cluster\": {\"backend\": \"ssh\", \"hosts\": [{\"name\": \"gpu1\", \"address\": \"10.0.0.21\", " \
                    "\"gpus\": 8, \"cpus\": 96}, {\"name\": \"cpu1\", \"gpus\": 0, \"cpus\": 32}]}"
#define CLUSTER_HOLDS "\"cluster\" holds \"backend\" (required: \"local\", \"slurm\" or \"ssh\") and optionally " \
                      "\"kernel_address\", \"loaders\" (a machine configuration without GPUs), \"worker\" " \
                      "(taas-worker's absolute path on the hosts), \"kernels\" (the ranks' kernel set), for " \
                      "ssh \"hosts\" (required), \"ssh_config\" and \"ssh\", for slurm \"munge_socket\"; see " \
                      "docs/pragma.md"
#define HOST_HOLDS "a host holds \"name\" (required), \"address\" (optional: what ssh connects to; default " \
                   "the name), \"gpus\" (required, 0 to 4096) and \"cpus\" (required, 1 to 65536), e.g. " \
                   "{\"name\": \"gpu1\", \"address\": \"10.0.0.21\", \"gpus\": 8, \"cpus\": 96}"
#define BACKENDS_ARE "local runs the job on this machine, slurm submits it to Slurm, ssh runs it on the " \
                     "\"hosts\" over ssh; see docs/cluster.md"

/* v must be a string; "where: "key" must be a string, not <kind>" otherwise. */
static int need_string(const char *path, const char *where, const char *key, const json_t *v,
                       const char *hint, taas_error *err) {
    if (json_is_string(v)) return 0;
    return taas_cfile_error(err, path, hint, "%s: \"%s\" must be a string, not %s", where, key,
                            taas_cfile_kind(v));
}

/* A value that reaches a command line or a shell (Open MPI's ssh agent string, a command ssh
 * runs on a host, ssh's host argument): a plain word (shell.h), refused otherwise, never
 * quoted; with absolute, an absolute path. what says what the value is and why it must be
 * plain, example is a valid value. */
static int parse_plain(const char *path, const char *where, const char *key, const json_t *v, int absolute,
                       const char *what, const char *example, char *dst, size_t cap, taas_error *err) {
    char shown[200], ch[64], hint[512];
    snprintf(hint, sizeof hint, "\"%s\" %s: %s of 1 to %zu bytes of %s; e.g. \"%s\": \"%s\"", key, what,
             absolute ? "an absolute path" : "a word", cap - 1, TAAS_SHELL_PLAIN_RULE, key, example);
    if (need_string(path, where, key, v, hint, err)) return -1;
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len == 0) return taas_cfile_error(err, path, hint, "%s: \"%s\" is empty", where, key);
    if (len >= cap)
        return taas_cfile_error(err, path, hint, "%s: \"%s\" is %zu bytes long; at most %zu fit", where, key,
                                len, cap - 1);
    if (absolute && s[0] != '/')
        return taas_cfile_error(err, path, hint, "%s: \"%s\" must be an absolute path (starting with '/'), not %s",
                                where, key, taas_cfile_shown(shown, sizeof shown, v));
    const char *bad = taas_shell_unplain(s);
    if (bad == s && s[0] == '-')
        return taas_cfile_error(err, path, hint, "%s: \"%s\" starts with '-', which a command would read as an "
                                "option: %s", where, key, taas_cfile_shown(shown, sizeof shown, v));
    if (bad)
        return taas_cfile_error(err, path, hint, "%s: \"%s\" may not contain %s: %s", where, key,
                                taas_utf8_char_name(ch, sizeof ch, bad), taas_cfile_shown(shown, sizeof shown, v));
    memcpy(dst, s, len + 1);
    return 0;
}

/* Why each value must be plain (docs/cluster.md), for the hints. */
#define WHY_AGENT "is in the ssh agent string that Open MPI hands to a shell"
#define WHY_REMOTE "is in the commands ssh runs through the hosts' shell"
#define WHY_HOST "is what ssh connects to, which its config's ProxyCommand (%h) hands to a shell"
#define WHY_MUNGE "is on munge's command line"

static int host_int(const char *path, const char *where, const json_t *host, const char *key, int lo, int hi,
                    int *out, taas_error *err) {
    char shown[200];
    const json_t *v = json_object_get(host, key);
    if (!v) return taas_cfile_error(err, path, HOST_HOLDS, "%s has no \"%s\"", where, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return taas_cfile_error(err, path, HOST_HOLDS, "%s: \"%s\" must be a whole number from %d to %d, not %s",
                                where, key, lo, hi, taas_cfile_shown(shown, sizeof shown, v));
    *out = (int)json_integer_value(v);
    return 0;
}

/* hosts[i]: called "host 'NAME'" in messages, or "host i+1" while it has no valid name. */
static int parse_host(const char *path, const json_t *hosts, size_t i, taas_cluster_host *h, taas_error *err) {
    const json_t *v = json_array_get(hosts, i);
    char where[128], shown[200];
    if (!json_is_object(v))
        return taas_cfile_error(err, path, HOST_HOLDS, WHERE ": host %zu must be an object, not %s", i + 1,
                                taas_cfile_kind(v));
    const json_t *name = json_object_get(v, "name");
    if (json_is_string(name) && taas_cfile_valid_name(json_string_value(name)))
        snprintf(where, sizeof where, WHERE ": host '%s'", json_string_value(name));
    else
        snprintf(where, sizeof where, WHERE ": host %zu", i + 1);
    const char *k;
    json_t *kv;
    json_object_foreach((json_t *)v, k, kv) {
        size_t j = 0;
        while (j < NHOST_KEYS && strcmp(k, HOST_KEYS[j])) j++;
        if (j == NHOST_KEYS) {
            char hint[512], dym[160];
            snprintf(hint, sizeof hint, "%s%s", taas_cfile_did_you_mean(dym, sizeof dym, k, HOST_KEYS, NHOST_KEYS),
                     HOST_HOLDS);
            return taas_cfile_error(err, path, hint, "%s has an unknown key \"%s\"", where,
                                    taas_cfile_quoted(shown, sizeof shown, k));
        }
    }
    if (!name) return taas_cfile_error(err, path, HOST_HOLDS, "%s has no \"name\"", where);
    if (need_string(path, where, "name", name, HOST_HOLDS, err)) return -1;
    if (!taas_cfile_valid_name(json_string_value(name)))
        return taas_cfile_error(err, path,
                                TAAS_CONFIG_NAME_RULE ", e.g. \"gpu1\"; the host's \"address\" can be any address "
                                "ssh connects to",
                                WHERE ": host name '%s' is not valid",
                                taas_cfile_quoted(shown, sizeof shown, json_string_value(name)));
    snprintf(h->name, sizeof h->name, "%s", json_string_value(name));
    const json_t *addr = json_object_get(v, "address");
    if (addr) {
        if (parse_plain(path, where, "address", addr, 0, "(a host name, user@host or an IP address) " WHY_HOST,
                        "10.0.0.21", h->address, sizeof h->address, err))
            return -1;
    } else if (h->name[0] == '-') {
        return taas_cfile_error(err, path, "give the host an \"address\", e.g. \"address\": \"10.0.0.21\"",
                                "%s: a name that starts with '-' cannot be what ssh connects to (it would read it "
                                "as an option)", where);
    } else {
        snprintf(h->address, sizeof h->address, "%s", h->name);
    }
    if (host_int(path, where, v, "gpus", 0, TAAS_CONFIG_MAX_GPUS, &h->gpus, err)) return -1;
    if (host_int(path, where, v, "cpus", 1, TAAS_CONFIG_MAX_CPUS, &h->cpus, err)) return -1;
    return 0;
}

static int parse_hosts(const char *path, const json_t *hosts, taas_cluster *c, taas_error *err) {
    if (!json_is_array(hosts))
        return taas_cfile_error(err, path, "write " SSH_EXAMPLE,
                                WHERE ": \"hosts\" must be an array of hosts, not %s", taas_cfile_kind(hosts));
    size_t n = json_array_size(hosts);
    if (n < 1 || n > TAAS_CLUSTER_MAX_HOSTS)
        return taas_cfile_error(err, path, "write " SSH_EXAMPLE,
                                WHERE ": \"hosts\" has %zu hosts; it takes 1 to %d", n, TAAS_CLUSTER_MAX_HOSTS);
    c->hosts = calloc(n, sizeof *c->hosts);
    if (!c->hosts) return taas_cfile_error(err, path, "", "out of memory reading %zu hosts", n);
    int gpus = 0;
    for (size_t i = 0; i < n; i++) {
        if (parse_host(path, hosts, i, &c->hosts[i], err)) return -1;
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(c->hosts[j].name, c->hosts[i].name))
                return taas_cfile_error(err, path, "give each host a name of its own; one machine is one host",
                                        WHERE ": host '%s' is listed twice (hosts %zu and %zu)",
                                        c->hosts[i].name, j + 1, i + 1);
        }
        c->nhosts = i + 1;
        if (c->hosts[i].gpus > 0) gpus = 1;
    }
    if (!gpus)
        return taas_cfile_error(err, path,
                                "the ranks run on hosts with GPUs: give at least one host its \"gpus\", e.g. "
                                "{\"name\": \"gpu1\", \"gpus\": 8, \"cpus\": 96}",
                                WHERE ": no host has GPUs; backend ssh needs at least one host with \"gpus\" above 0");
    return 0;
}

/* The loaders' machine configuration must exist and have no GPUs; name is the file's
 * "loaders" (given) or the default. */
static int check_loaders(const char *path, const char *name, int given, taas_cluster *c, taas_error *err) {
    taas_machine_config m;
    if (taas_config_find(name, &m, err)) {
        if (!strcmp(err->ename, TAAS_CONFIG_ERROR)) return -1; /* the file's "configurations" */
        /* an unknown name: taas_config_find's message and hint, as an error of this file */
        char msg[sizeof err->message], hint[sizeof err->hint];
        memcpy(msg, err->message, sizeof msg);
        memcpy(hint, err->hint, sizeof hint);
        return taas_cfile_error(err, path, hint, WHERE ": \"loaders\": %s", msg);
    }
    if (m.gpus_per_machine == 0) {
        snprintf(c->loaders, sizeof c->loaders, "%s", m.name);
        return 0;
    }
    /* the hint lists the configurations without GPUs */
    taas_buf hint = TAAS_BUF_INIT;
    taas_buf_puts(&hint, "loader workers run on machines without GPUs: name one");
    taas_machine_config *all;
    size_t n;
    taas_error ignored;
    if (taas_config_list(&all, &n, &ignored) == 0) {
        int listed = 0;
        for (size_t i = 0; i < n; i++) {
            if (all[i].gpus_per_machine) continue;
            taas_buf_printf(&hint, "%s%s", listed++ ? ", " : " (", all[i].name);
        }
        if (listed) taas_buf_puts(&hint, ")");
        free(all);
    }
    taas_buf_puts(&hint, ", or add one with \"gpus\": 0 to \"configurations\"");
    char text[512];
    taas_utf8_clip(text, sizeof text, hint.data ? hint.data : "", hint.len, sizeof text);
    taas_buf_free(&hint);
    return taas_cfile_error(err, path, text, WHERE ": \"loaders\" is %s%s, a machine with %d GPUs", m.name,
                            given ? "" : " (the default)", m.gpus_per_machine);
}

static int parse_cluster(const char *path, const json_t *sec, taas_cluster *c, taas_error *err) {
    char shown[200];
    if (!json_is_object(sec))
        return taas_cfile_error(err, path, "write " SSH_EXAMPLE, WHERE " must be an object, not %s",
                                taas_cfile_kind(sec));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sec, k, v) {
        size_t j = 0;
        while (j < NCLUSTER_KEYS && strcmp(k, CLUSTER_KEYS[j])) j++;
        if (j == NCLUSTER_KEYS) {
            char hint[512], dym[160];
            snprintf(hint, sizeof hint, "%s%s",
                     taas_cfile_did_you_mean(dym, sizeof dym, k, CLUSTER_KEYS, NCLUSTER_KEYS), CLUSTER_HOLDS);
            return taas_cfile_error(err, path, hint, WHERE " has an unknown key \"%s\"",
                                    taas_cfile_quoted(shown, sizeof shown, k));
        }
    }

    /* "backend" first: what else is allowed depends on it */
    const json_t *b = json_object_get(sec, "backend");
    if (!b)
        return taas_cfile_error(err, path, "add \"backend\": \"local\", \"slurm\" or \"ssh\"; " BACKENDS_ARE,
                                WHERE " has no \"backend\"");
    if (need_string(path, WHERE, "backend", b, "write \"backend\": \"local\", \"slurm\" or \"ssh\"", err))
        return -1;
    const char *bs = json_string_value(b);
    size_t bi = 0;
    while (bi < NBACKENDS && strcmp(bs, BACKENDS[bi])) bi++;
    if (bi == NBACKENDS) {
        char hint[512], dym[160];
        snprintf(hint, sizeof hint, "%s%s", taas_cfile_did_you_mean(dym, sizeof dym, bs, BACKENDS, NBACKENDS),
                 BACKENDS_ARE);
        return taas_cfile_error(err, path, hint, WHERE ": \"backend\" must be \"local\", \"slurm\" or \"ssh\", not %s",
                                taas_cfile_shown(shown, sizeof shown, b));
    }
    snprintf(c->backend, sizeof c->backend, "%s", BACKENDS[bi]);
    int ssh = !strcmp(c->backend, "ssh");

    const json_t *hosts = json_object_get(sec, "hosts");
    if (hosts && !ssh)
        return taas_cfile_error(err, path,
                                !strcmp(c->backend, "slurm")
                                    ? "Slurm chooses the machines: remove \"hosts\", and say where the machines are "
                                      "with a configuration's \"partition\", \"constraint\" or \"gres\""
                                    : "backend local runs the job on this machine: remove \"hosts\", or write "
                                      "\"backend\": \"ssh\" to run on them",
                                WHERE ": \"hosts\" is for backend ssh only, not %s", c->backend);
    if (!hosts && ssh)
        return taas_cfile_error(err, path, "list the machines: " SSH_EXAMPLE, WHERE ": backend ssh needs \"hosts\"");
    const json_t *sc = json_object_get(sec, "ssh_config");
    if (sc && !ssh)
        return taas_cfile_error(err, path,
                                "\"ssh_config\" names the file `ssh -F` reads for backend ssh: remove it, or write "
                                "\"backend\": \"ssh\"",
                                WHERE ": \"ssh_config\" is for backend ssh only, not %s", c->backend);

    const json_t *sp = json_object_get(sec, "ssh");
    if (sp && !ssh)
        return taas_cfile_error(err, path,
                                "\"ssh\" names the ssh program of backend ssh: remove it, or write \"backend\": \"ssh\"",
                                WHERE ": \"ssh\" is for backend ssh only, not %s", c->backend);
    if (sp && parse_plain(path, WHERE, "ssh", sp, 1, "(the ssh program) " WHY_AGENT, "/usr/bin/ssh", c->ssh,
                          sizeof c->ssh, err))
        return -1;
    const json_t *ms = json_object_get(sec, "munge_socket");
    if (ms && strcmp(c->backend, "slurm") != 0)
        return taas_cfile_error(err, path,
                                "\"munge_socket\" names munged's socket for backend slurm: remove it, or write "
                                "\"backend\": \"slurm\"",
                                WHERE ": \"munge_socket\" is for backend slurm only, not %s", c->backend);
    if (ms && parse_plain(path, WHERE, "munge_socket", ms, 1, "(munged's socket) " WHY_MUNGE,
                          "/run/munge/munge.socket.2", c->munge_socket, sizeof c->munge_socket, err))
        return -1;
    const json_t *ka = json_object_get(sec, "kernel_address");
    if (ka && parse_plain(path, WHERE, "kernel_address", ka, 0,
                          "(the address the hosts reach the kernel at, a host name or an IP address of this "
                          "machine) " WHY_REMOTE, "10.0.0.1", c->kernel_address, sizeof c->kernel_address, err))
        return -1;
    const json_t *w = json_object_get(sec, "worker");
    if (w && parse_plain(path, WHERE, "worker", w, 1, "(taas-worker on the hosts) " WHY_REMOTE,
                         "/usr/local/bin/taas-worker", c->worker, sizeof c->worker, err))
        return -1;
    if (sc && parse_plain(path, WHERE, "ssh_config", sc, 1, "(the file ssh -F reads) " WHY_AGENT,
                          "/home/me/.ssh/config", c->ssh_config, sizeof c->ssh_config, err))
        return -1;
    const json_t *ks = json_object_get(sec, "kernels");
    c->kernels = -1;
    if (ks) {
        const char *hint = "\"kernels\" names the kernel set every rank runs: \"avx512\", \"avx2\" or \"generic\" "
                           "(leave it out for the best every rank's host runs); see docs/training.md";
        if (need_string(path, WHERE, "kernels", ks, hint, err)) return -1;
        if ((c->kernels = taas_cpu_parse(json_string_value(ks))) < 0)
            return taas_cfile_error(err, path, hint, WHERE ": \"kernels\" must be \"avx512\", \"avx2\" or \"generic\", "
                                    "not %s", taas_cfile_shown(shown, sizeof shown, ks));
    }
    const json_t *l = json_object_get(sec, "loaders");
    if (l && need_string(path, WHERE, "loaders", l,
                         "name a machine configuration without GPUs, e.g. \"loaders\": \"" DEFAULT_LOADERS "\"", err))
        return -1;
    if (hosts && parse_hosts(path, hosts, c, err)) return -1;
    return check_loaders(path, l ? json_string_value(l) : DEFAULT_LOADERS, l != NULL, c, err);
}

static void defaults(taas_cluster *c) {
    memset(c, 0, sizeof *c);
    c->kernels = -1;
    snprintf(c->backend, sizeof c->backend, "local");
    snprintf(c->loaders, sizeof c->loaders, DEFAULT_LOADERS);
}

int taas_cluster_load(taas_cluster *out, taas_error *err) {
    memset(out, 0, sizeof *out);
    taas_cluster c;
    defaults(&c);
    char path[sizeof c.path];
    if (taas_cfile_path(path, sizeof path, err)) return -1;
    json_t *root;
    if (taas_cfile_load(path, &root, err)) return -1;
    const json_t *sec = root ? json_object_get(root, "cluster") : NULL;
    if (!sec) {
        json_decref(root);
        *out = c;
        return 0;
    }
    int rc = parse_cluster(path, sec, &c, err);
    json_decref(root);
    if (rc) {
        taas_cluster_free(&c);
        return -1;
    }
    memcpy(c.path, path, sizeof c.path);
    *out = c;
    return 0;
}

void taas_cluster_free(taas_cluster *c) {
    if (!c) return;
    free(c->hosts);
    memset(c, 0, sizeof *c);
}
