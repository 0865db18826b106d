/* The kernel's side of the data displays, through the interpreter as a cell runs them:
 * finding taas-worker, dataset and DataLoader displays and len() from the probe (cached,
 * asked again when a file changes), probe failures as the cell's error, the probe's
 * timeout and interrupt, and show() waiting on its worker's output (display, interrupt,
 * timeout, a new cell), with no worker process left behind. A FIFO stands for storage that
 * never answers: the worker blocks opening it, as on a stalled network file system. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>

#include "buf.h"
#include "clock.h"
#include "formats_testutil.h"
#include "interp.h"
#include "test_probe_util.h"
#include "worker.h"

static char *dir;

typedef struct recorder {
    taas_buf log;
    json_t *display;
} recorder;

static void rec_stream(void *ctx, const char *name, const char *text) {
    recorder *r = ctx;
    taas_buf_printf(&r->log, "%s:%s|", name, text);
}

static void rec_display(void *ctx, json_t *data, json_t *md, const char *id, int update) {
    recorder *r = ctx;
    (void)id;
    (void)update;
    taas_buf_puts(&r->log, "display|");
    json_decref(md);
    json_decref(r->display);
    r->display = data;
}

static void rec_clear(void *ctx, int wait) { (void)ctx; (void)wait; }
static void rec_page(void *ctx, json_t *data) { (void)ctx; json_decref(data); }

typedef struct fixture {
    recorder rec;
    taas_io io;
    taas_interp *in;
    taas_error err;
    json_t *result;
} fixture;

static int setup(void **state) {
    pu_worker();  /* exports TAAS_WORKER: the test binary has no taas-worker beside it */
    fixture *f = calloc(1, sizeof *f);
    f->io = (taas_io){.ctx = &f->rec, .stream = rec_stream, .display = rec_display, .clear_output = rec_clear, .page = rec_page};
    f->in = taas_interp_new();
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    taas_interp_free(f->in);
    taas_buf_free(&f->rec.log);
    json_decref(f->rec.display);
    json_decref(f->result);
    free(f);
    return 0;
}

static int group_setup(void **state) {
    (void)state;
    dir = pu_mkdtemp();
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    pu_rmdir(dir);
    return 0;
}

static taas_run_state run(fixture *f, const char *code) {
    json_decref(f->result);
    f->result = NULL;
    return taas_interp_run(f->in, code, &f->io, &f->result, &f->err);
}

static const char *text_of(fixture *f, const char *code) {
    taas_run_state st = run(f, code);
    if (st != TAAS_RUN_DONE) fprintf(stderr, "%s: %s: %s\n", code, f->err.ename, f->err.message);
    assert_int_equal(st, TAAS_RUN_DONE);
    assert_non_null(f->result);
    return json_string_value(json_object_get(f->result, "text/plain"));
}

static void expect_error(fixture *f, taas_run_state st, const char *ename, const char *part, int line) {
    if (st != TAAS_RUN_ERROR || strcmp(f->err.ename, ename) || !strstr(f->err.message, part))
        fprintf(stderr, "got %d %s: %s (hint: %s)\n", st, f->err.ename, f->err.message, f->err.hint);
    assert_int_equal(st, TAAS_RUN_ERROR);
    assert_string_equal(f->err.ename, ename);
    assert_non_null(strstr(f->err.message, part));
    assert_int_equal(f->err.pos.line, line);
}

