#!/usr/bin/python3
"""Reference for the scaled JPEG decode (tests/unit/test_decode_scaled.c), from torchvision.

Writes tests/data/scaled_ref.json: a 500x375 JPEG of quality 90 (a synthetic picture: smooth
colour fields, texture and sharp edges; there is no photo among Debian's packages) and, for
fixed crop boxes, torchvision's resized_crop of PIL's full decode (what
RandomResizedCrop(size) gives for that box); then, for that JPEG and a 300x400 (portrait)
one, what Compose([Resize(...), CenterCrop(...)]) and Resize(...) alone make of PIL's full
decode (the evaluation recipe). The C test decodes only what each keeps at libjpeg-turbo's
smallest covering scale and measures how far it lands from these. Run it with Debian's
python3-torchvision and python3-pil (torchvision 0.14, Pillow 9.4):

    /usr/bin/python3 tests/gen_scaled_ref.py
"""
import io
import json
import os

import numpy as np
import PIL
import torchvision
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "scaled_ref.json")


def picture(h, w):
    rng = np.random.RandomState(3)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for k in range(3):
        for _ in range(4):
            fy, fx, ph = rng.uniform(0.002, 0.03), rng.uniform(0.002, 0.03), rng.uniform(0, 6.3)
            img[..., k] += 30 * np.sin(fy * y * 6.3 + fx * x * 6.3 + ph)
        img[..., k] += 120 + 20 * k
    # texture: noise smoothed over a few pixels
    noise = rng.normal(0, 25, size=(h, w))
    for _ in range(2):
        noise = (noise + np.roll(noise, 1, 0) + np.roll(noise, 1, 1) + np.roll(noise, -1, 0) + np.roll(noise, -1, 1)) / 5
    img += noise[..., None]
    # sharp edges: a few rectangles
    for _ in range(6):
        y0, x0 = rng.randint(0, h - 40), rng.randint(0, w - 40)
        img[y0:y0 + rng.randint(20, 120), x0:x0 + rng.randint(20, 160)] = rng.uniform(0, 255, size=3)
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    b = io.BytesIO()
    Image.fromarray(picture(375, 500), "RGB").save(b, "JPEG", quality=90)
    data = b.getvalue()
    full = Image.open(io.BytesIO(data)).convert("RGB")
    cases = []
    # (top, left, h, w) -> (oh, ow): scales 1/8, 1/4, 1/2 and 1 (a box too small to scale)
    for box, size in [((0, 62, 375, 375), (40, 40)), ((37, 101, 300, 260), (64, 56)),
                      ((120, 7, 150, 190), (64, 64)), ((10, 20, 90, 100), (64, 64)), ((200, 300, 101, 77), (50, 38))]:
        out = F.resized_crop(full, *box, list(size), F.InterpolationMode.BILINEAR)
        cases.append({"box": box, "size": size, "out": np.asarray(out).reshape(-1).tolist()})
    b = io.BytesIO()
    Image.fromarray(picture(400, 300), "RGB").save(b, "JPEG", quality=90)
    jpegs = {"jpeg": data, "jpeg_portrait": b.getvalue()}
    # the evaluation recipe and its parts: (jpeg, Resize's size, CenterCrop's size or None,
    # interpolation, the scale 1/n the loader should pick: the smallest whose image still has
    # Resize's size)
    resize_cases = []
    for key, size, crop, interp, denom in [
            ("jpeg", 256, 224, "bilinear", 1),        # ImageNet's: only the crop, full scale
            ("jpeg", 128, 112, "bilinear", 2),
            ("jpeg", 64, 56, "bilinear", 4),
            ("jpeg", 40, 32, "bilinear", 8),
            ("jpeg", 120, 100, "bicubic", 2),
            ("jpeg", 375, 64, "bilinear", 1),         # the size already right: a crop only
            ("jpeg", 100, None, "bilinear", 2),       # Resize alone
            ("jpeg", [90, 120], None, "bilinear", 4),
            ("jpeg_portrait", 64, 56, "bilinear", 4),
            ("jpeg_portrait", 70, [60, 40], "bilinear", 4)]:
        steps = [{"type": "Resize", "size": size, "interpolation": interp}]
        tv = [T.Resize(size, interpolation=F.InterpolationMode(interp))]
        if crop is not None:
            steps.append({"type": "CenterCrop", "size": crop})
            tv.append(T.CenterCrop(crop))
        img = Image.open(io.BytesIO(jpegs[key])).convert("RGB")
        out = np.asarray(T.Compose(tv)(img))
        resize_cases.append({"jpeg": key, "transforms": steps, "scale": denom, "shape": list(out.shape),
                             "out": out.tobytes().hex()})
    ref = {"generator": "tests/gen_scaled_ref.py", "torchvision": torchvision.__version__, "pillow": PIL.__version__,
           "jpeg": data.hex(), "jpeg_portrait": jpegs["jpeg_portrait"].hex(), "cases": cases,
           "resize_cases": resize_cases}
    with open(OUT, "w") as f:
        json.dump(ref, f)
        f.write("\n")


if __name__ == "__main__":
    main()
