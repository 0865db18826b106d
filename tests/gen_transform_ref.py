#!/usr/bin/python3
"""Reference values for tests/unit/test_transform.c, from real torchvision.

Writes tests/data/transform_ref.json: for each case a transform spec (as the kernel's
taas_value_spec writes it), an HWC input image and what torchvision makes of it. Run it with
Debian's python3-torch and python3-torchvision (torch 1.13, torchvision 0.14, Pillow 9.4):

    /usr/bin/python3 tests/gen_transform_ref.py

The fixture is committed; the C tests do not need torch. Random transforms are recorded only
where they are deterministic (a crop as large as the padded image, p = 0 or 1); the C tests
check the random draws themselves.
"""
import json
import os
import sys

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torchvision import transforms as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "transform_ref.json")

INTERP = {
    "nearest": T.InterpolationMode.NEAREST,
    "bilinear": T.InterpolationMode.BILINEAR,
    "bicubic": T.InterpolationMode.BICUBIC,
}


def tv(spec):
    """torchvision transform from a spec."""
    t = spec["type"]
    if t == "Compose":
        return T.Compose([tv(s) for s in spec["transforms"]])
    if t == "ToTensor":
        return T.ToTensor()
    if t == "Normalize":
        return T.Normalize(spec["mean"], spec["std"])
    if t == "RandomCrop":
        fill = spec["fill"]
        if isinstance(fill, list):
            fill = tuple(fill)
        return T.RandomCrop(spec["size"], padding=spec["padding"], pad_if_needed=spec["pad_if_needed"],
                            fill=fill, padding_mode=spec["padding_mode"])
    if t == "RandomHorizontalFlip":
        return T.RandomHorizontalFlip(spec["p"])
    if t == "Resize":
        return T.Resize(spec["size"], interpolation=INTERP[spec["interpolation"]],
                        max_size=spec["max_size"], antialias=spec["antialias"])
    if t == "CenterCrop":
        return T.CenterCrop(spec["size"])
    raise ValueError(t)


# Specs with every parameter, as the kernel writes them.
def to_tensor():
    return {"type": "ToTensor"}


def normalize(mean, std):
    return {"type": "Normalize", "mean": list(mean), "std": list(std), "inplace": False}


def random_crop(size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
    return {"type": "RandomCrop", "size": list(size), "padding": padding, "pad_if_needed": pad_if_needed,
            "fill": fill, "padding_mode": padding_mode}


def flip(p):
    return {"type": "RandomHorizontalFlip", "p": float(p)}


def resize(size, interpolation="bilinear", max_size=None, antialias=None):
    return {"type": "Resize", "size": size, "interpolation": interpolation, "max_size": max_size,
            "antialias": antialias}


def center_crop(size):
    return {"type": "CenterCrop", "size": list(size)}


def compose(*ts):
    return {"type": "Compose", "transforms": list(ts)}


rng = np.random.RandomState(20240601)
IMAGES = {
    "gray": rng.randint(0, 256, size=(9, 7, 1)).astype(np.uint8),
    "rgb": rng.randint(0, 256, size=(10, 13, 3)).astype(np.uint8),
    "wide": rng.randint(0, 256, size=(6, 17, 3)).astype(np.uint8),
    "float": rng.uniform(-2, 3, size=(8, 11, 2)).astype(np.float32),
}
# A smooth image too: resampling errors hide less in noise-free gradients.
yy, xx = np.mgrid[0:24, 0:20]
IMAGES["smooth"] = np.stack([(yy * 10 + xx * 3) % 256, (xx * 12) % 256, (255 - yy * 9) % 256],
                            axis=-1).astype(np.uint8)


def as_input(arr):
    """What torchvision gets: a PIL image for uint8 (L or RGB), a CHW tensor for float."""
    if arr.dtype == np.uint8:
        return Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr, "L" if arr.shape[2] == 1 else "RGB")
    return arr


CASES = []


def F32(v):
    """A float32 as the double of its shortest decimal: JSON then holds e.g. 0.12156863, which
    reads back as the same float32."""
    return float(np.format_float_scientific(np.float32(v), unique=True))


def whole_padded_image(img, output_size):
    """RandomCrop.get_params that keeps everything: torchvision's own forward() then returns
    the image after its padding, of which the C side's random crop must be a window."""
    _, h, w = torchvision.transforms.functional.get_dimensions(img)
    return 0, 0, h, w