/* No child process is left, running or unreaped. */
static void assert_no_children(void) {
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static char *fifo(const char *name) {
    char *p = malloc(PATH_MAX);
    snprintf(p, PATH_MAX, "%s/%s", dir, name);
    unlink(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    return p;
}

/* ---- finding taas-worker ------------------------------------------------------------- */

static void test_find_worker(void **state) {
    (void)state;
    char out[PATH_MAX], self[PATH_MAX], want[PATH_MAX], path[2 * PATH_MAX];
    taas_error err;
    taas_error_clear(&err);
    assert_int_equal(taas_worker_find_in("/nonexistent/taas-worker", NULL, NULL, out, sizeof out, &err), -1);
    assert_string_equal(err.ename, "TaasWorkerError");
    assert_string_equal(err.message, "TAAS_WORKER names /nonexistent/taas-worker, which is not an executable file");
    assert_non_null(strstr(err.hint, "set TAAS_WORKER to the path of taas-worker"));

    char *bin = pu_mkdtemp(), *other = pu_mkdtemp();
    snprintf(self, sizeof self, "%s/taas-kernel", bin);
    snprintf(path, sizeof path, "/nonexistent:%s", other);
    /* nothing anywhere: the message names the kernel's folder */
    taas_error_clear(&err);
    assert_int_equal(taas_worker_find_in(NULL, self, path, out, sizeof out, &err), -1);
    char msg[2 * PATH_MAX];
    snprintf(msg, sizeof msg, "cannot find taas-worker: it is neither next to taas-kernel (in %s) nor on PATH", bin);
    assert_string_equal(err.message, msg);
    assert_non_null(strstr(err.hint, "cmake --install"));
    /* a file that is not executable does not count; one on PATH does */
    snprintf(want, sizeof want, "%s/taas-worker", bin);
    FILE *fp = fopen(want, "w");
    fclose(fp);
    assert_int_equal(taas_worker_find_in(NULL, self, path, out, sizeof out, &err), -1);
    snprintf(want, sizeof want, "%s/taas-worker", other);
    assert_int_equal(symlink(pu_worker(), want), 0);
    assert_int_equal(taas_worker_find_in(NULL, self, path, out, sizeof out, &err), 0);
    assert_string_equal(out, want);
    /* next to the kernel wins over PATH */
    snprintf(want, sizeof want, "%s/taas-worker", bin);
    unlink(want);
    assert_int_equal(symlink(pu_worker(), want), 0);
    assert_int_equal(taas_worker_find_in(NULL, self, path, out, sizeof out, &err), 0);
    assert_string_equal(out, want);
    /* and TAAS_WORKER over both */
    assert_int_equal(taas_worker_find_in(pu_worker(), self, path, out, sizeof out, &err), 0);
    assert_string_equal(out, pu_worker());
    pu_rmdir(bin);
    pu_rmdir(other);
}

/* ---- displays and len() --------------------------------------------------------------- */

static void test_dataset_display(void **state) {
    fixture *f = *state;
    const char *t = text_of(f, "FashionMNIST(train=False)");
    assert_non_null(strstr(t, "Dataset FashionMNIST\n    Number of datapoints: 10000\n"));
    assert_non_null(strstr(t, "\n    Sample shape: (1, 28, 28)\n"));
    assert_non_null(strstr(t, "\n    Classes: 10 (T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, "
                              "Sneaker, Bag, Ankle boot)\n"));
    assert_non_null(strstr(t, "\n    Source: /usr/share/datasets/fashion-mnist"));
    const char *h = json_string_value(json_object_get(f->result, "text/html"));
    assert_non_null(h);
    assert_non_null(strstr(h, "<th style=\"text-align:left\">Samples</th><td style=\"text-align:left\">10,000</td>"));
    assert_non_null(strstr(h, ">Sample shape</th><td style=\"text-align:left\">(1, 28, 28)</td>"));

    t = text_of(f, "tf = Compose([ToTensor(), Resize((14, 14))])\n"
                   "DataLoader(FashionMNIST(train=False, transform=tf), batch_size=1000, drop_last=True)");
    assert_non_null(strstr(t, "DataLoader(batch_size=1000, "));
    assert_non_null(strstr(t, "\n        Sample shape: (1, 14, 14)\n"));
    assert_non_null(strstr(t, "\n    Batches per epoch: 10"));
    h = json_string_value(json_object_get(f->result, "text/html"));
    assert_non_null(strstr(h, "DataLoader over FashionMNIST"));
    assert_non_null(strstr(h, ">Batches per epoch</th><td style=\"text-align:left\">10</td>"));
    /* display() shows the same */
    assert_int_equal(run(f, "display(FashionMNIST(train=False))"), TAAS_RUN_DONE);
    assert_non_null(strstr(json_string_value(json_object_get(f->rec.display, "text/plain")), "Sample shape"));
    /* print() shows the repr without reading data */
    assert_int_equal(run(f, "print(NpyDataset('/nonexistent/a.npy', '/nonexistent/b.npy'))"), TAAS_RUN_DONE);
    assert_non_null(strstr(f->rec.log.data, "Number of datapoints: unknown until the loaders read it"));
}

static void npy_args(char *out, size_t n, const char *stem) {
    snprintf(out, n, "'%s/%s-images.npy', '%s/%s-labels.npy'", dir, stem, dir, stem);
}

static void test_len_of_every_dataset_kind(void **state) {
    fixture *f = *state;
    pu_write_npy_pair(dir, "ten", 10, 4, 4);
    char code[4 * PATH_MAX], a[2 * PATH_MAX + 64];
    npy_args(a, sizeof a, "ten");
    snprintf(code, sizeof code, "ds = NpyDataset(%s)\nlen(ds)", a);
    assert_string_equal(text_of(f, code), "10");
    assert_string_equal(text_of(f, "len(DataLoader(ds, batch_size=3))"), "4");
    assert_string_equal(text_of(f, "len(DataLoader(ds, batch_size=3, drop_last=True))"), "3");
    assert_string_equal(text_of(f, "len(DataLoader(ds, batch_size=10, drop_last=True))"), "1");
    assert_string_equal(text_of(f, "len(DataLoader(ds, batch_size=11, drop_last=True))"), "0");
    const char *t = text_of(f, "DataLoader(ds, batch_size=3)");
    assert_non_null(strstr(t, "Number of datapoints: 10\n"));
    assert_non_null(strstr(t, "\n    Batches per epoch: 4"));
    /* the files change: the cached answer is not used */
    pu_write_npy_pair(dir, "ten", 13, 4, 4);
    assert_string_equal(text_of(f, "len(ds)"), "13");
    assert_string_equal(text_of(f, "len(DataLoader(ds, batch_size=3))"), "5");
    /* the standard splits too are what their files' headers say (issue 16, defect 13) */
    assert_string_equal(text_of(f, "len(FashionMNIST(train=False))"), "10000");
    assert_string_equal(text_of(f, "len(DataLoader(FashionMNIST(), batch_size=64))"), "938");
    taas_run_state st = run(f, "len(MNIST(root='/nonexistent'))");
    expect_error(f, st, "TaasIOError", "/nonexistent", 1);
    st = run(f, "len(DataLoader(MNIST(root='/nonexistent'), batch_size=64))");
    expect_error(f, st, "TaasIOError", "/nonexistent", 1);
}

/* An ImageFolder's classes and class_to_idx come from the loaders' listing. */
static void write_jpeg(const char *rel) {
    char path[2 * PATH_MAX], sub[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(sub, sizeof sub, "%s", path);
    for (char *q = sub + strlen(dir) + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            mkdir(sub, 0755);
            *q = '/';
        }
    unsigned char *px = fx_pic_make(10, 6, 3, 1);
    taas_buf b = TAAS_BUF_INIT;
    fx_jpeg(&b, 10, 6, 3, px, 90);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b.data, 1, b.len, fp), b.len);
    fclose(fp);
    taas_buf_free(&b);
    free(px);
}

static void test_image_folder_display(void **state) {
    fixture *f = *state;
    write_jpeg("imgs/cat/1.jpg");
    write_jpeg("imgs/cat/2.JPEG");
    write_jpeg("imgs/dog/3.jpg");
    char code[4 * PATH_MAX];
    snprintf(code, sizeof code, "ImageFolder('%s/imgs', transform=ToTensor())", dir);
    const char *t = text_of(f, code);
    char want[4 * PATH_MAX];
    snprintf(want, sizeof want, "Dataset ImageFolder\n    Number of datapoints: 3\n    Root location: %s/imgs\n"
             "    class_to_idx: {'cat': 0, 'dog': 1}\n    Sample shape: (3, 6, 10) for sample 0; samples vary\n"
             "    Classes: 2 (cat, dog)\n", dir);
    if (!strstr(t, want)) fail_msg("got:\n%s\nwanted in it:\n%s", t, want);
    /* the ImageNet recipe's transforms reach the loaders (spec and probe) */
    snprintf(code, sizeof code, "ImageFolder('%s/imgs', transform=Compose([RandomResizedCrop(4, scale=(0.5, 1.0)), "
             "ColorJitter(0.4, 0.4, 0.4, 0.1), RandomHorizontalFlip(), ToTensor(), Normalize((0.485, 0.456, "
             "0.406), (0.229, 0.224, 0.225))]))", dir);
    t = text_of(f, code);
    if (!strstr(t, "\n    Sample shape: (3, 4, 4)\n")) fail_msg("got:\n%s", t);
    snprintf(code, sizeof code, "len(DataLoader(ImageFolder('%s/imgs'), batch_size=2))", dir);
    assert_string_equal(text_of(f, code), "2");
    write_jpeg("imgs/dog/4.webp");
    snprintf(code, sizeof code, "ImageFolder('%s/imgs')", dir);
    expect_error(f, run(f, code), "TaasDataError", "dog/4.webp", 1);
}

static void test_probe_failure_is_the_cells_error(void **state) {
    fixture *f = *state;
    taas_run_state st = run(f, "x = 1\nNpyDataset('/nonexistent/a.npy', '/nonexistent/b.npy')");
    expect_error(f, st, "TaasIOError", "/nonexistent/a.npy", 2);
    assert_int_equal(f->err.pos.col, 1);
    assert_true(f->err.hint[0] != '\0');
    assert_string_equal(text_of(f, "x"), "1");
    st = run(f, "n = len(DataLoader(NpyDataset('/nonexistent/a.npy', '/nonexistent/b.npy')))");
    expect_error(f, st, "TaasIOError", "/nonexistent/a.npy", 1);
    st = run(f, "display(FashionMNIST(root='/nonexistent/fm'))");
    expect_error(f, st, "TaasIOError", "/nonexistent/fm", 1);
    /* a transform that cannot take the images fails where the data is looked at */
    st = run(f, "FashionMNIST(train=False, transform=Compose([ToTensor(), "
                "Normalize((0.5, 0.5, 0.5), (0.2, 0.2, 0.2))]))");
    expect_error(f, st, "TaasValueError", "the transform cannot take FashionMNIST's 28x28x1 images", 1);
    assert_no_children();
}

static void test_probe_timeout_and_interrupt(void **state) {
    fixture *f = *state;
    char *p = fifo("stalled.npy");
    char code[2 * PATH_MAX + 64];
    snprintf(code, sizeof code, "NpyDataset('%s', '%s')", p, p);
    setenv("TAAS_PROBE_TIMEOUT", "0.3", 1);
    double t0 = taas_now();
    taas_run_state st = run(f, code);
    unsetenv("TAAS_PROBE_TIMEOUT");
    expect_error(f, st, "TaasTimeoutError", "taas-worker probe took longer than 0.3 s and was stopped", 1);
    assert_non_null(strstr(f->err.hint, "raise TAAS_PROBE_TIMEOUT (seconds)"));
    assert_true(taas_now() - t0 < 5);
    assert_no_children();
    /* the kernel's signal pipe is readable: the probe ends at once */
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(write(pfd[1], "i", 1), 1);
    taas_interp_set_interrupt_fd(f->in, pfd[0]);
    st = run(f, code);
    expect_error(f, st, "KeyboardInterrupt", "interrupted while taas-worker probe was reading the data", 1);
    assert_no_children();
    taas_interp_set_interrupt_fd(f->in, -1);
    close(pfd[0]);
    close(pfd[1]);
    free(p);
}

/* ---- show() --------------------------------------------------------------------------- */

/* Waits as the kernel does: on the fd, up to the deadline, then resumes. */
static taas_run_state wait_cell(fixture *f) {
    taas_run_state st = TAAS_RUN_WAIT;
    while (st == TAAS_RUN_WAIT) {
        int fd = taas_interp_wait_fd(f->in);
        double left = taas_interp_deadline(f->in) - taas_now();
        if (left > 0) {
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, fd >= 0 ? 1 : 0, (int)ceil(left * 1000));
        }
        json_decref(f->result);
        f->result = NULL;
        st = taas_interp_resume(f->in, &f->result, &f->err);
    }
    return st;
}

