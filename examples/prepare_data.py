#!/usr/bin/env python3
"""Data for the example notebooks, made from Debian's Fashion-MNIST
(`apt-get install dataset-fashion-mnist`), with Python's standard library only (the photo
folder also needs Pillow: `apt-get install python3-pil`).

    python3 examples/prepare_data.py npy DIR
        DIR/fashion-{train,test}-{images,labels}.npy: uint8 images (N, 28, 28) and int64 labels,
        for examples/mlp_npy.ipynb.
    python3 examples/prepare_data.py shards DIR [--train N] [--test N] [--per-shard K]
        WebDataset tar shards of PNG images and .cls labels: DIR/fashion-train-NNNNNN.tar
        (--train samples, default 60000) and DIR/fashion-test-NNNNNN.tar (--test, default
        10000), K samples a shard (default 1000), for examples/webdataset_http.ipynb. Serve DIR
        over HTTP, e.g. `cd DIR && python3 -m http.server 8000`.
    python3 examples/prepare_data.py photos DIR [--train N] [--test N] [--size WxH] [--quality Q]
        A photo folder for ImageFolder, for examples/resnet_photos.ipynb: DIR/train/CLASS/*.jpg
        (--train images, default 2000) and DIR/test/CLASS/*.jpg (--test, default 500), one
        folder per Fashion-MNIST class (ankle_boot, bag, ..., trouser), and the same files
        again (hard links) in four coarser classes under DIR/coarse/{train,test}/ (bag,
        footwear, lower, upper), a second task to fine-tune on. Fashion-MNIST has no photos, so
        these are made: each 28x28 item is upscaled (bicubic) to 55-85 % of the picture's
        shorter side, coloured with its class's tint (the item's grey level scales the colour,
        with a little variation per image), and pasted at a random place on a background of a
        random colour gradient with one to three soft rectangles and grain; then the whole picture
        gets Gaussian noise. Pictures are --size (default 500x375, a quarter of them turned to
        portrait), JPEG --quality (default 90), as ImageNet's photos are; the same
        arguments make the same files.
"""

import argparse
import gzip
import io
import os
import re
import struct
import sys
import tarfile
import zlib

FASHION = "/usr/share/datasets/fashion-mnist"


