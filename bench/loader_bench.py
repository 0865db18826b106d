#!/usr/bin/python3
"""Data loading benchmark: taas's prefetch pipeline against torch.utils.data.DataLoader with
torchvision, in the same run on the same machine, and taas over slow HTTP storage.

1. Fashion-MNIST, training split (60000 images): decode + ToTensor + Normalize + batches of
   64. taas reads Debian's .gz files (root=None); torchvision reads the same files,
   decompressed into a temporary FashionMNIST/raw folder before timing.
2. A WebDataset of PNG images: --samples Fashion-MNIST training images (28x28 grey), encoded
   as PNG (PIL) into tar shards of --per-shard samples (a .png and a .cls per sample) in a
   temporary folder. taas: WebDataset(urls='shard-{000000..N}.tar'); PyTorch: a map-style
   Dataset over the same tar files (members indexed with tarfile, each image read with one
   pread and decoded by PIL, as torchvision's datasets do).
   Both: shuffle=False, batch_size=64, the same transform; taas with 1 and 2 decode threads
   against num_workers 0 and 2 (PyTorch's default persistent_workers=False: workers start
   with each epoch, as in a plain training loop). img/s = samples / epoch time, the median
   of --epochs epochs (taas: from taas_pipeline_new to the last batch taken; PyTorch: from
   iter(loader) to the last batch; taas runs --taas-epochs epochs, each a few milliseconds).
   Opening the dataset is not timed for either (torchvision reads the whole of Fashion-MNIST
   into memory in its constructor; taas decompresses it in open). A checksum run (not
   timed) compares the sum of labels and of pixels of an epoch.
3. That WebDataset (or its first --http-shards shards) over HTTP from tests/lib/faultserver.py
   with 50 ms added to every request and 20 MB/s per connection: a cold epoch (an empty
   fetch cache; open fetches and indexes the shards, the epoch reads the samples) with C =
   1, 2, 4 and 8 fetch connections: TAAS_FETCH_CONNECTIONS=C (ranges per object, with
   TAAS_FETCH_RANGE_MIN=--range-min so that a shard is fetched in C ranges) and C decode
   threads (each has one sample in flight). "serial" is what the same requests would take
   one after another (requests x 50 ms + bytes / 20 MB/s); serial / measured is how much of
   the latency parallel fetching and prefetching hide.

Prints a markdown table with the command and the machine. Needs a build with
taas-loader-bench (cmake builds it into build/bench/) and Debian's python3-torch and
python3-torchvision. Run it on an otherwise idle machine:

    /usr/bin/python3 bench/loader_bench.py --driver build/bench/taas-loader-bench
"""

import argparse
import datetime
import gzip
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
FASHION = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
BATCH = 64
LATENCY, RATE = 0.05, 20e6


# ---- data ------------------------------------------------------------------------------

def fashion_raw(tmp):
    """torchvision's layout: <root>/FashionMNIST/raw/<name> (not gzipped)."""
    raw = os.path.join(tmp, "FashionMNIST", "raw")
    os.makedirs(raw)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        with gzip.open(os.path.join(FASHION, name + ".gz")) as src, \
                open(os.path.join(raw, name), "wb") as dst:
            shutil.copyfileobj(src, dst)
    return tmp