static size_t unbase64(const char *s, unsigned char *out, size_t cap) {
    size_t n = 0;
    unsigned v = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *p = strchr(abc, *s);
        assert_non_null(p);
        v = v << 6 | (unsigned)(p - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n < cap) out[n] = (unsigned char)(v >> bits);
            n++;
        }
    }
    return n;
}

static void test_show_waits_on_the_worker(void **state) {
    fixture *f = *state;
    assert_int_equal(run(f, "print('before')\nshow(FashionMNIST(train=False), n=4)\nprint('after')"), TAAS_RUN_WAIT);
    assert_true(taas_interp_wait_fd(f->in) >= 0);
    assert_string_equal(f->rec.log.data, "stdout:before\n|");
    assert_int_equal(wait_cell(f), TAAS_RUN_DONE);
    assert_int_equal(taas_interp_wait_fd(f->in), -1);
    assert_string_equal(f->rec.log.data, "stdout:before\n|display|stdout:after\n|");
    const char *b64 = json_string_value(json_object_get(f->rec.display, "image/png"));
    const char *text = json_string_value(json_object_get(f->rec.display, "text/plain"));
    assert_non_null(b64);
    assert_non_null(strstr(text, "FashionMNIST: 4 of 10000 samples (the first 4), as decoded\n"));
    assert_non_null(strstr(text, "#0 Ankle boot | #1 Pullover | #2 Trouser | #3 Trouser"));
    unsigned char png[24];
    assert_true(unbase64(b64, png, sizeof png) > 1000);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    assert_memory_equal(png + 12, "IHDR", 4);
    /* a DataLoader shows its dataset; the value of show() is None */
    assert_int_equal(run(f, "s = show(DataLoader(FashionMNIST(train=False), batch_size=8), n=2, seed=1)"),
                     TAAS_RUN_WAIT);
    assert_int_equal(wait_cell(f), TAAS_RUN_DONE);
    assert_null(f->result);
    assert_non_null(strstr(json_string_value(json_object_get(f->rec.display, "text/plain")), "(seed 1)"));
    assert_int_equal(run(f, "print(s)"), TAAS_RUN_DONE);
    assert_non_null(strstr(f->rec.log.data, "stdout:None\n|"));
    assert_no_children();
}

