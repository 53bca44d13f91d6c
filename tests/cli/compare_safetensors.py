"""Compares two safetensors files of fp32 tensors (atoll ckpt export) element by element.

Usage: compare_safetensors.py A B TOLERANCE
Prints the largest absolute difference over every tensor and the tensor it is in; exits 0 when the
files hold the same tensor names and shapes and that difference is at most TOLERANCE, else 1. A NaN
or an infinity in either file is an infinite difference (a NaN compares false with every bound).
Standard library only: safetensors is an 8-byte header length, a JSON header and raw little-endian data.
"""
import array
import json
import math
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {meta['dtype']}, expected F32")
        begin, end = meta["data_offsets"]
        values = array.array("f")
        values.frombytes(data[begin:end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (tuple(meta["shape"]), values)
    return tensors


def difference(x, y):
    if not (math.isfinite(x) and math.isfinite(y)):
        return math.inf
    return abs(x - y)


def main():
    a, b, tolerance = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
    if a.keys() != b.keys():
        print(f"different tensors: {sorted(a.keys() ^ b.keys())}")
        return 1
    worst, where = 0.0, ""
    for name, (shape, values) in a.items():
        other_shape, other = b[name]
        if shape != other_shape:
            print(f"{name}: shape {shape} against {other_shape}")
            return 1
        diff = max((difference(x, y) for x, y in zip(values, other)), default=0.0)
        if diff > worst or not where:
            worst, where = diff, name
    print(f"max abs difference {worst:.3e} in {where}")
    return 0 if worst <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