def idx(name):
    """An IDX file's array as (dims, bytes)."""
    with gzip.open(os.path.join(FASHION, name + ".gz"), "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def split(train):
    prefix = "train" if train else "t10k"
    (n, h, w), images = idx(prefix + "-images-idx3-ubyte")
    _, labels = idx(prefix + "-labels-idx1-ubyte")
    return n, h, w, images, labels


def write_npy(path, descr, shape, payload):
    """NumPy's .npy format, version 1.0."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + payload)


def png(gray, w, h):
    """An 8-bit greyscale PNG of h rows of w bytes."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = b"".join(b"\x00" + gray[r * w:(r + 1) * w] for r in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def npy(out):
    os.makedirs(out, exist_ok=True)
    for train in (True, False):
        n, h, w, images, labels = split(train)
        name = "train" if train else "test"
        write_npy(os.path.join(out, "fashion-%s-images.npy" % name), "|u1", (n, h, w), images)
        write_npy(os.path.join(out, "fashion-%s-labels.npy" % name), "<i8", (n,),
                  b"".join(struct.pack("<q", b) for b in labels))
        print("%s: %d %s samples" % (out, n, name))


def shards(out, counts, per_shard):
    os.makedirs(out, exist_ok=True)
    for train, count in zip((True, False), counts):
        n, h, w, images, labels = split(train)
        name = "train" if train else "test"
        count = min(count, n)
        for s in range(0, count, per_shard):
            with tarfile.open(os.path.join(out, "fashion-%s-%06d.tar" % (name, s // per_shard)), "w") as tar:
                for i in range(s, min(s + per_shard, count)):
                    for ext, body in (("png", png(images[i * h * w:(i + 1) * h * w], w, h)),
                                      ("cls", str(labels[i]).encode())):
                        info = tarfile.TarInfo("%s-%06d.%s" % (name, i, ext))
                        info.size = len(body)
                        tar.addfile(info, io.BytesIO(body))
        last = (count - 1) // per_shard
        print("%s: fashion-%s-{000000..%06d}.tar, %d samples" % (out, name, last, count))


# Folder names sorted as the labels 0..9 are not: ImageFolder numbers folders in sorted order.
CLASSES = ["top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle_boot"]
COARSE = ["upper", "lower", "upper", "lower", "upper", "footwear", "upper", "footwear", "bag", "footwear"]
TINTS = [(220, 60, 60), (60, 90, 200), (230, 150, 40), (200, 70, 170), (90, 60, 40),
         (240, 220, 80), (80, 180, 200), (70, 200, 90), (150, 100, 220), (120, 120, 120)]


def photo(gray, label, rng, size):
    """One picture of a 28x28 item (see the docstring): a PIL RGB image of size (w, h)."""
    from PIL import Image, ImageChops, ImageDraw, ImageFilter

    w, h = size
    if rng.random() < 0.25:
        w, h = h, w
    top = tuple(rng.randrange(256) for _ in range(3))
    bottom = tuple(rng.randrange(256) for _ in range(3))
    ramp = Image.linear_gradient("L").resize((w, h))
    bg = Image.composite(Image.new("RGB", (w, h), bottom), Image.new("RGB", (w, h), top), ramp)
    draw = ImageDraw.Draw(bg)
    for _ in range(rng.randrange(1, 4)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = x0 + rng.randrange(w // 8, w // 2 + 1), y0 + rng.randrange(h // 8, h // 2 + 1)
        draw.rectangle((x0, y0, x1, y1), fill=tuple(rng.randrange(256) for _ in range(3)))
    bg = bg.filter(ImageFilter.GaussianBlur(max(1, min(w, h) // 60)))
    side = int(min(w, h) * rng.uniform(0.55, 0.85))
    item = Image.frombytes("L", (28, 28), gray).resize((side, side), Image.BICUBIC)
    tint = tuple(max(0, min(255, int(c * rng.uniform(0.8, 1.2)))) for c in TINTS[label])
    coloured = ImageChops.multiply(Image.merge("RGB", (item, item, item)), Image.new("RGB", (side, side), tint))
    bg.paste(coloured, (rng.randrange(w - side + 1), rng.randrange(h - side + 1)), item)
    grain = Image.effect_noise((w, h), 12).convert("RGB")
    return ImageChops.add(bg, grain, scale=1.0, offset=-128)


def photos(out, counts, size, quality):
    import random
    for train, count in zip((True, False), counts):
        n, h, w, images, labels = split(train)
        name = "train" if train else "test"
        count = min(count, n)
        for i in range(count):
            label = labels[i]
            rng = random.Random("%s-%d" % (name, i))
            path = os.path.join(out, name, CLASSES[label], "%s-%06d.jpg" % (name, i))
            coarse = os.path.join(out, "coarse", name, COARSE[label], "%s-%06d.jpg" % (name, i))
            for d in (path, coarse):  # a class folder only with images, as ImageFolder wants
                os.makedirs(os.path.dirname(d), exist_ok=True)
            photo(images[i * h * w:(i + 1) * h * w], label, rng, size).save(path, quality=quality)
            if os.path.exists(coarse):
                os.unlink(coarse)
            os.link(path, coarse)
        print("%s: %d %s photos of %dx%d in %s/%s/ and %s/coarse/%s/" % (out, count, name, size[0], size[1],
                                                                      out, name, out, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("npy")
    p.add_argument("dir")
    p = sub.add_parser("shards")
    p.add_argument("dir")
    p.add_argument("--train", type=int, default=60000)
    p.add_argument("--test", type=int, default=10000)
    p.add_argument("--per-shard", type=int, default=1000)
    p = sub.add_parser("photos")
    p.add_argument("dir")
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--test", type=int, default=500)
    p.add_argument("--size", default="500x375", help="WxH of a landscape picture")
    p.add_argument("--quality", type=int, default=90)
    args = ap.parse_args()
    if not os.path.isdir(FASHION):
        sys.exit("Fashion-MNIST is not in %s: apt-get install dataset-fashion-mnist" % FASHION)
    if args.what == "npy":
        npy(args.dir)
    elif args.what == "photos":
        m = re.fullmatch(r"(\d+)x(\d+)", args.size)
        if not m or min(int(m.group(1)), int(m.group(2))) < 28:
            sys.exit("--size %s: give WxH, each at least 28, e.g. 500x375" % args.size)
        try:
            import PIL  # noqa: F401
        except ImportError:
            sys.exit("the photo folder needs Pillow: apt-get install python3-pil")
        photos(args.dir, (args.train, args.test), (int(m.group(1)), int(m.group(2))), args.quality)
    else:
        shards(args.dir, (args.train, args.test), args.per_shard)


if __name__ == "__main__":
    main()