def case(name, image, spec, tol=1e-5, reference=None, window=False):
    arr = IMAGES[image]
    if window:
        saved = T.RandomCrop.__dict__["get_params"]
        T.RandomCrop.get_params = staticmethod(whole_padded_image)
        try:
            out = tv(spec)(as_input(arr))
        finally:
            T.RandomCrop.get_params = saved
        if not isinstance(out, torch.Tensor):
            out = T.ToTensor()(out)
    elif reference is None:
        out = tv(spec)(as_input(arr))
        if not isinstance(out, torch.Tensor):
            out = T.ToTensor()(out)  # the C side ends with an implicit ToTensor
    else:
        out = reference(arr)
    out = out.detach().to(torch.float32).contiguous()
    c, h, w = out.shape
    CASES.append({
        "name": name,
        "spec": spec,
        "input": image,
        "output": {"c": c, "h": h, "w": w, "data": [F32(v) for v in out.numpy().reshape(-1)]},
        "tol": tol,
        "window": window,
    })


def build():
    # ToTensor and Normalize
    case("totensor_gray", "gray", to_tensor(), tol=0)
    case("totensor_rgb", "rgb", to_tensor(), tol=0)
    case("totensor_float_unscaled", "float", to_tensor(), tol=0)
    case("normalize_gray", "gray", compose(to_tensor(), normalize([0.2860], [0.3530])))
    case("normalize_rgb", "rgb", compose(to_tensor(), normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])))
    case("normalize_broadcast_one_value", "rgb", compose(to_tensor(), normalize([0.5], [0.25])))
    case("normalize_float", "float", compose(to_tensor(), normalize([0.1, -0.2], [2.0, 0.5])))
    case("normalize_twice_unfused", "rgb", compose(to_tensor(), flip(1.0), normalize([0.5], [0.5]),
                                                   normalize([0.1, 0.2, 0.3], [1.5, 2.5, 3.5])))
    # Resize on images: Pillow's resampling (u8 stage)
    for interp in ("bilinear", "bicubic", "nearest"):
        case(f"pil_resize_{interp}_down", "rgb", resize([5, 7], interp), tol=0)
        case(f"pil_resize_{interp}_up", "rgb", resize([14, 16], interp), tol=0)
        case(f"pil_resize_{interp}_smooth_down", "smooth", resize([7, 9], interp), tol=0)
        case(f"pil_resize_{interp}_gray_mixed", "gray", resize([4, 15], interp), tol=0)
    case("pil_resize_short_edge", "rgb", resize(6), tol=0)
    case("pil_resize_short_edge_wide", "wide", resize(4), tol=0)
    case("pil_resize_short_edge_up", "gray", resize(20), tol=0)
    case("pil_resize_max_size", "wide", resize(5, max_size=9), tol=0)
    case("pil_resize_same_size", "rgb", resize([10, 13]), tol=0)
    # Resize on tensors: torch.nn.functional.interpolate
    for interp in ("bilinear", "bicubic", "nearest"):
        case(f"tensor_resize_{interp}_down", "rgb", compose(to_tensor(), resize([5, 7], interp)))
        case(f"tensor_resize_{interp}_up", "rgb", compose(to_tensor(), resize([14, 16], interp)))
        case(f"tensor_resize_{interp}_mixed", "smooth", compose(to_tensor(), resize([9, 31], interp)))
    case("tensor_resize_nearest_double", "gray", compose(to_tensor(), resize([18, 14], "nearest")))
    case("tensor_resize_bilinear_antialias", "smooth", compose(to_tensor(), resize([7, 6], antialias=True)))
    case("tensor_resize_bicubic_antialias", "smooth", compose(to_tensor(), resize([7, 6], "bicubic", antialias=True)))
    case("tensor_resize_bilinear_antialias_up", "rgb", compose(to_tensor(), resize([15, 20], antialias=True)))
    case("tensor_resize_short_edge", "wide", compose(to_tensor(), resize(4)))
    case("tensor_resize_float_input", "float", compose(to_tensor(), resize([5, 16])))
    # A float image before ToTensor is resized as a tensor (PIL has no multi-channel float)
    case("float_image_resize_before_totensor", "float", resize([5, 16]),
         reference=lambda a: torch.nn.functional.interpolate(
             torch.from_numpy(a).permute(2, 0, 1)[None], size=[5, 16], mode="bilinear",
             align_corners=False)[0])
    # Crops, pads and flips of a float image before ToTensor move the same values as on the
    # tensor after it (torchvision itself takes no float arrays there)
    float_geom = [center_crop([5, 9]), flip(1.0), random_crop([9, 13], padding=2, fill=0.5, padding_mode="constant"),
                  random_crop([13, 17], padding=2, padding_mode="symmetric")]
    case("float_image_geometry_before_totensor", "float", compose(*float_geom),
         reference=lambda a: tv(compose(to_tensor(), *float_geom))(a))
    # CenterCrop, smaller and larger than the image, odd and even differences
    case("pil_center_crop_small", "rgb", center_crop([5, 6]), tol=0)
    case("pil_center_crop_odd", "rgb", center_crop([7, 8]), tol=0)
    case("pil_center_crop_large", "gray", center_crop([12, 10]), tol=0)
    case("pil_center_crop_mixed", "rgb", center_crop([13, 6]), tol=0)
    case("tensor_center_crop_small", "rgb", compose(to_tensor(), center_crop([5, 6])))
    case("tensor_center_crop_odd", "smooth", compose(to_tensor(), center_crop([21, 15])))
    case("tensor_center_crop_large", "gray", compose(to_tensor(), center_crop([12, 10])))
    case("tensor_center_crop_mixed", "rgb", compose(to_tensor(), center_crop([15, 4])))
    # RandomCrop as large as the padded image: the padding, deterministic
    for mode in ("constant", "edge", "reflect", "symmetric"):
        case(f"pil_pad_{mode}", "rgb", random_crop([14, 19], padding=[2, 1, 4, 3], fill=7, padding_mode=mode), tol=0)
        case(f"pil_pad_{mode}_gray_large", "gray", random_crop([9 + 18, 7 + 18], padding=9, fill=200,
                                                                padding_mode=mode), tol=0)
        case(f"tensor_pad_{mode}", "rgb", compose(to_tensor(), random_crop([14, 19], padding=[2, 1, 4, 3], fill=0.25,
                                                                           padding_mode=mode)))
    case("pil_pad_fill_per_channel", "rgb", random_crop([12, 17], padding=[2, 1], fill=[10, 300, -5]), tol=0)
    case("pil_pad_fill_truncated", "gray", random_crop([11, 9], padding=1, fill=3.9), tol=0)
    # pad_if_needed pads both sides by the whole shortfall, so these crops are random: the
    # fixture holds torchvision's padded image and the C side checks for a window of it
    case("pil_pad_if_needed", "gray", random_crop([15, 11], pad_if_needed=True, fill=9), tol=0, window=True)
    case("pil_pad_if_needed_reflect", "gray", random_crop([13, 12], padding=1, pad_if_needed=True,
                                                          padding_mode="reflect"), tol=0, window=True)
    case("tensor_pad_if_needed_edge", "rgb", compose(to_tensor(), random_crop([16, 13], pad_if_needed=True,
                                                                              padding_mode="edge")), window=True)
    case("pil_random_crop_symmetric_window", "rgb", random_crop([6, 9], padding=[3, 2], padding_mode="symmetric"),
         tol=0, window=True)
    case("tensor_random_crop_constant_window", "smooth", compose(to_tensor(), random_crop([12, 12], padding=2,
                                                                                         fill=-1.5)), window=True)
    case("random_crop_whole_image", "rgb", random_crop([10, 13]), tol=0)
    # Flips with p = 0 and 1
    case("pil_flip_always", "rgb", flip(1.0), tol=0)
    case("pil_flip_never", "rgb", flip(0.0), tol=0)
    case("tensor_flip_always", "float", compose(to_tensor(), flip(1.0)), tol=0)
    # Whole chains
    case("chain_resize_crop_normalize", "smooth",
         compose(resize(12), center_crop([10, 10]), to_tensor(), normalize([0.5, 0.4, 0.3], [0.2, 0.3, 0.4])))
    case("chain_tensor_ops", "rgb",
         compose(to_tensor(), random_crop([14, 17], padding=2, padding_mode="reflect"), flip(1.0),
                 resize([7, 9], antialias=True), normalize([0.5], [0.5])))
    case("chain_without_totensor", "rgb", compose(center_crop([8, 8]), flip(1.0)), tol=0)


def main():
    build()
    images = {name: {"h": a.shape[0], "w": a.shape[1], "c": a.shape[2],
                     "dtype": "uint8" if a.dtype == np.uint8 else "float32",
                     "data": [int(v) if a.dtype == np.uint8 else F32(v) for v in a.reshape(-1)]}
              for name, a in IMAGES.items()}
    doc = {
        "generated_by": "tests/gen_transform_ref.py",
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "pillow": PIL.__version__, "numpy": np.__version__},
        "images": images,
        "cases": CASES,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(CASES)} cases -> {os.path.relpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
