/* Writes the seed corpora of the harnesses (tests/fuzz/corpus/<harness>/): small valid
 * inputs, made with the test suite's own fixture writers (tests/unit/formats_testutil.h:
 * IDX, .npy, tar, gzip, PNG and JPEG through zlib, libpng and libjpeg) and the project's
 * writers (safetensors, batches), plus hand-written cells, messages and files. The corpora
 * are committed; run this again only to change them:
 *
 *   build-fuzz/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus
 *
 * The output is the same on every run (no times, no random numbers). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "batch.h"
#include "buf.h"
#include "formats_testutil.h"
#include "safetensors.h"

static const char *OUT;

static void put(const char *harness, const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", OUT, harness);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/%s", OUT, harness, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void put_str(const char *harness, const char *name, const char *s) {
    put(harness, name, s, strlen(s));
}

static void put_buf(const char *harness, const char *name, taas_buf *b) {
    put(harness, name, b->data, b->len);
    taas_buf_free(b);
}

/* ---- text ------------------------------------------------------------------------------- */

static const char *const CELLS[] = {
    "x = 1 + 2 * 3 ** 2 // 4 % 5 - -6\nx\n",
    "s = 'a' 'b' \"c\" + '''multi\nline''' + r'raw\\n' + '\\u00e9\\x41\\N{BULLET}' + \"\xc3\xa9\"\n"
    "print(s, len(s), sep='-', end='!\\n')\n",
    "net = Sequential(\n    Conv2d(1, 32, 3, 1), ReLU(), Conv2d(32, 64, 3, 1), ReLU(),\n"
    "    MaxPool2d(2), Dropout(0.25), Flatten(),\n    Linear(9216, 128), BatchNorm1d(128), ReLU(), Dropout(0.5),\n"
    "    Linear(128, 10), LogSoftmax(dim=1))\nnet\n",
    "net = Sequential(Linear(4, 8), ReLU(), Dropout(0.5), Linear(8, 3), LogSoftmax(dim=1))\n"
    "summary(net, input_size=(2, 4))\nlen(net)\n",
    "t = Compose([ToTensor(), Normalize((0.5,), (0.25,)), RandomCrop(28, padding=4),\n"
    "             RandomHorizontalFlip(p=0.3), Resize(32), CenterCrop((28, 28))])\nt\n",
    "opt = Adam(lr=1e-3, betas=(0.9, 0.999), weight_decay=0)\n"
    "sched = OneCycleLR(max_lr=0.1, epochs=3, steps_per_epoch=10)\n"
    "loss = CrossEntropyLoss(label_smoothing=0.1)\nopt, sched, loss, SGD(lr=0.1, momentum=0.9, nesterov=True)\n",
    "help(Conv2d)\nhelp()\nhelp('Linear')\nhelp(nn.MaxPool2d)\n",
    "display(Linear(2, 3), display_id='a')\ndisplay(ReLU(), display_id='a', update=True)\n"
    "clear_output(wait=True)\nsleep(0.01)\n[1, 2.5, None, True, (3,)]\n",
    "net = Linear(9000, 128, bias=Flase)\n",
    "x = (1,\n",
    "def f(): pass\n",
    "x = 1 if y else 2\n",
    "#!g4.4\n#pragma taas --gpus 8 --cpus 2 --units 1000\n"
    "history = fit(net, train, epochs=1, loss=NLLLoss(), optimizer=SGD(lr=0.1))\n",
    "transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])\n"
    "train = DataLoader(FashionMNIST(train=True, transform=transform), batch_size=64, shuffle=True)\n"
    "register(train)\ntrain\n",
    "Sequential(Conv2d(3, 16, kernel_size=(3, 5), stride=2, padding=1, dilation=1, groups=1, bias=False,\n"
    "                  padding_mode='reflect'), BatchNorm2d(16), MaxPool2d(2, ceil_mode=True),\n"
    "           AvgPool2d(3, stride=1, padding=1), LeakyReLU(0.2), GELU(approximate='tanh'), Flatten(),\n"
    "           Linear(10, 10), Softmax(dim=1))\n",
    "x = 1 + \\\n    2  # a comment\n\n# only a comment\n(x,\n x)\n",
    "1_000_000, 0x1f, 0o17, 0b101, 1e-3, 1.5e+300, .5, 5., 1e400, 10**20, -9223372036854775808, 7 / 0\n",
    "a = 'x' * 3\nb = [a, a] + [1]\nc = (1, 2) * 2\nprint(a, b, c, file='stderr')\nlen(b)\n",
    "StepLR(step_size=1, gamma=0.7), MultiStepLR(milestones=[1, 2], gamma=0.1), "
    "CosineAnnealingLR(T_max=10, eta_min=0), RMSprop(lr=0.01, alpha=0.99, centered=True), Adadelta(lr=1.0, rho=0.9)\n",
    "net = models.resnet18(num_classes=10)\nb = net\nnet.requires_grad_(False)\n"
    "net.fc = nn.Linear(net.fc.in_features, 3)\nnet.layer4[-1] = BasicBlock(512, 512)\nb.layer1[0].conv1\nnet\n",
    "s = Sequential(Flatten(), Linear(4, 8), Identity(1, a=2), AdaptiveAvgPool2d((1, 1)))\ns[-1] = ReLU()\n"
    "s[0].requires_grad_()\ns[1].out_features\ns[0] = s\n",
    "Bottleneck(64, 64, stride=2, groups=32, base_width=4, downsample=Sequential(Conv2d(64, 256, 1, stride=2, "
    "bias=False), BatchNorm2d(256))).downsample[0]\nresnet50(weights='x')\n",
};