static void test_show_interrupt_leaves_no_worker(void **state) {
    fixture *f = *state;
    char *p = fifo("never.npy");
    char code[2 * PATH_MAX + 64];
    snprintf(code, sizeof code, "x = 1\nshow(NpyDataset('%s', '%s'))\nx = 2", p, p);
    assert_int_equal(run(f, code), TAAS_RUN_WAIT);
    struct pollfd pf = {taas_interp_wait_fd(f->in), POLLIN, 0};
    assert_int_equal(poll(&pf, 1, 200), 0);             /* the worker is stuck opening the FIFO */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), 0);    /* and alive */
    taas_interp_interrupt(f->in);
    taas_run_state st = taas_interp_resume(f->in, &f->result, &f->err);
    expect_error(f, st, "KeyboardInterrupt", "interrupted", 2);
    assert_no_children();
    assert_string_equal(text_of(f, "x"), "1");

    /* a new cell drops a waiting one, and its worker */
    assert_int_equal(run(f, code), TAAS_RUN_WAIT);
    assert_string_equal(text_of(f, "x"), "1");
    assert_no_children();
    /* so does the end of the session */
    assert_int_equal(run(f, code), TAAS_RUN_WAIT);
    taas_interp_free(f->in);
    f->in = taas_interp_new();
    assert_no_children();
    free(p);
}

