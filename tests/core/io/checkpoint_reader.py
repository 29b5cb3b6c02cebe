#!/usr/bin/env python3
"""Reads a Cohort checkpoint with numpy and json only, and checks it against expected values.

    checkpoint_reader.py CHECKPOINT EXPECTED_JSON

EXPECTED_JSON (written by core_checkpoint_test) holds {"metadata": {...}, "tensors": [{"name",
"shape", "bits"}, ...]} with the float values as their IEEE-754 bit patterns, so the comparison is
exact. Exits 0 when the checkpoint holds exactly that and both its checksums verify, 1 with a
message per mismatch otherwise.

checksums() recomputes crc32c and header_crc32c as core/io/safetensors.h describes them, with a
CRC-32C of its own: an implementation of the scheme that shares no code with Cohort's.

load() shows that a Cohort checkpoint is plain safetensors: an 8-byte little-endian header length,
a JSON header, then the tensors' little-endian float32 bytes at their data_offsets.
"""

import json
import struct
import sys

import numpy as np


def load(path):
    """Returns (tensors, metadata): an ordered dict name -> float32 array, and the metadata."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} exceeds the file")
    if (8 + header_len) % 8 != 0:
        raise ValueError(f"{path}: data region is not 8-byte aligned")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + header_len:]
    entries = sorted(header.items(), key=lambda item: tuple(item[1]["data_offsets"]))
    tensors = {}
    covered = 0
    for name, info in entries:
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name!r} has dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        if begin != covered:
            raise ValueError(f"{path}: tensor {name!r} starts at {begin}, expected {covered}")
        shape = tuple(info["shape"])
        array = np.frombuffer(data[begin:end], dtype="<f4")
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name!r} has {array.size} values for shape {shape}")
        tensors[name] = array.reshape(shape)
        covered = end
    if covered != len(data):
        raise ValueError(f"{path}: tensors cover {covered} of {len(data)} data bytes")
    return tensors, metadata


def crc32c(data):
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def checksums(path):
    """Errors in the file's crc32c (the data region) and header_crc32c (the length field and the
    header, with header_crc32c's own digits read as zeros); empty when both match."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    metadata = json.loads(blob[8:8 + header_len].decode("utf-8"))["__metadata__"]
    errors = []
    data_crc = f"{crc32c(blob[8 + header_len:]):08x}"
    if metadata.get("crc32c") != data_crc:
        errors.append(f"crc32c {metadata.get('crc32c')} != {data_crc} computed")
    key = b'"header_crc32c":"'
    at = blob.find(key, 8, 8 + header_len)
    if at < 0 or blob.find(key, at + 1, 8 + header_len) >= 0:
        errors.append("header_crc32c is not in the header exactly once")
        return errors
    digits = at + len(key)
    zeroed = blob[:digits] + b"00000000" + blob[digits + 8:8 + header_len]
    header_crc = f"{crc32c(zeroed):08x}"
    stored = metadata.get("header_crc32c")
    if stored != header_crc or blob[digits:digits + 8] != header_crc.encode():
        errors.append(f"header_crc32c {stored} != {header_crc} computed")
    return errors


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tensors, metadata = load(argv[1])
    with open(argv[2]) as f:
        expected = json.load(f)

    errors = checksums(argv[1])
    if metadata != expected["metadata"]:
        errors.append(f"metadata {metadata} != expected {expected['metadata']}")
    names = [t["name"] for t in expected["tensors"]]
    if list(tensors) != names:
        errors.append(f"tensor order {list(tensors)} != expected {names}")
    for want in expected["tensors"]:
        name = want["name"]
        if name not in tensors:
            errors.append(f"tensor {name!r} missing")
            continue
        got = tensors[name]
        if got.shape != tuple(want["shape"]):
            errors.append(f"tensor {name!r} shape {got.shape} != expected {tuple(want['shape'])}")
            continue
        got_bits = got.reshape(-1).view("<u4")
        want_bits = np.array(want["bits"], dtype=np.uint32)
        differ = np.flatnonzero(got_bits != want_bits)
        if differ.size:
            i = differ[0]
            errors.append(f"tensor {name!r}: {differ.size} values differ, first at {i}: "
                          f"bits {got_bits[i]:#010x} != expected {want_bits[i]:#010x}")
    for e in errors:
        print(f"{argv[1]}: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"{argv[1]}: {len(tensors)} tensors, {sum(t.size for t in tensors.values())} values, "
          f"global_step {metadata.get('global_step')}, checksums verified: all match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
