/* Conv2d 3x3 at stride 1 by Winograd's minimal filtering (Lavin and Gray, "Fast Algorithms
 * for Convolutional Neural Networks", 2015): each m x m block of outputs from an
 * (m + 2) x (m + 2) block of input, with (m + 2)^2 products a channel pair where the direct
 * sum takes 9 m^2; F(4x4, 3x3) or F(2x2, 3x3) by the plane (taas_conv_winograd_tile_side).
 * The input blocks of every channel are transformed (B^T d B), the weights once a call
 * (G g G^T), then each tile position's products are one sgemm over the channels, (OC, C) x
 * (C, tiles), and the results are transformed back (A^T m A). The input gradient is the same
 * operation on the output gradient with the weights turned 180 degrees and their channels
 * swapped. The weight gradient is the forward's adjoint: sgemms (OC, tiles) x (tiles, C) of
 * the transformed output gradient and input, summed over the batch, then transformed back
 * once (G^T dU G). layer_conv.c uses all three where they apply, in products of a few
 * samples a thread (taas_conv_winograd_samples), or grouped on small planes of many channels
 * (taas_conv_winograd_grouped).
 *
 * Every step is additions and multiplications by constants in a fixed order, and the sgemms
 * are OpenBLAS's single-threaded ones of the kernel set's core: the same shape, threads and
 * kernel set give the same bits (docs/training.md). F(4x4) rounds more than F(2x2): its
 * float32 error against float64 is measured in bench/RESULTS.md (issue 28). */
#ifndef TAAS_CONV_WINOGRAD_H
#define TAAS_CONV_WINOGRAD_H

#include <stddef.h>
#include "layers.h"

/* 1 for a 3x3 kernel at stride 1 without groups, padding at most 2, at least 64 input and
 * output channels and an output plane of at least 8x8, or 4x4 with 512 channels in and out.
 * Measured slower under that: with 32 channels (the docs/design.md §1 network's second
 * convolution) the 16 products are too short for OpenBLAS, and on 4x4 planes of 256
 * channels or fewer the transforms of a tile row of two tiles cost more than they save. */
int taas_conv_winograd_usable(const taas_conv2d_shape *s);

/* The side of a tile's outputs: 4, F(4x4, 3x3), on output planes of 24 x 24 and more or
 * whose sides are multiples of 4 from 8 on, where it was measured faster; 2, F(2x2, 3x3),
 * elsewhere (14 x 14, 7 x 7, 4 x 4). F(4x4)'s float32 error against float64 is 4-6 times
 * the direct sum's (RMS 1.7e-6 of the RMS for 64 channels at 32x32, against 3-4e-7;
 * bench/RESULTS.md), F(2x2)'s no larger. */
int taas_conv_winograd_tile_side(const taas_conv2d_shape *s);

/* Floats of the transformed weights (shared by the threads), or of a thread's du: XI x OC x C,
 * XI = (side + 2)^2 (16 or 36). */
size_t taas_conv_winograd_weight_floats(const taas_conv2d_shape *s);
/* Floats a thread works in, any of the three, for products of up to `samples` samples (the
 * weight gradient's du sums not counted). */
size_t taas_conv_winograd_thread_floats(const taas_conv2d_shape *s, int samples);
/* Samples a product takes: as many whole samples as keep its V and M ((m + 2)^2 (C + OC)
 * floats a tile) within about 2 MB, at least 1024 / (m + 2)^2 tiles and at least one sample.
 * Measured: a product's transforms write and its sgemms read V and M, and past the core's
 * L2 both wait on memory (F(2x2), 256 channels at 8x8: 200 GFLOP/s in products of 256
 * tiles, 240 in 64; at 14x14, 260 against 310 in one sample's 49). A function of the shape
 * alone, so that the sums' order is too. */
int taas_conv_winograd_samples(const taas_conv2d_shape *s);

/* u (XI, OC, C) from w (OC, C, 3, 3), for the forward; with `backward`, (XI, C, OC) from
 * the weights turned 180 degrees, for the input gradient. On nthreads threads. */
void taas_conv_winograd_weights(float *u, const float *w, const taas_conv2d_shape *s, int backward, int nthreads);

/* Samples [n0, n0 + m): y (N, OC, OH, OW) = conv(x) + b (b may be NULL), then max(., 0)
 * with relu. u from taas_conv_winograd_weights(.., 0, ..). */
void taas_conv_winograd_forward(float *y, const float *x, const float *u, const float *b,
                                const taas_conv2d_shape *s, float *mine, int n0, int m, int relu);
/* Samples [n0, n0 + m): dx (N, C, H, W) written from dy (N, OC, OH, OW), dy counting where
 * relu_y > 0 when relu_y is not NULL. u from taas_conv_winograd_weights(.., 1, ..). */
void taas_conv_winograd_input_grad(float *dx, const float *dy, const float *relu_y, const float *u,
                                   const taas_conv2d_shape *s, float *mine, int n0, int m);

/* Samples [n0, n0 + m) of the weight gradient: du (XI, OC, C) += their transformed products,
 * db (OC) += their sums of dy (db may be NULL); dy counts where relu_y > 0 when relu_y is not
 * NULL. du holds taas_conv_winograd_weight_floats floats. */
void taas_conv_winograd_weight_grad(float *du, float *db, const float *dy, const float *relu_y, const float *x,
                                    const taas_conv2d_shape *s, float *mine, int n0, int m);
/* dw (OC, C, 3, 3) += G^T du G, du the sum of `slices` partial sums `stride` floats apart,
 * added in their order. On nthreads threads. */
void taas_conv_winograd_weight_grad_finish(float *dw, const float *du, size_t stride, int slices,
                                           const taas_conv2d_shape *s, int nthreads);

/* Grouped: the batch in groups of taas_conv_winograd_group samples (their V and M within
 * about 32 MiB), all threads on each of a group's phases: the input's transform a channel at a
 * time over the group's tiles, each tile position's one sgemm over the whole group, the
 * output's transform a channel at a time. Each matrix of transformed weights is then packed
 * once a group rather than once a few samples a thread, and no sum depends on the threads.
 * 1 where a product of taas_conv_winograd_samples samples holds fewer tiles than the
 * channels (small planes of many channels), where it was measured faster. work holds
 * taas_conv_winograd_group_floats. */
int taas_conv_winograd_grouped(const taas_conv2d_shape *s);
/* For tests: -1 (the default) groups where taas_conv_winograd_grouped's rule says, 0 never,
 * k > 0 always, in groups of at most k samples */
void taas_conv_winograd_grouping(int mode);
int taas_conv_winograd_group(const taas_conv2d_shape *s);
size_t taas_conv_winograd_group_floats(const taas_conv2d_shape *s, int nthreads);
void taas_conv_winograd_forward_grouped(float *y, const float *x, const float *u, const float *b,
                                        const taas_conv2d_shape *s, float *work, int relu, int nthreads);
void taas_conv_winograd_input_grad_grouped(float *dx, const float *dy, const float *relu_y, const float *u,
                                           const taas_conv2d_shape *s, float *work, int nthreads);
/* dw += G^T dU G with du (taas_conv_winograd_weight_floats) the whole batch's dU, db += dy's sums */
void taas_conv_winograd_weight_grad_grouped(float *dw, float *db, const float *dy, const float *relu_y,
                                            const float *x, const taas_conv2d_shape *s, float *du, float *work,
                                            int nthreads);
#endif
