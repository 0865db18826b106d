/* What a graph with skip connections adds to the layers: a residual connection's sum, and
 * the second contribution to a gradient whose tensor feeds two ops. Element-wise, so an
 * output that is one of the inputs (the same pointer) is safe. */
#include "layers.h"
#include "simd.h"

TAAS_VEC void taas_add_forward(float *y, const float *a, const float *b, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

TAAS_VEC void taas_accumulate(float *y, const float *x, size_t n) {
#pragma omp parallel for simd if (n >= TAAS_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}
