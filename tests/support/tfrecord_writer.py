"""TFRecord files of tf.train.Example records, written by the protobuf library itself, for tests.

    from tfrecord_writer import Example, write_records
    e = Example()
    e.features.feature["image/class/label"].int64_list.value.append(3)
    write_records("train.tfrecord", [e], gzip=False)

The messages are declared from TensorFlow's example.proto and feature.proto (package tensorflow)
and serialised by google.protobuf; the framing (uint64 length, masked CRC-32C of it, the data,
masked CRC-32C of the data) uses a CRC-32C of this file's own. Nothing here is Cohort's code.
"""

import gzip as gzip_module
import struct

from proto_messages import Declarations


def _example_class():
    d = Declarations("tensorflow")
    d.message("BytesList", [("value", 1, "bytes", True)])
    d.message("FloatList", [("value", 1, "float", True)])
    d.message("Int64List", [("value", 1, "int64", True)])
    feature = d.message("Feature", [("bytes_list", 1, "BytesList", False),
                                    ("float_list", 2, "FloatList", False),
                                    ("int64_list", 3, "Int64List", False)])
    feature.oneof_decl.add(name="kind")
    for f in feature.field:
        f.oneof_index = 0
    features = d.message("Features", [("feature", 1, "Features.FeatureEntry", True)])
    entry = d.message("FeatureEntry", [("key", 1, "string", False), ("value", 2, "Feature", False)],
                      parent=features)
    entry.options.map_entry = True
    d.message("Example", [("features", 1, "Features", False)])
    return d.classes("Example")[0]


Example = _example_class()

_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def masked_crc32c(data):
    """TFRecord's masked CRC-32C (Castagnoli) of `data`."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_records(path, examples, gzip=False):
    """Writes `examples` (Example messages) as one TFRecord file, gzip-compressed if asked."""
    out = bytearray()
    for e in examples:
        data = e.SerializeToString()
        length = struct.pack("<Q", len(data))
        out += length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))
    with (gzip_module.open if gzip else open)(path, "wb") as f:
        f.write(bytes(out))
