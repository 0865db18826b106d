/* Private to kernel/job: the job's state, shared by job.c (the lifecycle and the control
 * plane), job_plan.c (the plan and the spec), job_view.c (the display) and the backends
 * (backend.h), which start, watch and end the job's processes. */
#ifndef TAAS_JOB_PRIV_H
#define TAAS_JOB_PRIV_H

#include <limits.h>
#include <sys/types.h>

#include "backend.h"
#include "cluster.h"
#include "job.h"
#include "trainview.h"
#include "zsock.h"

/* Replacements of one loader worker before the job gives up on it. */
#define TAAS_JOB_MAX_DEATHS 4  /* a loader's: the job stops at this many */
/* Seconds for every worker to say hello (mpirun or the scheduler, and MPI_Init, included). */
#define TAAS_JOB_HELLO_S 60.0

typedef struct job_rank {
    int hello, ready;
    int cpu;              /* the kernel set its host runs (cpu.h), as its hello said */
    pid_t pid;
    char host[64];
    char data[160];       /* its data plane endpoint */
} job_rank;

typedef struct job_loader {
    int stream, worker;   /* s and j */
    int gen;              /* generation: one more per launch (replacements and restarts) */
    int deaths;           /* ends that were not its work's: the limit counts these */
    int due;              /* died while the job resumes: replaced once the ranks are ready */
    long long epoch, step;/* where its generation starts */
    int active;           /* in the stream's pool now (worker < the pool's size) */
    int pool;             /* the pool's size its generation was started with: its M */
    double up_s, idle_s;  /* its last report of how busy it is (time up, time idle) */
    double win_up, win_idle; /* the same at the pool window's start */
    long long items;      /* the batches it has sent, as it last said */
    double speed_up;      /* its up_s and items when the speed's measure began (speed_up < 0:
                             it had not said yet) */
    long long speed_items;
    char peer[64];        /* its control identity, "loader.S.J.G" */
    char host[64];        /* from its hello */
    pid_t pid;
    int hello, started, ended;
    int alive;            /* its process runs (the backend says) */
} job_loader;

/* The loader pool that sizes itself (--cpus auto, job_pool.c): the ranks may wait for data
 * at most this share of their time, measured over windows of at least this many steps and
 * seconds. */
#define TAAS_POOL_WAIT_MAX 0.02
#define TAAS_POOL_WINDOW_STEPS 3
#define TAAS_POOL_WINDOW_S 1.0
/* --cpus auto without :MAX: as many as a fixed --cpus may ask for */
#define TAAS_POOL_MAX_DEFAULT 8

