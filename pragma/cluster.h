/* Where #pragma taas jobs run: the configuration file's "cluster" section (docs/cluster.md),
 * read from the same file as the machine configurations ($TAAS_CONFIG, else
 * ~/.config/taas/config.json), on every cell, so an edit takes effect in the next one.
 *
 *   "cluster": {
 *     "backend": "local" | "slurm" | "ssh",      required
 *     "kernel_address": "10.0.0.1",              optional: the address the hosts reach the
 *                                                kernel at (default: this machine's address
 *                                                on the interface that routes to the first
 *                                                host, or to slurmctld's host)
 *     "loaders": "c1.4",                         optional: the machine configuration of the
 *                                                loader workers (default "c1.4")
 *     "worker": "/usr/local/bin/taas-worker",    optional: taas-worker's path on the hosts
 *                                                (default: the path of the kernel's own)
 *     "ssh_config": "/home/me/.ssh/config",      ssh only, optional: `ssh -F` this file
 *     "ssh": "/usr/bin/ssh",                     ssh only, optional: the ssh program (default:
 *                                                $TAAS_SSH, else ssh on PATH)
 *     "kernels": "avx2",                         optional: the kernel set every rank runs
 *                                                (default: the best every rank's host runs)
 *     "munge_socket": "/run/munge/munge.socket.2",  slurm only, optional: munged's socket on
 *                                                this machine and the hosts (the job's keys
 *                                                travel in a MUNGE credential)
 *     "hosts": [                                 ssh only, required, 1 to 1024:
 *       {"name": "gpu1", "address": "10.0.0.21", "gpus": 8, "cpus": 96}, ...
 *     ]                                          a name ssh knows (or any label when address
 *                                                is given), the address ssh connects to
 *                                                (default: the name), GPUs (0 to 4096: rank
 *                                                slots; 0 for a loader host), CPUs (1 to 65536)
 *   }
 * Without a file or without the section, the backend is "local". */
#ifndef TAAS_CLUSTER_H
#define TAAS_CLUSTER_H

#include <stddef.h>

#include "error.h"

#define TAAS_CLUSTER_MAX_HOSTS 1024

typedef struct taas_cluster_host {
    char name[64];
    char address[256];      /* what ssh connects to: the "address", else the name */
    int gpus, cpus;
} taas_cluster_host;

typedef struct taas_cluster {
    char backend[16];           /* "local", "slurm" or "ssh" */
    char kernel_address[256];   /* "" when not given */
    char loaders[64];           /* a machine configuration's name; "c1.4" by default */
    char worker[1024];          /* "" when not given */
    char ssh_config[1024];      /* "" when not given */
    char ssh[1024];             /* "" when not given */
    char munge_socket[1024];    /* "" when not given: munge's default */
    int kernels;                /* a taas_cpu_set (cpu.h), or -1 when not given */
    taas_cluster_host *hosts;   /* malloc'd; ssh only */
    size_t nhosts;
    char path[1024];            /* the file it was read from ("" for the default local) */
} taas_cluster;

/* Reads the section. 0 with *out filled (backend "local" when there is no file or no
 * section); -1 with a TaasConfigError that names the file, the key and what is allowed. */
int taas_cluster_load(taas_cluster *out, taas_error *err);
void taas_cluster_free(taas_cluster *c);

#endif
