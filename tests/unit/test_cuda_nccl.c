/* Two ranks on two GPUs summing with NCCL (workers/train/cuda/cu_comm.c), as an offloaded
 * fit's ranks do: NCCL's id passed over MPI, each rank its own GPU, unequal batches weighted
 * by their share of the step's samples. Three steps of the §1 network in small must give
 * every rank the same weights, bit for bit, and the weights the CPU core reaches with the
 * same sums over MPI (collective_mpi.c) within 1e-4; share_stats must give every rank rank
 * 0's BatchNorm statistics.
 *
 * Started by ctest as a plain program: it exits 77 (skipped) with fewer than two GPUs, and
 * otherwise runs itself again under mpirun with two ranks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collective.h"
#include "cu_engine.h"
#include "init.h"
#include "loss.h"
#include "optim.h"
#include "test_cuda_util.h"

#define SPEC "{\"type\":\"Sequential\",\"layers\":[" \
    "{\"type\":\"Conv2d\",\"in_channels\":1,\"out_channels\":8,\"kernel_size\":3},{\"type\":\"ReLU\"}," \
    "{\"type\":\"MaxPool2d\",\"kernel_size\":2},{\"type\":\"Dropout\",\"p\":0.25},{\"type\":\"Flatten\"}," \
    "{\"type\":\"Linear\",\"in_features\":648,\"out_features\":32},{\"type\":\"BatchNorm1d\",\"num_features\":32}," \
    "{\"type\":\"ReLU\"},{\"type\":\"Linear\",\"in_features\":32,\"out_features\":10}," \
    "{\"type\":\"LogSoftmax\",\"dim\":1}]}"

static taas_collective C;
static taas_error E;

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "rank %d: ", C.rank);                                  \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            fflush(stderr);                                                        \
            taas_collective_mpi_abort(1);                                          \
        }                                                                          \
    } while (0)
#define OK(call) CHECK((call) == 0, "%s: %s (%s)", #call, E.message, E.hint)

static taas_model *model(void) {
    json_error_t je;
    json_t *j = json_loads(SPEC, 0, &je);
    taas_model *m = taas_model_new(j, 1, 20, 20, 77, &E);
    json_decref(j);
    CHECK(m != NULL, "%s", E.message);
    return m;
}

static uint64_t hash(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Every rank's h equal? */
static int same_everywhere(uint64_t h) {
    uint64_t hs[2] = {0, 0};
    hs[C.rank] = h;
    OK(C.sum_u64(&C, hs, 2, &E));
    return hs[0] == hs[1];
}

static int run(void) {
    taas_model *cpu = model(), *gpu = model();
    taas_optim_config opt;
    taas_optim_config_default(&opt, TAAS_OPTIM_SGD);
    opt.lr = 0.05, opt.momentum = 0.9;
    taas_train_loss loss = {.kind = TAAS_JOB_NLL, .ignore_index = -100};
    taas_engine *e = taas_cuda_engine_new(gpu, &loss, &opt, C.rank, TAAS_PRECISION_FP32, &C, &E);
    CHECK(e != NULL, "%s (%s)", E.message, E.hint);
    /* unequal shares: 12 and 7 samples */
    uint32_t n = C.rank == 0 ? 12 : 7;
    float *x = malloc((size_t)n * 400 * sizeof *x), *dout = malloc((size_t)n * 10 * sizeof *dout);
    int64_t y[12];
    taas_init_rng rng = {(uint64_t)C.rank + 1, 0};
    taas_init_uniform(x, (size_t)n * 400, 1.0f, &rng);
    for (uint32_t i = 0; i < n; i++) y[i] = (int64_t)((i * 3 + (uint32_t)C.rank) % 10);
    taas_batch b = {0};
    b.k = (uint64_t)C.rank, b.n = n, b.c = 1, b.h = 20, b.w = 20, b.images = x, b.labels = y;
    float *state = calloc(cpu->nparams, sizeof *state);
    for (long s = 0; s < 3; s++) {
        double total = n;
        OK(C.sum_f64(&C, &total, 1, &E));
        float w = (float)(n / total), gl, cl;
        OK(e->ops->compute(e, &b, NULL, NULL, (uint64_t)s, &gl, &E));
        OK(e->ops->update(e, w, &C, &opt, s + 1, &E));
        /* the CPU engine's step for rank r of 2 (engine_cpu.c) */
        const float *out;
        taas_model_zero_grad(cpu);
        OK(taas_model_forward(cpu, x, (int)n, 1, (uint64_t)s, &out, &E));
        OK(taas_nll_loss_forward(&cl, out, y, (int)n, 10, -100, &E));
        taas_nll_loss_backward(dout, y, (int)n, 10, -100, 1.0f);
        OK(taas_model_backward(cpu, dout, &E));
        for (size_t i = 0; i < cpu->ntrain; i++) cpu->grads[i] *= w;
        OK(C.sum_f32(&C, cpu->grads, cpu->ntrain, &E));
        taas_optim_step(&opt, cpu->params, cpu->grads, state, cpu->ntrain, s + 1);
        CHECK(fabsf(gl - cl) <= 1e-4f * fmaxf(1.0f, fabsf(cl)), "step %ld: loss %.8g, CPU %.8g", s, gl, cl);
    }
    taas_cu_model *dm = taas_cu_engine_model(e);
    OK(taas_cu_model_download(dm, &E));
    for (size_t i = 0; i < cpu->nparams; i++)
        CHECK(fabsf(gpu->params[i] - cpu->params[i]) <= 1e-4f * fmaxf(1.0f, fabsf(cpu->params[i])),
              "parameter %zu: %.8g, CPU %.8g", i, gpu->params[i], cpu->params[i]);
    CHECK(same_everywhere(hash(gpu->params, gpu->nparams * sizeof(float))), "the ranks' weights differ");
    /* the ranks' running statistics differ (their batches do) until they take rank 0's */
    CHECK(!same_everywhere(hash(gpu->stats, gpu->nstats * sizeof(float))), "the ranks' statistics agree already");
    uint64_t rank0 = C.rank == 0 ? hash(gpu->stats, gpu->nstats * sizeof(float)) : 0;
    OK(C.sum_u64(&C, &rank0, 1, &E));  /* rank 0's hash, everywhere */
    OK(e->ops->share_stats(e, &C, &E));
    OK(taas_cu_model_download(dm, &E));
    CHECK(hash(gpu->stats, gpu->nstats * sizeof(float)) == rank0, "share_stats did not give rank 0's statistics");
    e->ops->free(e);
    taas_model_free(cpu), taas_model_free(gpu);
    free(x), free(dout), free(state);
    if (C.rank == 0) printf("two ranks on two GPUs: the same weights as the CPU's sums, bit for bit across ranks\n");
    return 0;
}

int main(int argc, char **argv) {
    taas_error_clear(&E);
    if (!getenv("OMPI_COMM_WORLD_SIZE")) {
        tu_cuda_require(2);
        if (geteuid() == 0) {
            setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
            setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        }
        execl(TAAS_MPIEXEC, TAAS_MPIEXEC, "-np", "2", "--oversubscribe", "--bind-to", "none", argv[0], (char *)NULL);
        perror(TAAS_MPIEXEC);
        return 1;
    }
    if (taas_collective_mpi_init(&argc, &argv, &C, &E)) {
        fprintf(stderr, "%s\n", E.message);
        return 1;
    }
    int rc = C.world == 2 ? run() : 1;
    taas_collective_mpi_finalize();
    return rc;
}