def make_shards(folder, samples, per_shard):
    """samples Fashion-MNIST training images as PNG in tar shards; returns the shard names."""
    from PIL import Image

    with gzip.open(os.path.join(FASHION, "train-images-idx3-ubyte.gz")) as f:
        images = f.read()[16:]
    with gzip.open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")) as f:
        labels = f.read()[8:]
    samples = min(samples, len(labels))
    names = []
    for s in range(0, samples, per_shard):
        name = "shard-%06d.tar" % (s // per_shard)
        with tarfile.open(os.path.join(folder, name), "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(s, min(s + per_shard, samples)):
                png = io.BytesIO()
                Image.frombytes("L", (28, 28), images[i * 784:(i + 1) * 784]).save(png, "PNG")
                for ext, data in (("png", png.getvalue()), ("cls", str(labels[i]).encode())):
                    info = tarfile.TarInfo("%06d.%s" % (i, ext))
                    info.size = len(data)
                    info.mtime = 0
                    tar.addfile(info, io.BytesIO(data))
        names.append(name)
    return names


def transform_spec():
    return {"type": "Compose", "transforms": [
        {"type": "ToTensor"},
        {"type": "Normalize", "mean": [MEAN], "std": [STD], "inplace": False}]}


def loader_spec(dataset):
    """A DataLoader spec as taas-kernel writes it (taas_value_spec)."""
    return {"type": "DataLoader", "dataset": dataset, "batch_size": BATCH, "shuffle": False,
            "num_workers": 0, "drop_last": False, "prefetch_factor": None}


def fashion_spec():
    return loader_spec({"type": "FashionMNIST", "root": FASHION, "train": True,
                        "transform": transform_spec(), "target_transform": None,
                        "download": False})


def wds_spec(prefix, shards):
    last = len(shards) - 1
    return loader_spec({"type": "WebDataset", "urls": "%s/shard-{000000..%06d}.tar" % (prefix, last),
                        "transform": transform_spec(), "image_key": "jpg;jpeg;png",
                        "label_key": "cls", "length": None})


# ---- taas -------------------------------------------------------------------------------

def run_taas(driver, spec, threads, epochs, checksum=False, env=None):
    args = [driver, "--spec", "-", "--threads", str(threads), "--epochs", str(epochs),
            "--queue", str(max(4, 2 * threads))]
    if checksum:
        args.append("--checksum")
    p = subprocess.run(args, input=json.dumps(spec), capture_output=True, text=True,
                       env=env, timeout=1800)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit("taas-loader-bench failed (%d): %s %s" % (p.returncode, p.stdout, p.stderr))
    if "error" in out:
        raise SystemExit("taas-loader-bench: %s" % out["error"])
    return out


# ---- PyTorch ------------------------------------------------------------------------------

def torch_transform():
    from torchvision import transforms
    return transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])


def make_tar_dataset(folder, shards, transform):
    import torch.utils.data
    from PIL import Image

    class TarPNG(torch.utils.data.Dataset):
        """Map-style dataset over WebDataset shards: one pread and a PIL decode per image."""

        def __init__(self):
            self.paths = [os.path.join(folder, s) for s in shards]
            self.items = []
            for si, path in enumerate(self.paths):
                with tarfile.open(path) as tar:
                    members = tar.getmembers()
                    cls = {m.name.split(".", 1)[0]: int(tar.extractfile(m).read())
                           for m in members if m.name.endswith(".cls")}
                    for m in members:
                        if m.name.endswith(".png"):
                            self.items.append((si, m.offset_data, m.size, cls[m.name.split(".", 1)[0]]))
            self.fds = None

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            if self.fds is None:  # per process: workers are forked
                self.fds = [os.open(p, os.O_RDONLY) for p in self.paths]
            si, off, size, label = self.items[i]
            img = Image.open(io.BytesIO(os.pread(self.fds[si], size, off)))
            return transform(img), label

    return TarPNG()


def run_torch(dataset, workers, epochs, checksum=False):
    import torch
    import torch.utils.data

    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False,
                                         num_workers=workers)
    times, samples = [], 0
    label_sum = pixel_sum = 0.0
    for _ in range(epochs):
        samples = 0
        t0 = time.perf_counter()
        for x, y in loader:
            samples += len(y)
            if checksum:
                label_sum += float(y.double().sum())
                pixel_sum += float(x.double().sum())
        times.append(time.perf_counter() - t0)
    return {"samples": samples, "epochs_s": times, "label_sum": label_sum, "pixel_sum": pixel_sum}


# ---- report -----------------------------------------------------------------------------

def rate(r):
    return r["samples"] / statistics.median(r["epochs_s"])


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / 2 ** 20
    except OSError:
        mem = 0
    return "%s, %d CPUs (nproc), %.0f GiB, Linux %s" % (model, os.cpu_count(), mem, platform.release())


