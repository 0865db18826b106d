#!/usr/bin/python3
"""Reference for tests/unit/test_formats_folder.c, from real torchvision.

Writes tests/data/imagefolder_ref.json: a small folder tree (the files' bytes in hex: JPEGs
and PNGs of every colour type PIL writes, nested and sibling folders whose sorted order
differs from a depth-first walk, mixed-case extensions, a file that is no image) and what
torchvision.datasets.ImageFolder makes of it: classes, class_to_idx, the samples in order
with their labels, and each image's pixels as pil_loader gives them (RGB). Run it with
Debian's python3-torchvision and python3-pil (torchvision 0.14, Pillow 9.4):

    /usr/bin/python3 tests/gen_imagefolder_ref.py

The fixture is committed; the C test writes the same files and does not need torch.
"""
import io
import json
import os
import tempfile

import numpy as np
import PIL
import torchvision
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "imagefolder_ref.json")


def pic(w, h, c, seed):
    y, x = np.mgrid[0:h, 0:w]
    chans = [((x * 37 + y * 11 + k * 53 + seed * 19) % 256) for k in range(c)]
    return np.stack(chans, axis=-1).astype(np.uint8)


def encode(mode, fmt, seed, w=8, h=6):
    c = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "P": 1}[mode]
    a = pic(w, h, c, seed)
    img = Image.fromarray(a[..., 0] if c == 1 else a, "L" if mode == "P" else mode)
    if mode == "P":
        img = img.convert("RGB").quantize(colors=16)
    b = io.BytesIO()
    if fmt == "JPEG":
        img.save(b, fmt, quality=90)
    else:
        img.save(b, fmt)
    return b.getvalue()


FILES = {
    "dog/x.png": encode("P", "PNG", 1),
    "dog/y.PNG": encode("LA", "PNG", 2),
    "Cat/1.JPG": encode("RGB", "JPEG", 3),
    "Cat/a.png": encode("RGBA", "PNG", 4),
    "Cat/notes.txt": b"not an image\n",
    "Cat/.b.jpeg": encode("RGB", "JPEG", 5),
    "bird/z.jpeg": encode("RGB", "JPEG", 6),
    "bird/A.jpg": encode("L", "JPEG", 7),
    "bird/sub/b.Png": encode("L", "PNG", 8),
    "bird/sub/e.jpg": encode("RGB", "JPEG", 9, 5, 9),
    "bird/sub-x/c.jpg": encode("RGB", "JPEG", 10),
    "bird/sub/deep/d.JPEG": encode("L", "JPEG", 11),
    "bird/sub/deep/readme": b"no extension\n",
}


def main():
    with tempfile.TemporaryDirectory() as root:
        for rel, data in FILES.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        ds = torchvision.datasets.ImageFolder(root)
        samples = []
        for i, (path, label) in enumerate(ds.samples):
            img, target = ds[i]
            a = np.asarray(img)
            samples.append({"path": os.path.relpath(path, root), "label": target,
                            "shape": list(a.shape), "pixels": a.reshape(-1).tolist()})
            assert target == label
        out = {
            "generator": "tests/gen_imagefolder_ref.py",
            "torchvision": torchvision.__version__,
            "pillow": PIL.__version__,
            "files": {rel: data.hex() for rel, data in FILES.items()},
            "classes": ds.classes,
            "class_to_idx": ds.class_to_idx,
            "samples": samples,
        }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
