"""Packs files into one fuzz input in tests/fuzz/fuzz_input.h's split_files format: per file one byte
of name length, the name, a 4-byte little-endian length, the bytes.

usage: pack_files.py OUT NAME=PATH...
"""
import struct
import sys


def main() -> None:
    out, pairs = sys.argv[1], sys.argv[2:]
    packed = bytearray()
    for pair in pairs:
        name, path = pair.split("=", 1)
        data = open(path, "rb").read()
        packed += bytes([len(name)]) + name.encode() + struct.pack("<I", len(data)) + data
    open(out, "wb").write(packed)


if __name__ == "__main__":
    main()