def compare_table(title, rows, goal):
    """rows: [(label, threads, taas result, torch result)]."""
    out = ["### %s" % title, "",
           "| threads / num_workers | taas img/s | PyTorch img/s | taas / PyTorch | goal |",
           "|---|---:|---:|---:|---|"]
    for label, taas, peer in rows:
        ratio = rate(taas) / rate(peer)
        out.append("| %s | %s | %s | %.1f× | ≥ %d×: %s |" % (
            label, "{:,.0f}".format(rate(taas)), "{:,.0f}".format(rate(peer)), ratio, goal,
            "met" if ratio >= goal else "not met"))
    return out


def checksum_line(name, taas, peer):
    dl = abs(taas["label_sum"] - peer["label_sum"])
    dp = abs(taas["pixel_sum"] - peer["pixel_sum"])
    ok = dl == 0 and dp <= 1e-6 * taas["samples"] * 784
    return "- %s checksums of one epoch: labels %.0f / %.0f, pixels %.4f / %.4f (taas / PyTorch): %s" % (
        name, taas["label_sum"], peer["label_sum"], taas["pixel_sum"], peer["pixel_sum"],
        "agree" if ok else "DIFFER")


def start_faultserver(root, tmp):
    portfile = os.path.join(tmp, "port")
    proc = subprocess.Popen([sys.executable, os.path.join(SOURCE, "tests", "lib", "faultserver.py"),
                             "--root", root, "--portfile", portfile, "--latency", str(LATENCY),
                             "--rate", str(RATE)])
    deadline = time.monotonic() + 10
    while not os.path.exists(portfile):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("faultserver.py did not start")
        time.sleep(0.05)
    with open(portfile) as f:
        return proc, int(f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--driver", default=os.path.join(SOURCE, "build", "bench", "taas-loader-bench"))
    ap.add_argument("--epochs", type=int, default=3, help="timed PyTorch epochs per configuration")
    ap.add_argument("--taas-epochs", type=int, default=10,
                    help="timed taas epochs per configuration (they take milliseconds: more of them "
                         "steady the median)")
    ap.add_argument("--samples", type=int, default=10240, help="PNG samples in the WebDataset")
    ap.add_argument("--per-shard", type=int, default=1024)
    ap.add_argument("--range-min", default="256K", help="TAAS_FETCH_RANGE_MIN for the HTTP runs")
    ap.add_argument("--http-shards", type=int, default=0, help="shards read over HTTP (0: all)")
    ap.add_argument("--skip-http", action="store_true")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    if not os.access(args.driver, os.X_OK):
        raise SystemExit("no taas-loader-bench at %s: build the project first (--driver PATH)" % args.driver)
    import torch
    import torchvision
    torch.set_num_threads(1)  # the loaders' threads are what is compared, in both

    started = time.monotonic()
    raw = {}
    lines = []
    with tempfile.TemporaryDirectory(prefix="taas-loader-bench-") as tmp:
        env = dict(os.environ, TAAS_CACHE_DIR="")
        # 1. Fashion-MNIST
        from torchvision import datasets
        fm = datasets.FashionMNIST(fashion_raw(os.path.join(tmp, "torchvision")), train=True,
                                   transform=torch_transform(), download=False)
        spec = fashion_spec()
        res = {}
        for threads, workers in ((1, 0), (2, 2)):
            res[threads] = (run_taas(args.driver, spec, threads, args.taas_epochs, env=env),
                            run_torch(fm, workers, args.epochs))
        raw["fashion_mnist"] = res
        lines += compare_table("Fashion-MNIST, training split (60,000 images, 28x28 grey)",
                               [("1 thread / num_workers=0", *res[1]),
                                ("2 threads / num_workers=2", *res[2])], 20)
        ck_taas = run_taas(args.driver, spec, 2, 1, checksum=True, env=env)
        ck_peer = run_torch(fm, 2, 1, checksum=True)
        lines += ["", checksum_line("Fashion-MNIST", ck_taas, ck_peer), ""]

        # 2. WebDataset of PNG shards, local files
        shard_dir = os.path.join(tmp, "shards")
        os.makedirs(shard_dir)
        shards = make_shards(shard_dir, args.samples, args.per_shard)
        size = sum(os.path.getsize(os.path.join(shard_dir, s)) for s in shards)
        spec = wds_spec(shard_dir, shards)
        tds = make_tar_dataset(shard_dir, shards, torch_transform())
        res = {}
        for threads, workers in ((1, 0), (2, 2)):
            res[threads] = (run_taas(args.driver, spec, threads, args.taas_epochs, env=env),
                            run_torch(tds, workers, args.epochs))
        raw["webdataset_png"] = res
        lines += compare_table("WebDataset of PNG images (%s samples, 28x28 grey, %d shards, %.1f MB), local files"
                               % ("{:,}".format(len(tds)), len(shards), size / 1e6),
                               [("1 thread / num_workers=0", *res[1]),
                                ("2 threads / num_workers=2", *res[2])], 2)
        ck_taas = run_taas(args.driver, spec, 2, 1, checksum=True, env=env)
        ck_peer = run_torch(tds, 2, 1, checksum=True)
        lines += ["", checksum_line("PNG WebDataset", ck_taas, ck_peer), ""]

        # 3. the same shards over slow HTTP
        if not args.skip_http:
            server, port = start_faultserver(shard_dir, tmp)
            try:
                sub = shards[:args.http_shards] if args.http_shards > 0 else shards
                http = wds_spec("http://127.0.0.1:%d" % port, sub)
                local = run_taas(args.driver, wds_spec(shard_dir, sub), 2, 1, env=env)
                lines += ["### The PNG WebDataset (%d shards) over HTTP: %d ms per request, %d MB/s per "
                          "connection, cold cache" % (len(sub), LATENCY * 1000, RATE / 1e6), "",
                          "| fetch connections and decode threads | requests | MB fetched | open: fetch + index (s) "
                          "| epoch (s) | img/s, open + epoch | serial (s) | serial / measured |",
                          "|---:|---:|---:|---:|---:|---:|---:|---:|"]
                lines.append("| local files, 2 threads | — | — | %.3f | %.3f | %s | — | — |" % (
                    local["open_s"], local["epochs_s"][0],
                    "{:,.0f}".format(local["samples"] / (local["open_s"] + local["epochs_s"][0]))))
                raw["http"] = {"local": local}
                for conns in (1, 2, 4, 8):
                    cache = tempfile.mkdtemp(dir=tmp, prefix="cache-")
                    henv = dict(os.environ, TAAS_CACHE_DIR=cache, TAAS_FETCH_CONNECTIONS=str(conns),
                                TAAS_FETCH_RANGE_MIN=args.range_min)
                    r = run_taas(args.driver, http, conns, 1, env=henv)
                    raw["http"][conns] = r
                    total = r["open_s"] + r["epochs_s"][0]
                    serial = r["fetch"]["requests"] * LATENCY + r["fetch"]["bytes"] / RATE
                    lines.append("| %d | %d | %.1f | %.3f | %.3f | %s | %.2f | %.1f× |" % (
                        conns, r["fetch"]["requests"], r["fetch"]["bytes"] / 1e6, r["open_s"],
                        r["epochs_s"][0], "{:,.0f}".format(r["samples"] / total), serial, serial / total))
                    shutil.rmtree(cache, ignore_errors=True)
                lines.append("")
            finally:
                server.kill()
                server.wait()

    cmd = " ".join(["/usr/bin/python3", "bench/loader_bench.py"] + sys.argv[1:])
    head = ["## Data loading: taas against torch.utils.data.DataLoader (issue 3)", "",
            "Command: `%s` (%.0f s)" % (cmd, time.monotonic() - started), "",
            "- machine: %s" % machine(),
            "- peers: PyTorch %s, torchvision %s, Python %s (Debian packages); torch.set_num_threads(1)"
            % (torch.__version__, torchvision.__version__, platform.python_version()),
            "- batch %d, shuffle=False, ToTensor + Normalize((%.4f,), (%.4f,)); img/s: median of %d epochs "
            "(taas: %d)" % (BATCH, MEAN, STD, args.epochs, args.taas_epochs),
            "- measured %s" % datetime.date.today().isoformat(), ""]
    print("\n".join(head + lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
