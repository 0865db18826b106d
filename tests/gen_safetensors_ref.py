#!/usr/bin/python3
"""Writes the safetensors fixtures in tests/data/safetensors/ by hand, following the
format's specification (8-byte little-endian header size, compact JSON header padded with
spaces to a multiple of 8, raw little-endian data), independently of the C writer.

Values are a formula the C test repeats: tensor k, element i = (i % 7 - 3) * 0.25 + k for
F32 (exact in float32) and 1000 * k + i for I64.  Run: /usr/bin/python3 tests/gen_safetensors_ref.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "safetensors")

# (key, dtype, shape), in the order the C test lists them (k = index here).
TENSORS = [
    ("0.weight", "F32", [3, 4]),
    ("0.bias", "F32", [3]),
    ("1.weight", "F32", [3]),
    ("1.bias", "F32", [3]),
    ("1.running_mean", "F32", [3]),
    ("1.running_var", "F32", [3]),
    ("1.num_batches_tracked", "I64", []),
    ("10.weight", "F32", [2, 3, 1, 1]),
]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def data_of(k, dtype, shape):
    n = numel(shape)
    if dtype == "F32":
        return struct.pack("<%df" % n, *[(i % 7 - 3) * 0.25 + k for i in range(n)])
    return struct.pack("<%dq" % n, *[1000 * k + i for i in range(n)])


def write(name, tensors, metadata, data_order):
    """tensors: list of (k, key, dtype, shape); data_order: keys in the order their bytes
    are laid out.  The header lists keys sorted, __metadata__ first."""
    blobs = {key: data_of(k, dt, sh) for k, key, dt, sh in tensors}
    offsets, off = {}, 0
    for key in data_order:
        offsets[key] = (off, off + len(blobs[key]))
        off += len(blobs[key])
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for k, key, dt, sh in sorted(tensors, key=lambda t: t[1]):
        header[key] = {"dtype": dt, "shape": sh, "data_offsets": list(offsets[key])}
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for key in data_order:
            f.write(blobs[key])


def main():
    os.makedirs(OUT, exist_ok=True)
    ts = [(k, key, dt, sh) for k, (key, dt, sh) in enumerate(TENSORS)]
    keys_sorted = sorted(key for _, key, _, _ in ts)
    # What the C writer must reproduce byte for byte.
    write("small_meta.safetensors", ts, {"format": "pt", "taas": "1"}, keys_sorted)
    write("small.safetensors", ts, None, keys_sorted)
    # A file laid out as other writers may do it: data not in key order.
    write("reordered.safetensors", ts, {"format": "pt"},
          [key for _, key, _, _ in reversed(ts)])


if __name__ == "__main__":
    main()
