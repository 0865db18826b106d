#!/usr/bin/python3
"""Loader benchmark on an ImageNet-like folder (issue 28): images/s per loader core, taas's
loader against torch.utils.data.DataLoader with torchvision's ImageFolder and PIL, in the
same run on the same machine.

The data: there is no photo dataset among Debian's packages, so --images JPEGs are made
from Debian's dataset-fashion-mnist training images: each 28x28 grey image is upscaled to
500x375 (bicubic), colourised (a random two-colour gradient mapped through the grey
levels), and textured (smoothed noise at two scales plus fine grain), then saved as JPEG of
quality 90 (PIL) in one folder per Fashion-MNIST class. The files come out at about the
size of ImageNet's (tens of KB); their content is synthetic, not photos.

The loaders: both read ImageFolder(root) with Compose([RandomResizedCrop(224),
RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean, std)]), batch_size 64,
shuffle=True. taas: its prefetch pipeline (bench/loader_bench.c: fetch, decode, transform,
batch) with 1 and 2 decode threads; PyTorch: DataLoader with num_workers 1 and 2 (one worker
process per core; persistent_workers=False as in a plain loop). img/s = images / epoch time,
the median of --epochs epochs; per core = img/s / threads (or workers). Because a shared
machine's other load moves wall-clock rates, the CPU time is measured too: images per
CPU-second of the taas driver process (all its threads, the consumer included) and of
PyTorch's worker processes (the main process, which collects the batches, not counted).
Run it on an otherwise idle machine:

    /usr/bin/python3 bench/imagefolder_bench.py --driver build/bench/taas-loader-bench
"""

import argparse
import datetime
import gzip
import os
import platform
import resource
import statistics
import sys
import tempfile
import time

import numpy as np

import loader_bench  # its taas driver runner and machine description (bench/ is on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
FASHION = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BATCH = 64


def fashion(n):
    with gzip.open(os.path.join(FASHION, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:n]
    with gzip.open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return images, labels


def smooth_noise(rng, h, w, cell):
    small = rng.normal(0, 1, size=(h // cell + 2, w // cell + 2)).astype(np.float32)
    from PIL import Image
    return np.asarray(Image.fromarray(small, "F").resize((w, h), Image.BICUBIC))


def make_folder(root, n, seed=0):
    from PIL import Image
    rng = np.random.RandomState(seed)
    images, labels = fashion(n)
    sizes = []
    for k, (img, lab) in enumerate(zip(images, labels)):
        g = np.asarray(Image.fromarray(img, "L").resize((500, 375), Image.BICUBIC), np.float32) / 255.0
        g = g + 0.10 * smooth_noise(rng, 375, 500, 40) + 0.05 * smooth_noise(rng, 375, 500, 6)
        c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        rgb = c0 + (c1 - c0) * np.clip(g, 0, 1)[..., None]
        rgb += rng.normal(0, 6, size=rgb.shape)  # grain
        out = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
        d = os.path.join(root, CLASSES[lab])
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "%06d.jpg" % k)
        out.save(p, "JPEG", quality=90)
        sizes.append(os.path.getsize(p))
    return sizes


def taas_spec(root):
    return {"batch_size": BATCH, "shuffle": True, "drop_last": False,
            "dataset": {"type": "ImageFolder", "root": root, "target_transform": None,
                        "transform": {"type": "Compose", "transforms": [
                            {"type": "RandomResizedCrop", "size": 224, "scale": [0.08, 1.0],
                             "ratio": [3.0 / 4.0, 4.0 / 3.0], "interpolation": "bilinear", "antialias": None},
                            {"type": "RandomHorizontalFlip", "p": 0.5},
                            {"type": "ToTensor"},
                            {"type": "Normalize", "mean": list(MEAN), "std": list(STD), "inplace": False}]}}}


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_taas(driver, spec, threads, epochs):
    cpu0 = children_cpu()
    out = loader_bench.run_taas(driver, spec, threads, epochs)
    out["cpu_s"] = children_cpu() - cpu0  # the driver process, all its threads
    return out


def run_torch(root, workers, epochs):
    import torch
    import torchvision
    from torchvision import transforms as T
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(root, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers)
    times = []
    cpu0 = children_cpu()
    for _ in range(epochs):
        t0 = time.perf_counter()
        n = 0
        for x, y in loader:
            n += x.shape[0]
        times.append(time.perf_counter() - t0)
    return n, times, children_cpu() - cpu0  # the workers' CPU time (they end with each epoch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--driver", default=os.path.join(SOURCE, "build", "bench", "taas-loader-bench"))
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--data", help="keep the folder here (made when missing) instead of a temporary one")
    args = ap.parse_args()
    if not os.access(args.driver, os.X_OK):
        raise SystemExit("no taas-loader-bench at %s: build the project first (--driver PATH)" % args.driver)
    import torch
    import torchvision
    import PIL
    tmp = None
    root = args.data
    if not root:
        tmp = tempfile.TemporaryDirectory(prefix="taas-imagefolder-")
        root = tmp.name
    if not os.path.isdir(os.path.join(root, CLASSES[0])):
        t0 = time.perf_counter()
        sizes = make_folder(root, args.images)
        print("made %d JPEGs of 500x375, quality 90, mean %.1f KB, in %.0f s" %
              (len(sizes), sum(sizes) / len(sizes) / 1e3, time.perf_counter() - t0), file=sys.stderr)
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    rows = []
    for cores in (1, 2):
        out = run_taas(args.driver, taas_spec(root), cores, args.epochs)
        t_taas = statistics.median(out["epochs_s"])
        n, times, cpu_torch = run_torch(root, cores, args.epochs)
        t_torch = statistics.median(times)
        a, b = out["samples"] / t_taas / cores, n / t_torch / cores
        ca, cb = out["samples"] * args.epochs / out["cpu_s"], n * args.epochs / cpu_torch
        rows.append((cores, out["samples"] / t_taas, a, n / t_torch, b, ca, cb))
    print("| loader cores | taas img/s | taas img/s per core | PyTorch img/s | PyTorch img/s per core | taas / PyTorch "
          "per core | taas img per CPU-s | PyTorch img per worker CPU-s | taas / PyTorch per CPU-s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cores, ta, tac, pa, pac, ca, cb in rows:
        print("| %d | %.1f | %.1f | %.1f | %.1f | %.2f× | %.1f | %.1f | %.2f× |" % (cores, ta, tac, pa, pac, tac / pac,
                                                                           ca, cb, ca / cb))
    print()
    print("- machine: %s, load average %.1f at the start" % (loader_bench.machine(), load))
    print("- peers: torch %s, torchvision %s, Pillow %s, Python %s" % (torch.__version__, torchvision.__version__,
                                                                   PIL.__version__, platform.python_version()))
    print("- data: %d JPEGs (500x375, quality 90) made from Fashion-MNIST training images (upscaled, colourised, "
          "textured), 10 class folders" % sum(len(fs) for _, _, fs in os.walk(root)))
    print("- command: `/usr/bin/python3 bench/imagefolder_bench.py %s` (%s; median of %d epochs each)" %
          (" ".join(sys.argv[1:]), started, args.epochs))


if __name__ == "__main__":
    main()