static const char *const PRAGMAS[] = {
    "#pragma taas --gpus 8 --cpus 2 --units 20480000\nfit(net, train)\n",
    "#!g4.4\n#pragma taas --gpus 8\nfit(net, train)\n",
    "# a comment\n#! g2.8  # eight GPUs\n  # pragma taas --gpus=16 --detach --units 20_480_000\r\nx = 1\n",
    "#pragma taas --gpus 3 --cpu 2\n",
    "#pragma taas --gpus 4 --gpus 4\n",
    "#pragma taas\n",
    "x = 1\n#pragma taas --gpus 1\n",
    "s = '''\n#pragma taas --gpus 1\n'''\n#!c1.2\n",
    "#!nosuch\n#pragma taas --gpus 2\n",
    "#!g4.4\n#pragma taas --gpus 8 --cpus auto:4 --budget 2.50\nfit(net, train)\n",
    "#pragma taas --gpus=2 --cpus=auto --budget=1.5h --units 1_000  # a time\nfit(net, train)\n",
    "#pragma taas --gpus 1 --budget 2 h --cpus Auto\n",
    "#pragma taas --gpus 1 --cpus auto: --budget $5\n",
    "#pragma taas --gpus 1 --budget 9007199254740993 --budget 1e3 --budget 366d\n",
};

static const char *const CONFIGS[] = {
    "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"description\": \"four GPUs\"}}}",
    "{\"configurations\": {\"a100x8\": {\"gpus\": 8, \"cpus\": 128, \"partition\": \"gpu\", \"gres\": \"gpu:a100\","
    " \"constraint\": \"a100&ib\"}, \"c1.4\": {\"gpus\": 0, \"cpus\": 4, \"partition\": \"cpu\"}},\n"
    " \"cluster\": {\"backend\": \"slurm\", \"munge_socket\": \"/run/munge/munge.socket.2\"}}",
    "{\"cluster\": {\"backend\": \"ssh\", \"ssh_config\": \"/home/me/.ssh/config\", \"kernel_address\": \"10.0.0.1\",\n"
    "  \"loaders\": \"c1.4\", \"worker\": \"/usr/local/bin/taas-worker\",\n"
    "  \"hosts\": [{\"name\": \"gpu1\", \"address\": \"10.0.0.21\", \"gpus\": 8, \"cpus\": 96},\n"
    "            {\"name\": \"cpu1\", \"gpus\": 0, \"cpus\": 16}]}}",
    "{\"cluster\": {\"backend\": \"local\"}}",
    "{\"configurations\": {\"g2.8\": {\"gpus\": 2, \"cpus\": 8}, \"bad name\": {\"gpus\": 1}}}",
    "{\"configuration\": {}}",
    "[1, 2]",
    "{\"configurations\": {\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"price_per_hour\": 12.5},"
    " \"c1.2\": {\"gpus\": 0, \"cpus\": 2, \"price_per_hour\": 0},\n"
    " \"g2.8\": {\"gpus\": 8, \"cpus\": 96, \"price_per_hour\": 1e9}}, \"cluster\": {\"backend\": \"local\", \"loaders\": \"c1.2\"}}",
    "{\"configurations\": {"
    "\"g4.4\": {\"gpus\": 4, \"cpus\": 32, \"price_per_hour\": -2},"
    " \"c1.2\": {\"gpus\": 0, \"cpus\": 2, \"price_per_hour\": \"3\"}}}",
    "{\"cluster\": {\"backend\": \"ssh\", \"ssh\": \"/usr/bin/ssh\", \"kernels\": \"avx2\", \"hosts\": [{\"name\": \"gpu1\"}]}}",
    "{\"configurations\": {\"g\": {\"gpus\": 1, \"cpus\": 1, \"partition\": \"a;b\", \"gres\": \"$(id)\", \"constraint\": \"[a&b|c]`id`\"}}, \"cluster\": {\"backend\": \"ssh\", \"ssh\": \"/usr/bin/ssh;id\", \"ssh_config\": \"/tmp/x/cfg$(touch${IFS}/tmp/pwned)\", \"worker\": \"/opt/w `id`\", \"kernel_address\": \"10.0.0.1|id\", \"hosts\": [{\"name\": \"-v\", \"gpus\": 1, \"cpus\": 1}, {\"name\": \"h\", \"address\": \"me@h'\\\"&\\n\", \"gpus\": 0, \"cpus\": 1}]}}",
};

static const char *const CONNECTIONS[] = {
    "{\"shell_port\": 53794, \"iopub_port\": 53795, \"stdin_port\": 53796, \"control_port\": 53797,\n"
    " \"hb_port\": 53798, \"ip\": \"127.0.0.1\", \"key\": \"a0436f6c-1916-498b-8eb9-e81ab9368e84\",\n"
    " \"transport\": \"tcp\", \"signature_scheme\": \"hmac-sha256\", \"kernel_name\": \"taas\"}",
    "{\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": 5,\n"
    " \"ip\": \"/tmp/kernel-ipc\", \"key\": \"\", \"transport\": \"ipc\", \"signature_scheme\": \"hmac-sha256\"}",
    "{\"shell_port\": \"53794\", \"iopub_port\": 0, \"hb_port\": 70000, \"signature_scheme\": \"hmac-md5\"}",
    "{\"shell_port\": 9, \"iopub_port\": 9, \"stdin_port\": 9, \"control_port\": 9, \"hb_port\": 9,\n"
    " \"ip\": \"::1\", \"key\": \"k\\u00e9y\\u0000\"}",
};

