/* Text from a model of tokens, nanoGPT's sampling loop: the context's last T tokens in (the
 * model is planned for T once; a shorter context sits at the window's start, zeros after it,
 * which a causal model's positions up to the context's last never see), the next token drawn
 * from the softmax of the last position's logits over temperature, among the top_k largest
 * when given. Draw k comes from the counter generator at (seed, k): a seed gives the same
 * text. Used by generate() (workers/generate_role.c) and the fit's sample after each epoch. */
#ifndef TAAS_SAMPLE_H
#define TAAS_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

/* Appends max_new tokens to seq[0..*len) (room for *len + max_new; *len >= 1, each id in the
 * model's vocabulary), running m in eval mode one sample at a time. top_k 0: all. */
int taas_sample_tokens(taas_model *m, int64_t *seq, size_t *len, long long max_new, double temperature, int top_k,
                       uint64_t seed, taas_error *err);

/* How many of `want` new tokens a sample of a model of T tokens and nparams parameters may
 * draw within about 1e12 multiply-adds (each token is a forward over the whole window, there
 * being no key/value cache): want, fewer, or 0 below 20 (too large to sample in passing). */
long long taas_sample_budget(int t, size_t nparams, long long want);

#endif
