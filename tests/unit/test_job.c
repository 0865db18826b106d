/* kernel/job: the job state machine driven through every transition with real processes
 * behind the backend table: the local backend's taas-worker ranks (mpirun) and loader
 * workers on a small fit of Debian's Fashion-MNIST (start, progress, the weights, done), a
 * loader that dies (replaced; the same checksums), a rank that dies (the job fails, naming
 * it), the stop button (the weights of the last step; no process left), a rank's own error,
 * a backend of the test's whose "ranks" never say hello (the start timeout), and one whose
 * launcher reports a rank's death and hangs, as Open MPI 4.1's mpirun may (the report ends it), and
 * the ssh backend's programs from the environment refused unless plain. A test that
 * needs the job running holds it once every worker is there: it stops rank 1 (SIGSTOP), so
 * no step can finish and the loaders stop at their credit window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmocka_testutil.h"
#include "backend_procs.h"
#include "buf.h"
#include "clock.h"
#include "job_priv.h"

#define FASHION "/usr/share/datasets/fashion-mnist"

static taas_buf OUT;  /* everything the job wrote to the cell: "[stdout]..." */

static void on_stream(void *ctx, const char *name, const char *text) {
    (void)ctx;
    taas_buf_printf(&OUT, "[%s]%s", name, text);
}

static void on_display(void *ctx, json_t *data, json_t *metadata, const char *display_id, int update) {
    (void)ctx;
    (void)display_id;
    (void)update;
    json_decref(data);
    json_decref(metadata);
}

static const taas_io IO = {.stream = on_stream, .display = on_display};

typedef struct fixture {
    char dir[64], weights[128], config[128];
    json_t *spec, *facts;
    taas_pragma pr;
    taas_job_stream streams[1];
    taas_job_cfg cfg;
} fixture;

static json_t *fit_spec(double lr, long long units) {
    json_t *s = json_pack(
        "{s:i, s:s, s:{s:s, s:[{s:s}, {s:s, s:i, s:i}, {s:s}, {s:s, s:i, s:i}, {s:s, s:i}]}, s:n, "
        "s:{s:s, s:i, s:b, s:{s:s, s:s, s:b, s:{s:s}}}, s:n, s:i, s:I, s:{s:s}, s:{s:s, s:f}, s:n, s:i, s:i}",
        "version", 1, "job", "fit", "model", "type", "Sequential", "layers", "type", "Flatten", "type", "Linear",
        "in_features", 784, "out_features", 32, "type", "ReLU", "type", "Linear", "in_features", 32, "out_features",
        10, "type", "LogSoftmax", "dim", 1, "weights", "train", "type", "DataLoader", "batch_size", 32, "shuffle", 1,
        "dataset", "type", "FashionMNIST", "root", FASHION, "train", 1, "transform", "type", "ToTensor", "validate",
        "epochs", 1, "units", (json_int_t)units, "loss", "type", "NLLLoss", "optimizer", "type", "SGD", "lr", lr,
        "scheduler", "seed", 3, "threads", 1);
    assert_non_null(s);
    return s;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/taas-test-job-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->weights, sizeof f->weights, "%s/weights.safetensors", f->dir);
    snprintf(f->config, sizeof f->config, "%s/no-config.json", f->dir);
    setenv("TAAS_CONFIG", f->config, 1);  /* no file: the local backend */
    setenv("TAAS_WORKER", TAAS_WORKER_PATH, 1);
    f->facts = json_pack("{s:i, s:[i,i,i], s:i}", "size", 60000, "shape", 1, 28, 28, "num_classes", 10);
    f->spec = fit_spec(0.05, 12800);
    f->pr = (taas_pragma){.present = 1, .line = 1, .gpus = 2, .cpus = 2, .units = 12800, .machines = 1,
                          .ranks_per_machine = 2};
    f->streams[0] = (taas_job_stream){"train", "train", f->facts};
    f->cfg = (taas_job_cfg){.pragma = &f->pr, .spec = f->spec, .streams = f->streams, .nstreams = 1, .dir = f->dir,
                            .weights = f->weights, .model = "net"};
    taas_buf_free(&OUT);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    unlink(f->weights);
    rmdir(f->dir);
    json_decref(f->spec);
    json_decref(f->facts);
    free(f);
    return 0;
}