/* The n texts as the seeds <harness>00, <harness>01, ... */
static void put_texts(const char *harness, const char *const *texts, size_t n) {
    char name[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%02zu", harness, i);
        put_str(harness, name, texts[i]);
    }
}

/* ---- Jupyter messages: a flags byte, then frames separated by 0x1e -------------------- */

static void wire(const char *name, int flags, const char *const *frames, size_t n) {
    taas_buf b = {0};
    taas_buf_putc(&b, (char)flags);
    for (size_t i = 0; i < n; i++) {
        if (i) taas_buf_putc(&b, 0x1e);
        taas_buf_puts(&b, frames[i]);
    }
    put_buf("wire", name, &b);
}

#define HDR(type) \
    "{\"msg_id\": \"m1\", \"session\": \"s1\", \"username\": \"u\", \"date\": \"2024-01-01T00:00:00.000000Z\", " \
    "\"msg_type\": \"" type "\", \"version\": \"5.3\"}"

static void wire_seeds(void) {
    const char *exec[] = {"client-id", "<IDS|MSG>", "", HDR("execute_request"), "{}", "{}",
                          ("{\"code\": \"x = 1\\nx\", \"silent\": false, \"store_history\": true, "
                           "\"user_expressions\": {}, \"allow_stdin\": false, \"stop_on_error\": true}")};
    wire("execute_request", 1, exec, 7);
    const char *info[] = {"<IDS|MSG>", "", HDR("kernel_info_request"), "{}", "{}", "{}"};
    wire("kernel_info_request", 1, info, 6);
    const char *complete[] = {"a", "b", "<IDS|MSG>", "", HDR("complete_request"), HDR("execute_request"),
                              "{\"x\": [1, 2.5, null]}", "{\"code\": \"Con\", \"cursor_pos\": 3}", "buffer one",
                              "\x01\x02"};
    wire("complete_request_replayed", 5, complete, 10);
    const char *isc[] = {"<IDS|MSG>", "", HDR("is_complete_request"), "{}", "{}", "{\"code\": \"x = (1,\"}"};
    wire("is_complete_unsigned", 2, isc, 6);
    const char *bad[] = {"id", "<IDS|MSG>", "0000000000000000000000000000000000000000000000000000000000000000",
                         HDR("shutdown_request"), "{}", "{}", "{\"restart\": false}"};
    wire("bad_signature", 0, bad, 7);
    const char *uni[] = {"<IDS|MSG>", "",
                         ("{\"msg_id\": \"\\u00e9\\ud83d\\ude00\", \"msg_type\": \"inspect_request\", \"session\": "
                          "\"\xc3\xa9\xff\", \"version\": \"5.3\", \"x\": \"\\u0000\"}"),
                         "{}", "{}", "{\"code\": \"Linear\", \"cursor_pos\": 6, \"detail_level\": 1}"};
    wire("unicode_header", 1, uni, 6);
    const char *notjson[] = {"<IDS|MSG>", "", HDR("history_request"), "{}", "{}", "{\"hist_access_type\": "};
    wire("undecodable_content", 1, notjson, 6);
    const char *notype[] = {"<IDS|MSG>", "", "{\"msg_id\": \"1\"}", "{}", "{}", "{}"};
    wire("no_msg_type", 1, notype, 6);
}

/* ---- job control messages: flags, identity, then messages (0x1f) of frames (0x1e) ----- */

static void jobctl(const char *name, int flags, const char *id, const char *const *msgs, size_t n) {
    taas_buf b = {0};
    taas_buf_putc(&b, (char)flags);
    taas_buf_puts(&b, id);
    for (size_t i = 0; i < n; i++) {
        taas_buf_putc(&b, 0x1f);
        taas_buf_puts(&b, msgs[i]);
    }
    put_buf("jobctl", name, &b);
}