struct taas_job {
    int world, threads;
    int cpus;             /* loader slots per stream: --cpus M, or auto's most */
    int pool;             /* loader workers per stream now: cpus, or with auto what it sized */
    int autosize;         /* --cpus auto */
    int offloaded;        /* a #pragma taas cell's (plan line, job status, summary) */
    int evaluate;         /* evaluate(): no display, no weights */
    const taas_pragma *pragma;  /* while it is planned only */
    int nstreams;
    taas_job_stream streams[2];
    char names[2][64];
    char dir[PATH_MAX / 2], weights[PATH_MAX];
    char id[32];
    char worker_path[PATH_MAX];
    char endpoint[256];   /* the control plane, as the workers reach it */
    char bind[256];       /* what the control plane binds */
    char rank_bind[256];  /* the ranks' data plane: an ipc:// folder prefix, or "route" */
    json_t *spec;         /* the job spec, sent to each worker after its hello */
    void *init_weights;   /* the model's weights before the fit (sent with the spec), or NULL */
    size_t init_weights_len;
    /* security: the job's keys when its planes leave this machine (CURVE), else plain ipc:// */
    int curve;
    taas_zkeys keys;
    taas_zsec *sec;
    void *zctx, *router;
    int epfd;
    taas_cluster cluster;  /* the configuration file's "cluster" section (a pragma job's) */
    const taas_backend *be;
    void *be_state;       /* the backend's own */
    job_rank *ranks;
    int nhello, nready;   /* ranks that said hello, and that bound their data plane */
    job_loader *loaders;  /* nstreams * cpus, stream-major */
    int nloaders;
    json_t *start_msg;    /* the loaders' start message, once every rank is ready */
    /* progress, from rank 0 */
    long long epochs, steps_per_epoch, epoch, step, samples;
    double loss, samples_per_s, wait_share;
    json_t *done;
    int have_weights;
    int ranks_ended;      /* the backend saw the ranks' processes end */
    int said_where;       /* the "started:" line is out */
    /* the kernel set of every rank (cpu.h): asked for (-1: the best every rank's host runs)
     * and why; once decided, the job keeps it when it resumes */
    int kernels_asked;
    char kernels_why[PATH_MAX + 64];
    int said_kernels;
    /* the end */
    int failed;
    int failed_by_loader; /* the failure is a loader's (a rank's death that follows is its cause) */
    taas_error failure;
    int cancelled;
    int stopping;         /* the stop button: cancel is sent, rank 0's weights may come */
    int stopped;          /* ... and the stop is over: every process is gone */
    double stop_until;    /* when the stop stops waiting for them */
    /* checkpoints rank 0 sent: the last two, in the job folder ([0] the newest), and where
     * the newest is (0-based epoch, step in it, optimizer steps) */
    char ckpt[2][PATH_MAX];
    long long ckpt_epoch, ckpt_step, ckpt_steps;
    /* resuming after a rank's death: how many times it may, has, and why it is due */
    int max_restarts, restarts, restart_due;
    int resuming;         /* restarted, and not every rank is ready yet */
    /* the backend says the ranks ended because the scheduler took their nodes back: the job
     * resumes when it runs again, and that is not one of its max_restarts */
    int preempted;
    /* the backend saw the scheduler end the allocation (a node failed, or it preempted the
     * job): the ranks' end follows, and a loader replaced into it could only fail */
    int allocation_gone;
    char restart_why[1024];
    double t0, hello_deadline, next_beat;
    double start_timeout; /* seconds from the launch for every rank to be ready */
    /* the pool's window (job_pool.c): its start, rank 0's wait and steps then (win_steps
     * < 0: none open, while loaders start); the smallest size that may be enough */
    double win_t, win_wait;
    long long win_steps;
    int pool_floor, pool_ceiling;
    int settling;         /* the pool changed: its first window, while the new workers fill
                             their pipelines and the ranks what they hold, is not a measure */
    int grown_from;       /* the last change was a growth from this size (0: it was not) */
    double rate_before;   /* the ranks' steps/s in the window that made it */
    double rank_wait_s;   /* rank 0's wait since its first batch, and its steps, last said */
    long long rank_steps;
    json_t *pool_log;     /* the pool's changes: {"t", "epoch", "step", "from", "to", "why"} */
    char pool_why[200];   /* the last one's reason, for the display */
    /* cost and budget (job_cost.c) */
    double price_ranks, price_loader; /* a machine-hour of the ranks' and a loader's configuration; < 0: none */
    int rank_machines;
    double spent, rank_mh, loader_mh; /* so far: money (with prices), machine-hours */
    double cost_t;        /* accrued up to this time */
    double launched_t;    /* its machines were first held (a Slurm job's grant): the cost and a
                             time budget count from here */
    double first_step_t;  /* when rank 0's first step line came, and its steps then */
    long long first_steps, total_steps, val_samples, samples_total;
    double speed_t;       /* the ranks' speed is measured from this step line on (the first of
                             an epoch, or the first after the pool changed), at speed_steps
                             and rank 0's wait speed_wait */
    long long speed_steps;
    double speed_wait;
    double step_s;        /* a step's time, as last measured (0: not yet) */
    double est_total;     /* the job's expected length in seconds (0: not yet known) */
    char est_key[65];     /* the cell's identity for "the last run of the same cell" */
    double last_startup, last_step_s, last_val_s;  /* that run's, when there was one (last_step_s > 0) */
    long long last_steps;
    int budget_kind;      /* TAAS_BUDGET_MONEY or TAAS_BUDGET_TIME, 0: none */
    double budget;
    char budget_text[sizeof ((taas_pragma *)0)->budget_text];  /* as the cell wrote it */
    int budget_hit;       /* the budget ended the job: cancel is sent */
    char budget_why[300];
    taas_trainview *view;
    char display_id[64];
    char model[64];       /* the model's variable, for the summary */
    const taas_io *io;    /* the cell's outputs while a poll runs (NULL otherwise) */
};

/* job_plan.c: the plan line, the backend's checks, the spec and the control plane. */
int taas_job_plan(taas_job *j, const taas_job_cfg *cfg, const taas_io *io, taas_error *err);
/* The weights the ranks start from (sent with the spec): the file at path, in place of
 * what was there. 0, or -1 with err. */
