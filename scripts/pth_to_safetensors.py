#!/usr/bin/env python3
"""Converts a PyTorch state_dict saved with torch.save (a .pth or .pt file) into a safetensors
file that taas's load() reads, with your own torch, on your own machine:

    python3 scripts/pth_to_safetensors.py resnet18.pth resnet18.safetensors

The kernel never unpickles: a pickle can run any code, so taas reads only safetensors. This
script unpickles with torch.load(weights_only=True), which builds tensors and plain
containers and refuses anything else, so a file from someone else cannot run code here either.

What it accepts (docs/training.md, "Weights from PyTorch"):
- a state_dict, as model.state_dict() gives it;
- a training checkpoint that holds one under "state_dict", "model_state_dict" or "model";
  --key NAME picks another;
- keys all under "module." (nn.DataParallel, DistributedDataParallel) lose that prefix,
  so that they are the model's own names.

Floating tensors are written as F32, the training core's type (float16, bfloat16 and float64
are converted, and the script says how many); integer tensors such as BatchNorm's
num_batches_tracked keep their type. The output is written whole or not at all (a temporary
file beside it, renamed over it). Exit status 0 on success, 2 with a message on stderr
saying what is wrong and what to do.
"""

import argparse
import json
import os
import struct
import sys
import tempfile

CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model")


class Refused(Exception):
    """What is wrong with the input, and what to do; the script's exit status is 2."""


def fail(msg):
    raise Refused(msg)


def load_state(path, key):
    import torch  # the user's own; imported here so that --help works without it

    if not os.path.isfile(path):
        fail("%s is not a file" % path)
    with open(path, "rb") as f:
        head = f.read(4)
    # torch.save writes a zip archive (torch 1.6 and later) or, before that, a pickle (0x80)
    if head != b"PK\x03\x04" and head[:1] != b"\x80":
        fail("%s is not a file torch.save wrote: it starts with %r, not a zip archive or a pickle\nhint: give the "
             ".pth or .pt file that torch.save(model.state_dict(), path) wrote" % (path, head))
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises pickle's, zipfile's and its own errors alike
        text = str(e).strip()
        unsupported = text[text.find("Unsupported class"):].splitlines()[0] if "Unsupported class" in text else None
        fail("%s cannot be read as a PyTorch state_dict: %s\nhint: this reads what torch.save(model.state_dict(), "
             "path) writes, with torch.load(weights_only=True); a whole pickled model (torch.save(model, path)) is "
             "code, not weights: load it in your own Python and save model.state_dict() instead" %
             (path, unsupported or (text.splitlines()[0] if text else type(e).__name__)))
    return pick_state(obj, key, path)


def pick_state(obj, key, path):
    import torch

    def is_state(d):
        return isinstance(d, dict) and d and all(isinstance(k, str) and torch.is_tensor(v) for k, v in d.items())

    if key is not None:
        if not isinstance(obj, dict) or key not in obj:
            have = ", ".join(sorted(repr(k) for k in obj)) if isinstance(obj, dict) else type(obj).__name__
            fail("%s has no %r (it holds %s)" % (path, key, have))
        obj, where = obj[key], "under %r" % key
    elif is_state(obj):
        where = None
    else:
        found = [k for k in CHECKPOINT_KEYS if isinstance(obj, dict) and is_state(obj.get(k))]
        if not found:
            have = ", ".join(sorted(repr(k) for k in obj)[:12]) if isinstance(obj, dict) else type(obj).__name__
            fail("%s holds no state_dict: no dict of tensors at its top or under %s (it holds %s)\nhint: name the "
                 "entry that holds it with --key" % (path, ", ".join(repr(k) for k in CHECKPOINT_KEYS), have))
        obj, where = obj[found[0]], "under %r" % found[0]
    if not is_state(obj):
        bad = next((k for k, v in obj.items() if not torch.is_tensor(v)), None) if isinstance(obj, dict) else None
        fail("%s: the state_dict%s is not a dict of named tensors%s" % (
            path, " " + where if where else "", " (%r is a %s)" % (bad, type(obj[bad]).__name__) if bad else ""))
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
        where = (where + ", " if where else "") + "without the prefix 'module.'"
    return obj, where



def dtypes():
    import torch
    return {torch.float32: "F32", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
            torch.uint8: "U8", torch.bool: "BOOL"}


def encode(state):
    """The safetensors bytes of state: header size, JSON header (padded to 8 bytes), data."""
    import torch

    names = dtypes()
    header, chunks, offset, converted = {"__metadata__": {"format": "pt"}}, [], 0, 0
    for key in sorted(state):
        t = state[key].detach().cpu()
        if t.is_floating_point() and t.dtype != torch.float32:
            t, converted = t.to(torch.float32), converted + 1
        if t.dtype not in names:
            fail("tensor %r has dtype %s, which a safetensors file for taas cannot hold" % (key, t.dtype))
        data = t.contiguous().numpy().tobytes()
        header[key] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks), converted


def write_atomic(path, data):
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        fail("%s is a folder; name the file to write" % path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main(argv=None):
    p = argparse.ArgumentParser(description="Convert a PyTorch state_dict (.pth/.pt) to safetensors for taas.")
    p.add_argument("pth", help="the file torch.save wrote")
    p.add_argument("out", help="the safetensors file to write")
    p.add_argument("--key", help="the entry of a checkpoint dict that holds the state_dict")
    a = p.parse_args(argv)
    try:
        state, where = load_state(a.pth, a.key)
        data, converted = encode(state)
        write_atomic(a.out, data)
    except Refused as e:
        print("pth_to_safetensors: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("pth_to_safetensors: cannot write %s: %s" % (a.out, e.strerror or e), file=sys.stderr)
        return 2
    print("%s: %d tensors%s%s -> %s (%d bytes)" % (
        a.pth, len(state), " " + where if where else "",
        "; %d floating tensors converted to float32" % converted if converted else "", a.out, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