static void jobctl_seeds(void) {
    const char *fit[] = {
        "{\"t\": \"hello\", \"role\": \"trainer\", \"rank\": 0, \"host\": \"h\", \"pid\": 42, \"data\": \"ipc:///x\"}",
        "{\"t\": \"start\", \"epochs\": 2, \"steps_per_epoch\": 3, \"samples\": 192, \"params\": 1000}",
        "{\"t\": \"step\", \"epoch\": 1, \"step\": 1, \"steps\": 3, \"loss\": 2.3, \"samples_per_s\": 100.5, "
        "\"wait\": 0.1}",
        "{\"t\": \"epoch\", \"epoch\": 1, \"train_loss\": 2.1, \"val_loss\": null, \"val_accuracy\": 0.5, "
        "\"time_s\": 1.5, \"samples_per_s\": 128, \"steps\": 3, \"checksum\": \"ab\", \"samples\": 96}",
        "{\"t\": \"log\", \"text\": \"rank 0: hello\\n\"}",
        "{\"t\": \"epoch\", \"epoch\": 2, \"train_loss\": 1.9, \"val_loss\": 1.8, \"val_accuracy\": 0.61, "
        "\"time_s\": 1.4, \"samples_per_s\": 130}",
        "{\"t\": \"done\", \"steps\": 6, \"history\": [], \"checksums\": [], \"interrupted\": false}\x1e"
        "weights bytes",
        "{\"t\": \"error\", \"ename\": \"TaasValueError\", \"message\": \"loss is nan\", \"hint\": \"\", \"step\": 3}",
    };
    jobctl("fit", 0, "rank.0", fit, sizeof fit / sizeof fit[0]);
    const char *resumed[] = {
        "{\"t\": \"start\", \"epochs\": 3, \"steps_per_epoch\": 2, \"total_steps\": 6, \"resumed\": {\"epoch\": 2, "
        "\"step\": 1}, \"history\": [{\"epoch\": 1, \"train_loss\": 0.5, \"steps\": 2, \"time_s\": 1, "
        "\"samples_per_s\": 10}]}",
        "{\"t\": \"step\", \"epoch\": 2, \"step\": 2, \"loss\": 0.4, \"samples_per_s\": 12}",
        "{\"t\": \"ended\"}", "not json", "[\"t\"]", "{\"t\": 5}", "{}",
    };
    jobctl("resumed", 0, "loader.0.1.0", resumed, sizeof resumed / sizeof resumed[0]);
    const char *to_worker[] = {"{\"t\": \"spec\", \"job\": {}}\x1e" "blob", "{\"t\": \"start\", \"ranks\": "
                               "[\"ipc:///tmp/r0\"]}", "{\"t\": \"hb\"}", "{\"t\": \"cancel\"}", "{\"t\": \"bye\"}"};
    jobctl("to_worker", 1, "rank.1", to_worker, sizeof to_worker / sizeof to_worker[0]);
}

/* ---- data plane: flags, then messages (0x1f) of frames (0x1e); batches are binary ------ */

/* b holds the flags byte and the messages so far */
static void stream_msg(taas_buf *b, char kind, const void *body, size_t n) {
    if (b->len > 1) taas_buf_putc(b, 0x1f);
    taas_buf_putc(b, kind);
    if (body) {
        taas_buf_putc(b, 0x1e);
        taas_buf_add(b, body, n);
    }
}

static void batch_msg(taas_buf *b, uint64_t epoch, uint64_t k, uint32_t n, uint32_t c, uint32_t h, uint32_t w) {
    taas_batch *x = taas_batch_alloc(epoch, k, n, c, h, w);
    if (!x) abort();
    size_t floats = (size_t)n * c * h * w;
    for (size_t i = 0; i < floats; i++) x->images[i] = (float)i * 0.5f;
    for (uint32_t i = 0; i < n; i++) {
        x->labels[i] = i % 10;
        x->indices[i] = k * n + i;
    }
    stream_msg(b, 'B', x->buf, x->buf_len);
    taas_batch_free(x);
}

static void stream_seeds(void) {
    taas_buf b = {0};
    taas_buf_putc(&b, 1); /* the harness says hello first */
    batch_msg(&b, 0, 0, 2, 1, 2, 2);
    batch_msg(&b, 0, 2, 1, 3, 1, 1);
    put_buf("stream", "batches", &b);

    taas_buf c = {0};
    taas_buf_putc(&c, 0);
    const char hello[] = "{\"stream\": 1, \"worker\": 0, \"pid\": 7}";
    stream_msg(&c, 'H', hello, sizeof hello - 1);
    batch_msg(&c, 0, 0, 1, 1, 3, 3);
    batch_msg(&c, 0, 0, 1, 1, 3, 3); /* a duplicate */
    const char end[] = "{\"stream\": 1, \"worker\": 0}";
    stream_msg(&c, 'E', end, sizeof end - 1);
    put_buf("stream", "own_hello", &c);

    taas_buf d = {0};
    taas_buf_putc(&d, 1);
    const char bad[] = "{\"stream\": 5, \"worker\": -1}";
    stream_msg(&d, 'H', bad, sizeof bad - 1);
    stream_msg(&d, 'X', "??", 2);
    for (int i = 0; i < 5; i++) batch_msg(&d, 0, 2 * (uint64_t)i, 1, 1, 1, 1); /* beyond the credit of 4 */
    put_buf("stream", "faults", &d);
    taas_buf_putc(&d, 1);
    batch_msg(&d, 0, 1, 1, 1, 1, 1); /* another rank's item */
    put_buf("stream", "foreign_item", &d);
}

/* ---- images ------------------------------------------------------------------------------ */

