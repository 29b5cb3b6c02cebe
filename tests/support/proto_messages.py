"""Protobuf message classes declared at run time, without protoc, for the tests that read or
write TensorFlow's formats with the protobuf library (python3-protobuf).

    d = Declarations("tensorflow")
    d.message("Int64List", [("value", 1, "int64", True)])
    (Int64List,) = d.classes("Int64List")

A field is (name, number, type, repeated): type is a scalar type's name ("double", "float",
"int32", "int64", "string", "bytes") or the name of a message declared in the same package
("Features", "Features.FeatureEntry"). Repeated numbers are packed, as proto3 packs them.
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {"double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int32": F.TYPE_INT32,
           "int64": F.TYPE_INT64, "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES}


class Declarations:
    def __init__(self, package):
        self.package = package
        self.file = descriptor_pb2.FileDescriptorProto(name=package + ".proto", package=package,
                                                       syntax="proto3")

    def message(self, name, fields, parent=None):
        """Declares message `name` (nested in `parent`, a message this returned, if given)."""
        m = (parent.nested_type if parent is not None else self.file.message_type).add(name=name)
        for field_name, number, kind, repeated in fields:
            f = m.field.add(name=field_name, number=number,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if kind in SCALARS:
                f.type = SCALARS[kind]
            else:
                f.type = F.TYPE_MESSAGE
                f.type_name = f".{self.package}.{kind}"
        return m

    def classes(self, *names):
        """The message classes of `names`, once every message is declared."""
        pool = descriptor_pool.DescriptorPool()
        pool.Add(self.file)
        found = []
        for name in names:
            descriptor = pool.FindMessageTypeByName(f"{self.package}.{name}")
            if hasattr(message_factory, "GetMessageClass"):
                found.append(message_factory.GetMessageClass(descriptor))
            else:
                found.append(message_factory.MessageFactory(pool).GetPrototype(descriptor))
        return found