/* Polls the job as the kernel's loop does until it ends or until() holds (when not NULL),
 * at most limit_s: its last poll's result (1 while it runs). */
static int run_until(taas_job *j, int (*until)(taas_job *), double limit_s, taas_error *err) {
    double end = taas_now() + limit_s;
    for (;;) {
        int rc = taas_job_poll(j, &IO, err);
        if (rc != 1 || (until && until(j))) return rc;
        if (taas_now() > end) fail_msg("the job did not get there within %.0f s; it said:\n%s", limit_s, OUT.data);
        struct epoll_event ev;
        double wait = taas_job_deadline(j) - taas_now();
        int ms = wait < 0 ? 0 : wait > 0.1 ? 100 : (int)(wait * 1000) + 1;
        epoll_wait(taas_job_fd(j), &ev, 1, ms);
    }
}

/* Every worker is there (the loaders have made at most a credit window of batches). */
static int ready(taas_job *j) {
    for (int i = 0; i < j->nloaders; i++)
        if (!j->loaders[i].hello) return 0;
    return j->nready == j->world;
}

static int replaced(taas_job *j) {
    return j->loaders[0].gen == 1 && j->loaders[0].hello;
}

/* It runs (a zombie that no one has reaped yet does not). */
static int alive(pid_t p) {
    char path[64], stat[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
    FILE *f = p > 0 ? fopen(path, "r") : NULL;
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *close_paren = strrchr(stat, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z' && close_paren[2] != 'X';
}

/* Waits (bounded) until none of pids runs. */
static int gone_within(const pid_t *pids, int n, double limit_s) {
    double end = taas_now() + limit_s;
    for (;;) {
        int any = 0;
        for (int i = 0; i < n; i++) any |= alive(pids[i]);
        if (!any) return 1;
        if (taas_now() > end) return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static pid_t hold(taas_job *j) {
    pid_t p = j->ranks[1].pid;
    assert_true(alive(p));
    assert_int_equal(kill(p, SIGSTOP), 0);
    return p;
}

static void all_gone(taas_job *j) {
    pid_t pids[16];
    int n = 0;
    for (int r = 0; r < j->world; r++) pids[n++] = j->ranks[r].pid;
    for (int i = 0; i < j->nloaders; i++) pids[n++] = j->loaders[i].pid;
    assert_true(gone_within(pids, n, 2.0));
}

static void test_start_progress_weights_done(void **state) {
    fixture *f = *state;
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    if (!j) fail_msg("%s: %s", err.ename, err.message);
    assert_int_equal(run_until(j, NULL, 300, &err), 0);
    const json_t *done = taas_job_done(j);
    assert_non_null(done);
    assert_int_equal(json_array_size(json_object_get(done, "history")), 1);
    struct stat st;
    assert_int_equal(stat(f->weights, &st), 0);
    assert_true(st.st_size > 100000);
    assert_non_null(strstr(OUT.data, "[stdout]plan: 1 machine \xC3\x97 2 GPUs, 2 loader workers for 'train'"));
    assert_non_null(strstr(OUT.data, "samples trained and their checksum: epoch 1 12,800 0x"));
    assert_int_equal(j->nready, 2);
    taas_job_free(j);
}

static void test_a_loader_lost_is_replaced(void **state) {
    fixture *f = *state;
    taas_error err;
    /* the undisturbed checksum first */
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    assert_int_equal(run_until(j, NULL, 300, &err), 0);
    char *undisturbed = strdup(strstr(OUT.data, "samples trained and their checksum:"));
    taas_job_free(j);
    taas_buf_free(&OUT);

    j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    assert_int_equal(run_until(j, ready, 300, &err), 1);
    pid_t held = hold(j);
    pid_t victim = j->loaders[0].pid;
    if (kill(victim, SIGKILL) != 0) fail_msg("kill %d: %s; the job said:\n%s", (int)victim, strerror(errno), OUT.data);
    assert_int_equal(run_until(j, replaced, 60, &err), 1);
    kill(held, SIGCONT);
    assert_int_equal(run_until(j, NULL, 300, &err), 0);
    char line[128];
    snprintf(line, sizeof line, "[loader train.0] died (pid %d on ", (int)victim);
    assert_non_null(strstr(OUT.data, line));
    assert_non_null(strstr(OUT.data, "a replacement takes over from epoch 1 step "));
    assert_string_equal(strstr(OUT.data, "samples trained and their checksum:"), undisturbed);
    free(undisturbed);
    taas_job_free(j);
}

static void test_a_rank_lost_fails_the_job(void **state) {
    fixture *f = *state;
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    assert_int_equal(run_until(j, ready, 300, &err), 1);
    pid_t held = hold(j);
    kill(held, SIGKILL);
    assert_int_equal(run_until(j, NULL, 60, &err), -1);
    assert_string_equal(err.ename, "TaasWorkerError");
    char want[96];
    snprintf(want, sizeof want, "trainer rank 1 on ");
    assert_non_null(strstr(err.message, want));
    snprintf(want, sizeof want, "(pid %d) exited on signal 9", (int)held);
    assert_non_null(strstr(err.message, want));
    assert_true(err.hint[0]);
    all_gone(j);
    taas_job_free(j);
}

static void test_stop_keeps_the_last_step_and_ends_everything(void **state) {
    fixture *f = *state;
    json_object_set_new(f->spec, "epochs", json_integer(1000));  /* far more than the test waits for */
    f->pr.units = 0;
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    assert_int_equal(run_until(j, ready, 300, &err), 1);
    pid_t pids[16];
    int n = 0;
    for (int r = 0; r < j->world; r++) pids[n++] = j->ranks[r].pid;
    for (int i = 0; i < j->nloaders; i++) pids[n++] = j->loaders[i].pid;
    /* A grace far longer than any step: cancel returns once rank 0's last weights are in, and
     * a loaded machine's slow step is not a failure (no test waits on a guess of a duration) */
    int kept = taas_job_cancel(j, 120.0, &IO);
    assert_int_equal(kept, 1);  /* rank 0 sent the weights of its last step */
    struct stat st;
    assert_int_equal(stat(f->weights, &st), 0);
    assert_true(gone_within(pids, n, 120.0));
    taas_job_free(j);
}

static void test_a_ranks_error_is_the_jobs(void **state) {
    fixture *f = *state;
    json_decref(f->spec);
    f->cfg.spec = f->spec = fit_spec(1e30, 12800);
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    assert_int_equal(run_until(j, NULL, 300, &err), -1);
    assert_string_equal(err.ename, "TaasValueError");
    assert_non_null(strstr(err.message, "the loss is"));
    taas_job_free(j);
}

/* A backend whose "ranks" and "loaders" are real processes that never join: sleep. */
static int sleepy_plan(taas_job *j, const taas_io *io, taas_error *err) {
    (void)io;
    j->be_state = calloc(1, sizeof(job_procs));
    /* the fixture's folder is short */
    if ((size_t)snprintf(j->bind, sizeof j->bind, "ipc://%s/control", j->dir) >= sizeof j->bind ||
        (size_t)snprintf(j->rank_bind, sizeof j->rank_bind, "ipc://%s/data-", j->dir) >= sizeof j->rank_bind)
        return taas_error_set(err, "TaasOffloadError", (taas_srcpos){0, 0}, "the test's folder is too long");
    return 0;
}

/* A shell of the test's as rank (i < 0) or loader i. */
static int spawn_sh(taas_job *j, int i, const char *what, const char *script, taas_error *err) {
    job_procs *p = j->be_state;
    if (!p->loaders) p->loaders = calloc((size_t)j->nloaders + 1, sizeof *p->loaders);
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    char threads[2][48];
    char **env = taas_procs_env(j, NULL, threads);
    taas_proc *proc = taas_procs_spawn(j, what, argv, env, NULL, 0, err);
    free(env);
    if (!proc) return -1;
    taas_procs_set(j, p, i, proc);
    return 0;
}

static int sleepy_launch(taas_job *j, int i, taas_error *err) {
    return spawn_sh(j, i, "sleep", "exec sleep 1000", err);
}

static int sleepy_ranks(taas_job *j, taas_error *err) {
    return sleepy_launch(j, -1, err);
}

static int sleepy_loader(taas_job *j, job_loader *l, taas_error *err) {
    return sleepy_launch(j, (int)(l - j->loaders), err);
}

static void sleepy_watch(taas_job *j) {
    taas_procs_watch(j, j->be_state);
}

static void sleepy_cancel(taas_job *j) {
    taas_procs_kill(j, j->be_state);
}

static void sleepy_free(taas_job *j) {
    taas_procs_free(j, j->be_state);
    free(j->be_state);
    j->be_state = NULL;
}

/* Open MPI 4.1's mpirun when a rank is killed while it connects to PMIx: it reports the
 * rank's death, as its last word, and then never exits; its other rank is in a process group
 * of its own. Here a shell does just that (the report is mpirun's own text). */
static int hung_mpirun_ranks(taas_job *j, taas_error *err) {
    job_procs *p = j->be_state;
    char script[2560];
    snprintf(script, sizeof script,
             "setsid sleep 1000 & echo $! > %s/other-rank; "
             "echo 'mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).'; "
             "exec sleep 1000", j->dir);
    if (spawn_sh(j, -1, "mpirun", script, err)) return -1;
    p->mpirun = 1;
    return 0;
}

static const taas_backend HUNG_MPIRUN = {.name = "hung-mpirun",
                                         .plan = sleepy_plan,
                                         .launch_ranks = hung_mpirun_ranks,
                                         .launch_loader = sleepy_loader,
                                         .watch = sleepy_watch,
                                         .cancel = sleepy_cancel,
                                         .free = sleepy_free};

static void test_mpiruns_report_of_a_death_ends_the_ranks(void **state) {
    fixture *f = *state;
    f->cfg.backend = &HUNG_MPIRUN;
    f->cfg.start_timeout = 3600;  /* the report ends it, not the start timeout */
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    job_procs *p = j->be_state;
    pid_t launcher = p->ranks->pid;
    assert_int_equal(run_until(j, NULL, 60, &err), -1);
    assert_string_equal(err.ename, "TaasWorkerError");
    assert_non_null(strstr(err.message, "trainer rank 1 on vm exited on signal 9 (Killed)"));
    /* the launcher and its rank in a process group of its own are gone */
    char path[128], line[32] = "";
    snprintf(path, sizeof path, "%s/other-rank", f->dir);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    unlink(path);
    pid_t pids[2] = {launcher, (pid_t)atoi(line)};
    assert_true(pids[1] > 1);
    assert_true(gone_within(pids, 2, 10.0));
    taas_job_free(j);
}

static const taas_backend SLEEPY = {.name = "sleepy",
                                    .plan = sleepy_plan,
                                    .launch_ranks = sleepy_ranks,
                                    .launch_loader = sleepy_loader,
                                    .watch = sleepy_watch,
                                    .cancel = sleepy_cancel,
                                    .free = sleepy_free};

static void test_ranks_that_never_start_time_out(void **state) {
    fixture *f = *state;
    f->cfg.backend = &SLEEPY;
    f->cfg.start_timeout = 0.5;
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    job_procs *p = j->be_state;
    pid_t sleeper = p->ranks->pid;
    assert_int_equal(run_until(j, NULL, 30, &err), -1);
    assert_string_equal(err.ename, "TaasOffloadError");
    assert_non_null(strstr(err.message, "only 0 of 2 ranks started within 0.5 s"));
    assert_false(alive(sleeper) && p->ranks && !p->ranks->exited);
    taas_job_free(j);
}

/* A backend whose first ranks die at once (the job resumes) and whose later ranks never
 * join; its loaders run for the first ranks and fail at once after: what a resumed Slurm job
 * sees while its new allocation is not granted. */
static int ranks_launched;

static int resuming_ranks(taas_job *j, taas_error *err) {
    return spawn_sh(j, -1, "ranks", ranks_launched++ ? "exec sleep 1000" : "echo 'rank 1 lost'; exit 3", err);
}

static int resuming_loader(taas_job *j, job_loader *l, taas_error *err) {
    return spawn_sh(j, (int)(l - j->loaders), "loader", ranks_launched > 1 ? "exit 1" : "exec sleep 1000", err);
}

static void resuming_reset(taas_job *j) {
    taas_procs_free(j, j->be_state);
}

static const taas_backend RESUMING = {.name = "resuming",
                                      .plan = sleepy_plan,
                                      .launch_ranks = resuming_ranks,
                                      .launch_loader = resuming_loader,
                                      .watch = sleepy_watch,
                                      .cancel = sleepy_cancel,
                                      .reset = resuming_reset,
                                      .free = sleepy_free};

static int every_loader_due(taas_job *j) {
    for (int i = 0; i < j->nloaders; i++)
        if (!j->loaders[i].due) return 0;
    return 1;
}

static void test_a_loader_lost_while_resuming_waits_for_the_ranks(void **state) {
    fixture *f = *state;
    f->cfg.backend = &RESUMING;
    f->cfg.max_restarts = 3;
    f->cfg.start_timeout = 3600;  /* the test ends it */
    ranks_launched = 0;
    taas_error err;
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    assert_non_null(j);
    assert_int_equal(run_until(j, every_loader_due, 60, &err), 1);
    assert_int_equal(ranks_launched, 2);
    for (int i = 0; i < j->nloaders; i++) {  /* one death each, no replacement yet */
        assert_int_equal(j->loaders[i].deaths, 1);
        assert_int_equal(j->loaders[i].gen, 1);
    }
    assert_non_null(strstr(OUT.data, "restart 1 of 3"));
    assert_non_null(strstr(OUT.data, "a replacement starts when the ranks are back"));
    assert_null(strstr(OUT.data, "a replacement takes over"));
    assert_false(j->failed);
    taas_job_free(j);
}

/* The pool's decisions (--cpus auto): grow by the ranks' wait (at most fourfold), back when a
 * growth did not make the ranks faster, shrink by the loaders' idleness, never below a size
 * that was too small, never past MAX or a size that did not help. */
static int decide(int pool, int floor, int max, double wait, double busy, int *why) {
    taas_pool_window w = {.pool = pool, .max = max, .floor = floor, .wait = wait, .busy = busy, .rate = 10};
    return taas_pool_decide(&w, why);
}

static void test_the_pool_decides_by_wait_and_idleness(void **state) {
    (void)state;
    int why;
    assert_int_equal(decide(1, 0, 8, 0.50, 1.0, &why), 2);  /* half the time waiting: twice the loaders */
    assert_int_equal(why, TAAS_POOL_GROWS);
    assert_int_equal(decide(3, 0, 8, 0.40, 1.0, &why), 5);  /* 3 / 0.6 */
    assert_int_equal(decide(2, 0, 8, 0.60, 1.0, &why), 5);  /* 2 / 0.4 */
    assert_int_equal(decide(1, 0, 8, 0.95, 1.0, &why), 4);  /* 1 / 0.1 = 10, at most four times as many */
    assert_int_equal(decide(1, 0, 8, 0.03, 1.0, &why), 2);  /* just over 2 %: one more */
    assert_int_equal(decide(4, 0, 5, 0.99, 1.0, &why), 5);  /* within MAX */
    assert_int_equal(decide(3, 0, 3, 0.50, 1.0, &why), 3);  /* at MAX */
    assert_int_equal(why, TAAS_POOL_STAYS);
    assert_int_equal(decide(2, 0, 8, 0.02, 1.0, &why), 2);  /* at the goal: stays */
    assert_int_equal(decide(4, 0, 8, 0.0, 0.3, &why), 2);   /* 4 x 0.3 / 0.8 = 1.5: 2 */
    assert_int_equal(why, TAAS_POOL_SHRINKS);
    assert_int_equal(decide(4, 3, 8, 0.0, 0.3, &why), 3);   /* 3 was needed once */
    assert_int_equal(decide(4, 0, 8, 0.0, 0.9, &why), 4);   /* busy: stays */
    assert_int_equal(decide(4, 0, 8, 0.01, 0.1, &why), 4);  /* some wait: no shrinking */
    assert_int_equal(decide(4, 0, 8, 0.0, -1, &why), 4);    /* the loaders said nothing */
    assert_int_equal(decide(1, 0, 8, 0.0, 0.0, &why), 1);
    /* a growth from 2 to 4 that made the ranks 3 % faster goes back, and 2 is the ceiling */
    taas_pool_window w = {.pool = 4, .max = 8, .floor = 3, .grown_from = 2, .rate_before = 10, .wait = 0.3,
                          .busy = 1, .rate = 10.3};
    assert_int_equal(taas_pool_decide(&w, &why), 2);
    assert_int_equal(why, TAAS_POOL_NO_GAIN);
    w.rate = 11;  /* 10 % faster: kept, and it grows on */
    assert_int_equal(taas_pool_decide(&w, &why), 6);
    assert_int_equal(why, TAAS_POOL_GROWS);
    w = (taas_pool_window){.pool = 2, .max = 8, .ceiling = 2, .wait = 0.3, .busy = 1, .rate = 10};
    assert_int_equal(taas_pool_decide(&w, &why), 2);  /* more did not help before */
    assert_int_equal(why, TAAS_POOL_STAYS);
}

/* The History's pool column: the size in each epoch, with its changes. */
static void test_the_pool_of_each_epoch(void **state) {
    (void)state;
    taas_job j = {.pool = 1};
    json_t *one = taas_job_pool_of_epoch(&j, 1);
    assert_int_equal(json_integer_value(one), 1);
    json_decref(one);
    j.pool_log = json_pack("[{s:i, s:i, s:i}, {s:i, s:i, s:i}]", "epoch", 1, "from", 1, "to", 3, "epoch", 3, "from", 3,
                           "to", 2);
    j.pool = 2;
    const char *want[] = {"1\xE2\x86\x92" "3", NULL, "3\xE2\x86\x92" "2", NULL};
    for (int e = 1; e <= 4; e++) {
        json_t *v = taas_job_pool_of_epoch(&j, e);
        if (want[e - 1]) assert_string_equal(json_string_value(v), want[e - 1]);
        else assert_int_equal(json_integer_value(v), e == 2 ? 3 : 2);
        json_decref(v);
    }
    json_decref(j.pool_log);
}

/* The ssh backend on this machine's loopback, as far as it goes without an sshd: the ssh,
 * mpirun and taas-worker that the environment names reach a shell (Open MPI's ssh agent
 * string, the hosts' commands), so one that is not plain is refused before anything runs,
 * naming the variable and the character; a host that refuses the login gets a hint with the
 * command to paste, quoted. */
static void ssh_cluster(fixture *f, const char *ssh_config) {
    FILE *cf = fopen(f->config, "w");
    assert_non_null(cf);
    fprintf(cf, "{\"cluster\": {\"backend\": \"ssh\", \"kernel_address\": \"127.0.0.1\", \"ssh_config\": \"%s\", "
            "\"hosts\": [{\"name\": \"here\", \"address\": \"127.0.0.1\", \"gpus\": 2, \"cpus\": 2}]}}",
            ssh_config);
    fclose(cf);
}

static void test_ssh_programs_must_be_plain(void **state) {
    fixture *f = *state;
    char cfg[160], link[256];
    snprintf(cfg, sizeof cfg, "%s/ssh_config", f->dir);
    /* a port on the loopback that refuses connections: bound, never listening */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &alen), 0);
    FILE *sf = fopen(cfg, "w");
    assert_non_null(sf);
    fprintf(sf, "Host *\n  Port %d\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n", ntohs(a.sin_port));
    fclose(sf);
    ssh_cluster(f, cfg);
    static const struct { const char *var, *real; } progs[] = {
        {"TAAS_SSH", "/usr/bin/ssh"}, {"TAAS_MPIRUN", "/usr/bin/mpirun"}, {"TAAS_WORKER", TAAS_WORKER_PATH}};
    static const struct { const char *name, *named; } bad[] = {
        {"p$(id)", "'$'"}, {"p`id`", "'`'"}, {"p;id", "';'"}, {"p|id", "'|'"}, {"p&id", "'&'"},
        {"p\nid", "a control character (U+000A)"}, {"p'x'", "'''"}, {"p\"x\"", "'\"'"}, {"my p", "a space"}};
    taas_error err;
    for (size_t p = 0; p < sizeof progs / sizeof *progs; p++) {
        for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
            snprintf(link, sizeof link, "%s/%s", f->dir, bad[b].name);
            assert_int_equal(symlink(progs[p].real, link), 0);
            setenv(progs[p].var, link, 1);
            taas_buf_free(&OUT);
            taas_job *j = taas_job_start(&f->cfg, &IO, &err);
            if (j) fail_msg("%s=%s was taken", progs[p].var, link);
            char want[512];
            snprintf(want, sizeof want, "%s names %s/%.2s", progs[p].var, f->dir, bad[b].name);
            if (strcmp(err.ename, "TaasOffloadError") || strncmp(err.message, want, strlen(want)) ||
                !strstr(err.message, bad[b].named) || !strstr(err.hint, "ASCII letters, digits and _ @ % + = : , . / -"))
                fail_msg("%s=%s gave %s: %s (hint: %s)", progs[p].var, link, err.ename, err.message, err.hint);
            assert_null(strstr(OUT.data ? OUT.data : "", "ssh: the 2 ranks"));  /* refused before the hosts' check */
            unlink(link);
            if (!strcmp(progs[p].var, "TAAS_WORKER")) setenv("TAAS_WORKER", TAAS_WORKER_PATH, 1);
            else unsetenv(progs[p].var);
        }
    }
    /* plain programs pass; the host refuses the connection: the hint's command reproduces it */
    setenv("TAAS_SSH", "/usr/bin/ssh", 1);
    taas_job *j = taas_job_start(&f->cfg, &IO, &err);
    if (j) fail_msg("a host that refuses ssh was taken");
    assert_string_equal(err.ename, "TaasOffloadError");
    assert_non_null(strstr(err.message, "cannot log in to host here (127.0.0.1) with ssh: "));
    char want[512];
    snprintf(want, sizeof want, "the ssh backend logs in with keys only: /usr/bin/ssh -F %s -o BatchMode=yes 127.0.0.1 "
             "true must work without a password", cfg);
    if (!strstr(err.hint, want)) fail_msg("hint: %s\nwanted: %s", err.hint, want);
    unsetenv("TAAS_SSH");
    close(s);
    unlink(cfg);
    unlink(f->config);
}

int main(void) {
    if (access(FASHION "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        fprintf(stderr, "test_job needs Debian's Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_progress_weights_done, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_loader_lost_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_rank_lost_fails_the_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_keeps_the_last_step_and_ends_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_ranks_error_is_the_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranks_that_never_start_time_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mpiruns_report_of_a_death_ends_the_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_loader_lost_while_resuming_waits_for_the_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ssh_programs_must_be_plain, setup, teardown),
        cmocka_unit_test(test_the_pool_decides_by_wait_and_idleness),
        cmocka_unit_test(test_the_pool_of_each_epoch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