static void png_seeds(const char *harness) {
    unsigned char *px = fx_pic_make(5, 4, 4, 1);
    taas_buf b = {0};
    char name[64];
    for (int c = 1; c <= 4; c++) {
        fx_png8(&b, 5, 4, c, px);
        snprintf(name, sizeof name, "png8_c%d", c);
        put_buf(harness, name, &b);
    }
    unsigned char pal_px[4 * 2] = {0, 1, 2, 3, 3, 2, 1, 0};
    png_color pal[4] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {9, 9, 9}};
    unsigned char trns[2] = {0, 128};
    fx_png(&b, 4, 2, PNG_COLOR_TYPE_PALETTE, 8, pal_px, 4, pal, 4, trns, 2, 0);
    put_buf(harness, "palette_trns", &b);
    unsigned char px16[3 * 2 * 2 * 3];
    for (size_t i = 0; i < sizeof px16; i++) px16[i] = (unsigned char)(i * 17);
    fx_png(&b, 3, 2, PNG_COLOR_TYPE_RGB, 16, px16, 3 * 2 * 3, NULL, 0, NULL, 0, 0);
    put_buf(harness, "rgb16", &b);
    unsigned char bits[2] = {0xa5, 0x5a};
    fx_png(&b, 8, 2, PNG_COLOR_TYPE_GRAY, 1, bits, 1, NULL, 0, NULL, 0, 0);
    put_buf(harness, "gray1", &b);
    fx_png(&b, 5, 4, PNG_COLOR_TYPE_RGB_ALPHA, 8, px, 5 * 4, NULL, 0, NULL, 0, 1);
    put_buf(harness, "interlaced", &b);
    free(px);
}

static void jpeg_seeds(const char *harness) {
    unsigned char *grey = fx_pic_make(8, 8, 1, 2), *rgb = fx_pic_make(16, 9, 3, 3);
    taas_buf b = {0};
    fx_jpeg(&b, 8, 8, 1, grey, 90);
    put_buf(harness, "grey", &b);
    fx_jpeg(&b, 16, 9, 3, rgb, 75);
    put_buf(harness, "rgb", &b);
    fx_jpeg_scans(&b, 16, 9, 3, rgb, 50, 1);
    put_buf(harness, "progressive", &b);
    free(grey);
    free(rgb);
}

/* ---- .npy, IDX, CIFAR-10, tar, WebDataset --------------------------------------------- */

static void npy_seeds(void) {
    unsigned char u8[3 * 2 * 2];
    for (size_t i = 0; i < sizeof u8; i++) u8[i] = (unsigned char)(i * 20);
    float f4[2 * 2 * 1 * 3];
    for (size_t i = 0; i < 12; i++) f4[i] = (float)i / 12;
    int64_t i8[3] = {0, 1, 9};
    double f8[2 * 2 * 2];
    for (size_t i = 0; i < 8; i++) f8[i] = (double)i;
    taas_buf b = {0};
    fx_npy(&b, 1, "|u1", "False", "(3, 2, 2)", u8, sizeof u8);
    put_buf("npy", "images_u8", &b);
    fx_npy(&b, 1, "<f4", "False", "(2, 2, 1, 3)", f4, sizeof f4);
    put_buf("npy", "images_f4_hwc", &b);
    fx_npy(&b, 1, "<i8", "False", "(3,)", i8, sizeof i8);
    put_buf("npy", "labels_i8", &b);
    fx_npy(&b, 2, "<f8", "False", "(2, 2, 2)", f8, sizeof f8);
    put_buf("npy", "v2_f8", &b);
    fx_npy(&b, 3, "<u2", "False", "(2, 1)", "\x01\x00\x02\x00", 4);
    put_buf("npy", "v3_labels_u2", &b);
    fx_npy(&b, 1, ">i4", "True", "()", "\0\0\0\1", 4);
    put_buf("npy", "bigendian_fortran", &b);
}

static void idx_seed(const char *name, uint32_t n, uint32_t h, uint32_t w, int gz) {
    taas_buf img = {0}, lab = {0}, out = {0};
    fx_idx_images(&img, n, h, w);
    fx_idx_labels(&lab, n);
    if (gz) {
        fx_gzip(img.data, img.len, &out);
        taas_buf_puts(&out, "\n--8<--\n");
        fx_gzip(lab.data, lab.len, &out);
    } else {
        taas_buf_add(&out, img.data, img.len);
        taas_buf_puts(&out, "\n--8<--\n");
        taas_buf_add(&out, lab.data, lab.len);
    }
    taas_buf_free(&img);
    taas_buf_free(&lab);
    put_buf("idx", name, &out);
}

static void cifar_records(taas_buf *b, int n, int seed) {
    for (int r = 0; r < n; r++) {
        taas_buf_putc(b, (char)((r + seed) % 10));
        for (int i = 0; i < 3072; i++) taas_buf_putc(b, (char)((i * 7 + r * 3 + seed) & 0xff));
    }
}

static void cifar_seeds(void) {
    taas_buf tar = {0}, rec = {0}, out = {0};
    cifar_records(&rec, 2, 0);
    fx_tar_add(&tar, "cifar-10-batches-bin/test_batch.bin", rec.data, rec.len);
    fx_tar_add_str(&tar, "cifar-10-batches-bin/batches.meta.txt",
                   "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n");
    fx_tar_end(&tar);
    fx_gzip(tar.data, tar.len, &out);
    put_buf("cifar", "test_tgz", &out);
    put_buf("cifar", "test_plain_tar", &tar);
    taas_buf_free(&rec);
    /* the training split: five batches of one record */
    for (int i = 1; i <= 5; i++) {
        char name[64];
        snprintf(name, sizeof name, "cifar-10-batches-bin/data_batch_%d.bin", i);
        cifar_records(&rec, 1, i);
        fx_tar_add(&tar, name, rec.data, rec.len);
        taas_buf_free(&rec);
    }
    fx_tar_end(&tar);
    fx_gzip(tar.data, tar.len, &out);
    taas_buf_free(&tar);
    put_buf("cifar", "train_tgz", &out);
}

