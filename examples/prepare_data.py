#!/usr/bin/env python3
"""Data for the example notebooks, made from Debian's Fashion-MNIST
(`apt-get install dataset-fashion-mnist`), with Python's standard library only.

    python3 examples/prepare_data.py npy DIR
        DIR/fashion-{train,test}-{images,labels}.npy: uint8 images (N, 28, 28) and int64 labels,
        for examples/mlp_npy.ipynb.
    python3 examples/prepare_data.py shards DIR [--train N] [--test N] [--per-shard K]
        WebDataset tar shards of PNG images and .cls labels: DIR/fashion-train-NNNNNN.tar
        (--train samples, default 60000) and DIR/fashion-test-NNNNNN.tar (--test, default
        10000), K samples a shard (default 1000), for examples/webdataset_http.ipynb. Serve DIR
        over HTTP, e.g. `cd DIR && python3 -m http.server 8000`.
"""

import argparse
import gzip
import io
import os
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
    args = ap.parse_args()
    if not os.path.isdir(FASHION):
        sys.exit("Fashion-MNIST is not in %s: apt-get install dataset-fashion-mnist" % FASHION)
    if args.what == "npy":
        npy(args.dir)
    else:
        shards(args.dir, (args.train, args.test), args.per_shard)


if __name__ == "__main__":
    main()
