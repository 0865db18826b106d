/* The training core's kernel set, decided once per process, in one place for every layer
 * and for OpenBLAS's core (blas.c): the best the CPU runs, or a lower one that the
 * environment variable TAAS_CPU names (avx512, avx2, generic), for tests and for users who
 * need it. One binary runs on every x86-64 CPU: a set's code carries its own target and
 * runs only where the CPU has it. */
#ifndef TAAS_CPU_H
#define TAAS_CPU_H

#include "error.h"

typedef enum taas_cpu_set {
    TAAS_CPU_GENERIC,  /* the x86-64 baseline: im2col + OpenBLAS for the convolutions */
    TAAS_CPU_AVX2,     /* AVX2 + FMA: the direct convolution kernels at 8 floats a vector */
    TAAS_CPU_AVX512,   /* AVX-512F: the direct kernels at 16 floats a vector */
} taas_cpu_set;

/* The set in use. When TAAS_CPU names a set the CPU lacks, or none, it is the best the CPU
 * has: taas_cpu_check says what is wrong. */
taas_cpu_set taas_cpu_kernels(void);
/* "avx512", "avx2", "generic" */
const char *taas_cpu_set_name(taas_cpu_set s);
/* The best set this CPU runs. */
taas_cpu_set taas_cpu_best(void);
/* 0, or -1 with err (TaasValueError) when TAAS_CPU names no set or one the CPU lacks. */
int taas_cpu_check(taas_error *err);

#endif