static void tar_seeds(void) {
    taas_buf b = {0};
    fx_tar_add_str(&b, "a.txt", "hello");
    fx_tar_header(&b, "dir/", NULL, 0, '5', FX_USTAR, 0);
    fx_tar_header(&b, "b.bin", "some/prefix", 3, '0', FX_USTAR, 0);
    fx_tar_data(&b, "abc", 3);
    fx_tar_end(&b);
    put_buf("tar", "ustar", &b);
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    fx_tar_add_long(&b, longname, "pax", 3, 1);
    fx_tar_add_long(&b, longname, "gnu", 3, 0);
    fx_tar_end(&b);
    put_buf("tar", "long_names", &b);
    fx_tar_header(&b, "big256", NULL, 4, '0', FX_GNU, 1);
    fx_tar_data(&b, "data", 4);
    fx_tar_header(&b, "v7file", NULL, 2, '\0', FX_V7, 0);
    fx_tar_data(&b, "v7", 2);
    fx_tar_header(&b, "link", NULL, 0, '2', FX_USTAR, 0);
    fx_tar_end(&b);
    put_buf("tar", "gnu_v7", &b);
}

/* One sample of a shard: its image member key.image_ext and its label member key.label_ext. */
static void wds_sample(taas_buf *b, const char *key, const char *image_ext, const taas_buf *image,
                       const char *label_ext, const char *label) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", key, image_ext);
    fx_tar_add(b, name, image->data, image->len);
    snprintf(name, sizeof name, "%s.%s", key, label_ext);
    fx_tar_add_str(b, name, label);
}

static void wds_seeds(void) {
    unsigned char *px = fx_pic_make(4, 3, 3, 4);
    taas_buf png = {0}, jpg = {0}, npy = {0}, b = {0};
    fx_png8(&png, 4, 3, 3, px);
    fx_jpeg(&jpg, 4, 3, 3, px, 80);
    fx_npy(&npy, 1, "|u1", "False", "(3, 4)", px, 12);
    wds_sample(&b, "s/000000", "png", &png, "cls", "3");
    wds_sample(&b, "s/000001", "jpg", &jpg, "cls", "7\n");
    wds_sample(&b, "s/000002", "npy", &npy, "cls", "0");
    fx_tar_end(&b);
    put_buf("webdataset", "png_jpg_npy", &b);
    wds_sample(&b, "x/a", "png", &png, "txt", "cat");
    wds_sample(&b, "x/c", "png", &png, "txt", "dog");
    wds_sample(&b, "x/d", "png", &png, "txt", "cat\n");
    fx_tar_end(&b);
    put_buf("webdataset", "class_names", &b);
    taas_buf_free(&png);
    taas_buf_free(&jpg);
    taas_buf_free(&npy);
    free(px);
}

/* ---- safetensors ------------------------------------------------------------------------ */

static void copy_file(const char *harness, const char *name, const char *from) {
    FILE *f = fopen(from, "rb");
    if (!f) {
        perror(from);
        exit(1);
    }
    taas_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) taas_buf_add(&b, chunk, n);
    fclose(f);
    put_buf(harness, name, &b);
}

