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

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def _example_class():
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="example.proto", package="tensorflow", syntax="proto3")

    def message(name, fields):
        m = file.message_type.add(name=name)
        for field_name, number, kind, repeated, type_name in fields:
            f = m.field.add(name=field_name, number=number, type=kind,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = type_name
        return m

    message("BytesList", [("value", 1, F.TYPE_BYTES, True, None)])
    message("FloatList", [("value", 1, F.TYPE_FLOAT, True, None)])
    message("Int64List", [("value", 1, F.TYPE_INT64, True, None)])
    feature = message("Feature", [("bytes_list", 1, F.TYPE_MESSAGE, False, ".tensorflow.BytesList"),
                                  ("float_list", 2, F.TYPE_MESSAGE, False, ".tensorflow.FloatList"),
                                  ("int64_list", 3, F.TYPE_MESSAGE, False, ".tensorflow.Int64List")])
    feature.oneof_decl.add(name="kind")
    for f in feature.field:
        f.oneof_index = 0
    features = message("Features", [("feature", 1, F.TYPE_MESSAGE, True, ".tensorflow.Features.FeatureEntry")])
    entry = features.nested_type.add(name="FeatureEntry")
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorflow.Feature")
    entry.options.map_entry = True
    message("Example", [("features", 1, F.TYPE_MESSAGE, False, ".tensorflow.Features")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("tensorflow.Example")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


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
