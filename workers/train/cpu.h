/* The training core's kernel set, in one place for every layer and for OpenBLAS's core
 * (blas.c). A process starts with its own: the best its CPU runs, or a lower one that the
 * environment variable TAAS_CPU names (avx512, avx2, generic). A rank of a job then takes
 * the job's (taas_cpu_use), which the kernel decides once for every rank, so that every
 * rank sums in the same order whatever its host (docs/training.md, "The same numbers on
 * every machine"). One binary runs on every x86-64 CPU: a set's code carries its own
 * target and runs only where the CPU has it. */
#ifndef TAAS_CPU_H
#define TAAS_CPU_H

#include "error.h"

typedef enum taas_cpu_set {
    TAAS_CPU_GENERIC,  /* the x86-64 baseline: im2col + OpenBLAS for the convolutions */
    TAAS_CPU_AVX2,     /* AVX2 + FMA: the direct convolution kernels at 8 floats a vector */
    TAAS_CPU_AVX512,   /* AVX-512 F, BW, DQ and VL (what OpenBLAS's SkylakeX core needs):
                        * the direct kernels at 16 floats a vector */
} taas_cpu_set;

/* The set in use: the job's once taas_cpu_use took it, else the process's own (TAAS_CPU's
 * when it names a set the CPU runs, else the best the CPU has: taas_cpu_check says what is
 * wrong with TAAS_CPU). */
taas_cpu_set taas_cpu_kernels(void);
/* "avx512", "avx2", "generic" */
const char *taas_cpu_set_name(taas_cpu_set s);
/* The set a name gives, or -1 for a name that is none. */
int taas_cpu_parse(const char *name);
/* The best set this CPU runs. */
taas_cpu_set taas_cpu_best(void);
/* 0, or -1 with err (TaasValueError) when TAAS_CPU names no set or one the CPU lacks. */
int taas_cpu_check(taas_error *err);
/* The job's set for the rest of the process, before any model exists (the caller then
 * switches OpenBLAS with taas_blas_follow): 0, or -1 with err when this CPU cannot run it. */
int taas_cpu_use(taas_cpu_set s, taas_error *err);

#endif