static void safetensors_seeds(const char *source_dir) {
    static const char *const FILES[] = {"small", "small_meta", "reordered"};
    for (size_t i = 0; i < 3; i++) {
        char from[1024];
        snprintf(from, sizeof from, "%s/tests/data/safetensors/%s.safetensors", source_dir, FILES[i]);
        copy_file("safetensors", FILES[i], from);
    }
    /* a checkpoint of the same model (fuzz_safetensors.c's table): its weights, an
     * optimizer tensor and the fit's state */
    float w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, m[12] = {0};
    int64_t count = 7;
    taas_st_tensor t[] = {
        {"0.weight", TAAS_ST_F32, 2, {3, 4}, w},        {"0.bias", TAAS_ST_F32, 1, {3}, w},
        {"1.weight", TAAS_ST_F32, 1, {3}, w},           {"1.bias", TAAS_ST_F32, 1, {3}, w},
        {"1.running_mean", TAAS_ST_F32, 1, {3}, w},     {"1.running_var", TAAS_ST_F32, 1, {3}, w},
        {"1.num_batches_tracked", TAAS_ST_I64, 0, {0}, &count},
        {"10.weight", TAAS_ST_F32, 4, {2, 3, 1, 1}, w}, {"optimizer.0.weight.exp_avg", TAAS_ST_F32, 2, {3, 4}, m},
    };
    taas_st_meta meta[2] = {{"format", "pt"},
                            {TAAS_ST_CHECKPOINT_KEY, "{\"version\": 1, \"step\": 3, \"epoch\": 1, \"history\": []}"}};
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/checkpoint", OUT);
    taas_error err;
    taas_error_clear(&err);
    if (taas_safetensors_write(path, t, sizeof t / sizeof t[0], meta, 2, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        exit(1);
    }
}

/* ---- a detached job's folder: state.json, 0x1f, journal.jsonl, 0x1f, view.json ------- */

static void jobfolder(const char *name, const char *state, const char *journal, const char *view) {
    taas_buf b = {0};
    taas_buf_puts(&b, state);
    if (journal) {
        taas_buf_putc(&b, 0x1f);
        taas_buf_puts(&b, journal);
    }
    if (view) {
        taas_buf_putc(&b, 0x1f);
        taas_buf_puts(&b, view);
    }
    put_buf("jobfolder", name, &b);
}

static void jobfolder_seeds(void) {
    static const char display[] = "{\"display\": {\"text/plain\": \"epoch 1/2\"}, \"metadata\": {}, \"id\": \"d1\"}";
    static const char view[] = "{\"d1\": {\"data\": {\"text/plain\": \"epoch 2/2\"}, \"metadata\": {}}}";
    jobfolder("running", "{\"id\": \"job-x\", \"state\": \"running\", \"pid\": 4242, \"started\": 1, "
              "\"created\": 1, \"model\": \"net\", \"epoch\": 1, \"epochs\": 2, \"step\": 3, \"steps\": 50, "
              "\"loss\": 0.5, \"restarts\": 0, \"backend\": \"local\", \"plan\": \"1 machine\", "
              "\"checkpoint\": \"/j/checkpoint-3.safetensors\", \"checkpoint_epoch\": 1, \"checkpoint_step\": 3}",
              "{\"stream\": \"stdout\", \"text\": \"plan: 1 machine\\n\"}\n", view);
    jobfolder("done", "{\"state\": \"done\", \"created\": 2, \"weights\": \"/j/weights.safetensors\", \"done\": "
              "{\"steps\": 100, \"history\": [{\"epoch\": 1, \"train_loss\": 0.4, \"val_loss\": null, "
              "\"val_accuracy\": 0.9, \"time_s\": 1.5, \"samples_per_s\": 100, \"steps\": 50}]}}",
              "{\"stream\": \"stderr\", \"text\": \"[job] x\\n\"}\n", view);
    jobfolder("failed", "{\"state\": \"failed\", \"error\": {\"ename\": \"TaasWorkerError\", \"message\": \"boom\", "
              "\"hint\": \"look\"}}", display, NULL);
    jobfolder("damaged_error", "{\"state\": \"failed\", \"error\": {\"ename\": \"\", \"message\": null}}", "", "");
    jobfolder("cancelled", "{\"state\": \"cancelled\", \"epoch\": 4, \"step\": 846, \"model\": "
              "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", "not json\n{\"stream\": 5}\n", "[1, 2");
    jobfolder("odd", "{\"state\": \"sideways\", \"pid\": 4294967295}", NULL, NULL);
    jobfolder("not_json", "{not json", NULL, NULL);
}

/* Checkpoint records (fuzz_checkpoint.c's fit: Adam with a scheduler, 2 ranks, seed 11, 2
 * epochs of 50 steps of 100 samples a rank): as a fit writes them, and the ones issue 27
 * found trusted. */
#define RECORD_HEAD "{\"version\":1,\"epochs\":2,\"steps_per_epoch\":50,\"world\":2,\"kernels\":\"generic\"," \
                    "\"seed\":11,\"units\":0,\"batch_size\":100,\"beta1\":0.9,\"momentum\":0.0,"
#define RECORD_DONE "\"history\":[{\"epoch\":1,\"train_loss\":0.5,\"val_loss\":0.4,\"val_accuracy\":0.8," \
                    "\"time_s\":1.5,\"samples_per_s\":6000.0,\"steps\":50}]," \
                    "\"checksums\":[{\"epoch\":1,\"samples\":10000,\"checksum\":\"0xfedcba9876543210\"}]"
static const char *const RECORDS[] = {
    RECORD_HEAD "\"epoch\":1,\"step\":3,\"steps\":53,\"optimizer\":\"Adam\",\"lr\":0.001,"
    "\"scheduler\":{\"last_epoch\":1,\"lr\":0.001,\"momentum\":0.0},\"epoch_loss_sum\":123.5,\"epoch_samples\":600,"
    "\"epoch_checksum\":\"0x0123456789abcdef\"," RECORD_DONE "}",
    RECORD_HEAD "\"epoch\":0,\"step\":0,\"steps\":0,\"optimizer\":\"Adam\",\"lr\":0.001,"
    "\"scheduler\":{\"last_epoch\":0,\"lr\":0.001,\"momentum\":0.0},\"epoch_loss_sum\":0,\"epoch_samples\":0,"
    "\"epoch_checksum\":\"0x0000000000000000\",\"history\":[],\"checksums\":[]}",
    RECORD_HEAD "\"epoch\":0,\"step\":7,\"steps\":7,\"optimizer\":\"SGD\",\"lr\":0.1,\"scheduler\":null,"
    "\"epoch_loss_sum\":-3.5,\"epoch_samples\":1400,\"epoch_checksum\":\"0x00000000000000ff\",\"history\":[],"
    "\"checksums\":[]}",
    RECORD_HEAD "\"epoch\":1,\"step\":3,\"steps\":53,\"optimizer\":\"Adam\",\"lr\":\"fast\",\"scheduler\":null,"
    "\"epoch_loss_sum\":1,\"epoch_samples\":600,\"epoch_checksum\":\"0x0123456789abcdef\"," RECORD_DONE "}",
    RECORD_HEAD "\"epoch\":1000000000000000000,\"step\":-1,\"steps\":53,\"optimizer\":\"Adam\",\"lr\":0.001,"
    "\"scheduler\":null,\"epoch_loss_sum\":1,\"epoch_samples\":600,\"epoch_checksum\":\"wrong\",\"history\":\"junk\","
    "\"checksums\":[]}",
};

/* ListObjectsV2 answers as S3 sends them: a truncated page, the last page, an empty one,
 * entities in keys, an <Error>. */
static const char *const S3_LISTS[] = {
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>my-data</Name><Prefix>train/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
    "<IsTruncated>true</IsTruncated><Contents><Key>train/cat/1.jpg</Key><LastModified>2026-01-01T00:00:00.000Z"
    "</LastModified><ETag>&quot;9dd4e461268c8034f5c8564e155c67a6&quot;</ETag><Size>1234</Size><StorageClass>"
    "STANDARD</StorageClass></Contents><Contents><Key>train/dog/sub/2.PNG</Key><Size>99</Size></Contents>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "</ListBucketResult>",
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Contents><Key>t/a&amp;b&lt;&gt;&quot;&apos;"
    "&#233;&#x1F600;.jpg</Key><Size>0</Size></Contents><IsTruncated>false</IsTruncated></ListBucketResult>",
    "<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated><Owner/>"
    "<!-- nothing --></ListBucketResult>",
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket does "
    "not exist</Message><BucketName>nope</BucketName><RequestId>4442587FB7D0A2F9</RequestId></Error>",
};

/* Model specs: the fixtures' torchvision models (tests/data/resnet/), a CIFAR Sequential of
 * blocks, and ones the plan refuses (a sum of two shapes, a block without its planes, deep
 * nesting, frozen parts). */
#define BLK(in, planes, stride, ds) "{\"type\":\"BasicBlock\",\"inplanes\":" #in ",\"planes\":" #planes \
    ",\"stride\":" #stride ",\"downsample\":" ds "}"
static const char *const MODEL_SPECS[] = {
    "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Conv2d\",\"in_channels\":3,\"out_channels\":16,"
    "\"kernel_size\":3,\"padding\":1,\"bias\":false},{\"type\":\"BatchNorm2d\",\"num_features\":16},"
    "{\"type\":\"ReLU\"}," BLK(16, 16, 1, "null") "," BLK(16, 32, 2, "{\"type\":\"Sequential\",\"layers\":["
    "{\"type\":\"Conv2d\",\"in_channels\":16,\"out_channels\":32,\"kernel_size\":1,\"stride\":2,\"bias\":false},"
    "{\"type\":\"BatchNorm2d\",\"num_features\":32}]}") ",{\"type\":\"AdaptiveAvgPool2d\",\"output_size\":[1,1]},"
    "{\"type\":\"Flatten\"},{\"type\":\"Linear\",\"in_features\":32,\"out_features\":10,\"requires_grad\":true}],"
    "\"requires_grad\":false}",
    "{\"type\":\"Sequential\",\"layers\":[" BLK(3, 8, 2, "null") "]}",
    "{\"type\":\"Bottleneck\",\"inplanes\":3,\"planes\":4,\"groups\":2,\"base_width\":64,\"downsample\":"
    "{\"type\":\"Conv2d\",\"in_channels\":3,\"out_channels\":16,\"kernel_size\":1}}",
    "{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Sequential\",\"layers\":[{\"type\":\"Sequential\","
    "\"layers\":[{\"type\":\"Identity\"}]}]},{\"type\":\"Flatten\"},{\"type\":\"LazyLinear\",\"out_features\":3}]}",
    "{\"type\":\"ResNet\",\"conv1\":{\"type\":\"Identity\"}}",
};

/* The fixtures' specs of torchvision's models, as the kernel writes them. */
static void model_spec_seeds(const char *src) {
    put_texts("model_spec", MODEL_SPECS, sizeof MODEL_SPECS / sizeof MODEL_SPECS[0]);
    static const char *const files[] = {"cifar", "grouped", "resnet18", "resnet50"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/resnet/%s.json", src, files[i]);
        json_t *ref = json_load_file(path, 0, NULL);
        char *text = ref ? json_dumps(json_object_get(ref, "spec"), JSON_COMPACT) : NULL;
        if (text) put("model_spec", files[i], text, strlen(text));
        free(text);
        json_decref(ref);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR (tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    OUT = argv[1];
    mkdir(OUT, 0755);
    put_texts("cell", CELLS, sizeof CELLS / sizeof CELLS[0]);
    put_texts("pragma", PRAGMAS, sizeof PRAGMAS / sizeof PRAGMAS[0]);
    put_texts("config", CONFIGS, sizeof CONFIGS / sizeof CONFIGS[0]);
    put_texts("connection", CONNECTIONS, sizeof CONNECTIONS / sizeof CONNECTIONS[0]);
    wire_seeds();
    jobctl_seeds();
    stream_seeds();
    png_seeds("png");
    jpeg_seeds("jpeg");
    npy_seeds();
    idx_seed("plain_3x4x5", 3, 4, 5, 0);
    idx_seed("gzip_2x3x3", 2, 3, 3, 1);
    cifar_seeds();
    tar_seeds();
    wds_seeds();
    safetensors_seeds(TAAS_SOURCE_DIR);
    jobfolder_seeds();
    put_texts("checkpoint", RECORDS, sizeof RECORDS / sizeof RECORDS[0]);
    put_texts("s3_list", S3_LISTS, sizeof S3_LISTS / sizeof S3_LISTS[0]);
    model_spec_seeds(TAAS_SOURCE_DIR);
    return 0;
}
