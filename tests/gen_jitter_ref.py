#!/usr/bin/python3
"""Reference values for tests/unit/test_transform_rrc.c, from real torchvision.

Writes tests/data/jitter_ref.json: an RGB and an L image (HWC bytes), and what torchvision's
functional ops make of them for fixed parameters: adjust_brightness, adjust_contrast,
adjust_saturation and adjust_hue for several factors (on PIL images, as ColorJitter applies
them before ToTensor), resized_crop for fixed boxes (PIL images with bilinear, bicubic and
nearest; tensors with bilinear), and RandomResizedCrop where its draw cannot succeed (scale
above 1), so that it takes its deterministic central fallback. The draws themselves come
from taas's generator and are checked for their properties in the C test. Run it with
Debian's python3-torchvision and python3-pil (torchvision 0.14, Pillow 9.4):

    /usr/bin/python3 tests/gen_jitter_ref.py
"""
import json
import os

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "jitter_ref.json")
INTERP = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC,
          "nearest": T.InterpolationMode.NEAREST}


def picture(h, w, c):
    rng = np.random.RandomState(7 + c)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 9 + y * 5 + 40 * k) % 256 for k in range(c)], axis=-1)
    noise = rng.randint(-30, 31, size=(h, w, c))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def pil(a):
    return Image.fromarray(a[..., 0], "L") if a.shape[2] == 1 else Image.fromarray(a, "RGB")


def hwc(img):
    a = np.asarray(img)
    return (a[..., None] if a.ndim == 2 else a).reshape(-1).tolist()


def main():
    images = {"rgb": picture(17, 23, 3), "grey": picture(11, 9, 1)}
    adjust = []
    ops = {"brightness": (F.adjust_brightness, [0.0, 0.37, 1.0, 1.6, 2.9]),
           "contrast": (F.adjust_contrast, [0.0, 0.2, 0.9, 1.7]),
           "saturation": (F.adjust_saturation, [0.0, 0.5, 1.0, 1.8]),
           "hue": (F.adjust_hue, [-0.5, -0.21, -0.01, 0.0, 0.003, 0.13, 0.5])}
    for name, a in images.items():
        for op, (fn, factors) in ops.items():
            for f in factors:
                adjust.append({"image": name, "op": op, "factor": f, "out": hwc(fn(pil(a), f))})
    crops = []
    for interp, box, size in [("bilinear", (2, 3, 10, 12), (8, 8)), ("bilinear", (0, 0, 17, 23), (30, 20)),
                              ("bicubic", (5, 1, 7, 9), (12, 5)), ("nearest", (1, 2, 13, 20), (6, 11)),
                              ("bilinear", (4, 4, 6, 6), (6, 6))]:
        out = F.resized_crop(pil(images["rgb"]), *box, list(size), INTERP[interp])
        crops.append({"image": "rgb", "tensor": False, "interpolation": interp, "box": box, "size": size,
                      "out": hwc(out)})
    t = F.to_tensor(pil(images["rgb"]))
    out = F.resized_crop(t, 2, 3, 10, 12, [7, 15], T.InterpolationMode.BILINEAR, antialias=False)
    crops.append({"image": "rgb", "tensor": True, "interpolation": "bilinear", "box": (2, 3, 10, 12),
                  "size": (7, 15), "chw": out.reshape(-1).tolist()})
    fallback = []
    for ratio in [(1.0, 1.0), (0.5, 0.6), (2.0, 3.0), (1.0, 1.5)]:
        tf = T.RandomResizedCrop((9, 10), scale=(2.0, 3.0), ratio=ratio)
        out = tf(pil(images["rgb"]))
        fallback.append({"ratio": ratio, "size": (9, 10), "out": hwc(out)})
    ref = {"generator": "tests/gen_jitter_ref.py", "torch": torch.__version__, "torchvision": torchvision.__version__,
           "pillow": PIL.__version__,
           "images": {k: {"shape": list(v.shape), "data": v.reshape(-1).tolist()} for k, v in images.items()},
           "adjust": adjust, "resized_crop": crops, "fallback": fallback}
    with open(OUT, "w") as f:
        json.dump(ref, f)
        f.write("\n")


if __name__ == "__main__":
    main()