int taas_job_read_weights(taas_job *j, const char *path, taas_error *err);

/* job.c, for the backends: the ranks were launched now (a Slurm allocation was granted):
 * the time they have to be ready starts again. */
void taas_job_launched(taas_job *j);
/* epoll watches fd (-1: nothing); a line a process printed
 * (who: "mpirun", "loader train.0"); the first failure, which ends the job. */
void taas_job_watch(taas_job *j, int fd);
void taas_job_unwatch(taas_job *j, int fd);
void taas_job_line(taas_job *j, const char *who, const char *text);
void taas_job_fail(taas_job *j, const char *ename, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The ranks' processes ended (the launcher, or the one rank): ok when they all exited 0;
 * else how names what happened ("rank 1 on gpu2 (pid 42) exited on signal 9 (Killed)"). */
void taas_job_ranks_ended(taas_job *j, int ok, const char *how);
/* Loader l's process ended (ok: exit status 0); how says how it ended otherwise. */
void taas_job_loader_ended(taas_job *j, job_loader *l, int ok, const char *how);
/* "loader train.0" */
const char *taas_job_loader_label(const taas_job *j, const job_loader *l, char *out, size_t n);

/* job_pool.c: the pool that sizes itself. Rank 0 said its wait and steps so far; the
 * window may close with a decision (job.c resizes). The size the pool should have now. */
int taas_job_pool_step(taas_job *j, double wait_s, long long steps, char *why, size_t n);
/* What a window of rank 0's steps says, and what the pool knows of its sizes. */
typedef struct taas_pool_window {
    int pool, max;        /* its size now, the most it may have */
    int floor;            /* a smaller size was too small: at least this many may be needed */
    int ceiling;          /* more than this did not make the ranks faster (0: not known) */
    int grown_from;       /* the size before a growth this window measures the first (0: none) */
    double rate_before;   /* the ranks' steps/s at grown_from */
    double wait;          /* the share of the window the ranks waited for data */
    double busy;          /* the share of their time the loaders were not idle (< 0: unknown) */
    double rate;          /* the ranks' steps/s in the window */
} taas_pool_window;
enum { TAAS_POOL_STAYS, TAAS_POOL_GROWS, TAAS_POOL_NO_GAIN, TAAS_POOL_SHRINKS };
/* The size the pool should have (== pool: it stays), and why (TAAS_POOL_...). */
int taas_pool_decide(const taas_pool_window *w, int *why);
/* A loader's report of how busy it is. */
void taas_job_pool_load(taas_job *j, job_loader *l, const json_t *b);
/* The pool's size during epoch e (1-based), for the History: 3, or "1→2→3". New reference. */
json_t *taas_job_pool_of_epoch(const taas_job *j, long long e);

/* job_cost.c: prices, the estimate, the budget. */
/* At plan time: the prices and the budget; the cost line (after the plan line). */
int taas_job_cost_plan(taas_job *j, const taas_job_cfg *cfg, taas_buf *line, taas_error *err);
/* Accrues the cost up to now; 1 when the budget is reached (the job should stop). */
int taas_job_cost_tick(taas_job *j);
/* When the budget will be reached at the present rate (for the poll's deadline); 1e300: never. */
double taas_job_cost_due(const taas_job *j);
/* Rank 0's start and step lines, for the estimate. */
void taas_job_cost_start(taas_job *j, const json_t *start);
void taas_job_cost_step(taas_job *j, long long steps, double wait_s);
/* The speed is measured anew from the next step line (the pool changed, an epoch began). */
void taas_job_speed_restart(taas_job *j);
/* "est. 4 min 10 s, cost 0.83" for the display; nothing before there is an estimate. */
void taas_job_cost_status(const taas_job *j, taas_buf *t);
/* "; cost 0.81 at your prices" (or machine-hours) for the summary. */
void taas_job_cost_summary(const taas_job *j, taas_buf *t);
/* The job ended with its result: its measures are kept for the next run of the same cell. */
void taas_job_cost_remember(const taas_job *j);

/* job_view.c: the display, updated in place at most five times a second (final: now), and
 * when a kept update is due (0: none). */
void taas_job_view(taas_job *j, const taas_io *io, int final);
double taas_job_view_due(const taas_job *j);
/* The one-line summary at the end, and the per-epoch checksums. */
void taas_job_summary(taas_job *j, const taas_io *io);

#endif