static void test_show_timeout(void **state) {
    fixture *f = *state;
    char *p = fifo("slow.npy");
    char code[2 * PATH_MAX + 64];
    snprintf(code, sizeof code, "show(NpyDataset('%s', '%s'))", p, p);
    setenv("TAAS_SHOW_TIMEOUT", "0.3", 1);
    taas_run_state st = run(f, code);
    unsetenv("TAAS_SHOW_TIMEOUT");
    assert_int_equal(st, TAAS_RUN_WAIT);
    expect_error(f, wait_cell(f), "TaasTimeoutError", "show() of NpyDataset took longer than 0.3 s", 1);
    assert_non_null(strstr(f->err.hint, "TAAS_SHOW_TIMEOUT"));
    assert_no_children();
    free(p);
}

static void test_show_errors(void **state) {
    fixture *f = *state;
    expect_error(f, run(f, "show(5)"), "TaasTypeError", "show() needs a dataset or a DataLoader, not int", 1);
    assert_non_null(strstr(f->err.hint, "Signature: show(data, n=16, seed=None)"));
    expect_error(f, run(f, "show(FashionMNIST(), n=0)"), "TaasValueError", "n", 1);
    expect_error(f, run(f, "[show(FashionMNIST())]"), "TaasSyntaxError", "show() waits", 1);
    /* the worker's own error, as it wrote it */
    assert_int_equal(run(f, "y = 0\nshow(NpyDataset('/nonexistent/s.npy', '/nonexistent/t.npy'))"), TAAS_RUN_WAIT);
    expect_error(f, wait_cell(f), "TaasIOError", "/nonexistent/s.npy", 2);
    assert_true(f->err.hint[0] != '\0');
    assert_no_children();
    /* no taas-worker to be found */
    setenv("TAAS_WORKER", "/nonexistent/taas-worker", 1);
    expect_error(f, run(f, "show(FashionMNIST())"), "TaasWorkerError", "TAAS_WORKER names /nonexistent", 1);
    expect_error(f, run(f, "len(NpyDataset('a.npy', 'b.npy'))"), "TaasWorkerError", "TAAS_WORKER names", 1);
    setenv("TAAS_WORKER", pu_worker(), 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_worker),
        T(test_dataset_display),
        T(test_len_of_every_dataset_kind),
        T(test_image_folder_display),
        T(test_probe_failure_is_the_cells_error),
        T(test_probe_timeout_and_interrupt),
        T(test_show_waits_on_the_worker),
        T(test_show_interrupt_leaves_no_worker),
        T(test_show_timeout),
        T(test_show_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
