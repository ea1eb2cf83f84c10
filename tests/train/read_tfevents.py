#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, for tests.

Usage: read_tfevents.py FILE...  Prints one JSON list of events:
{"wall_time", "step", "file_version"} or {"wall_time", "step", "values":
[{"tag", "simple_value"} or {"tag", "plugin", "dtype", "text"}]}.

It checks both masked CRC-32Cs of every TFRecord (own bitwise CRC, not the
table the writer uses) and parses the messages with python3-protobuf,
defining Event/Summary/TensorProto from descriptors built here with
tensorboard's field numbers (tensorboard/compat/proto/event.proto,
summary.proto, tensor.proto, tensor_shape.proto). Exit status 1 with a
message on any framing or CRC error.
"""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def add(msg, name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name


def build_messages():
    fd = descriptor_pb2.FileDescriptorProto(
        name="xlnet_tb_test.proto", package="tbtest", syntax="proto3")
    dim = fd.message_type.add(name="Dim")
    add(dim, "size", 1, F.TYPE_INT64)
    shape = fd.message_type.add(name="TensorShapeProto")
    add(shape, "dim", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".tbtest.Dim")
    tensor = fd.message_type.add(name="TensorProto")
    add(tensor, "dtype", 1, F.TYPE_INT32)  # enum DataType; DT_STRING = 7
    add(tensor, "tensor_shape", 2, F.TYPE_MESSAGE,
        type_name=".tbtest.TensorShapeProto")
    add(tensor, "string_val", 8, F.TYPE_BYTES, F.LABEL_REPEATED)
    plugin = fd.message_type.add(name="PluginData")
    add(plugin, "plugin_name", 1, F.TYPE_STRING)
    meta = fd.message_type.add(name="SummaryMetadata")
    add(meta, "plugin_data", 1, F.TYPE_MESSAGE, type_name=".tbtest.PluginData")
    value = fd.message_type.add(name="Value")
    add(value, "tag", 1, F.TYPE_STRING)
    add(value, "simple_value", 2, F.TYPE_FLOAT)
    add(value, "tensor", 8, F.TYPE_MESSAGE, type_name=".tbtest.TensorProto")
    add(value, "metadata", 9, F.TYPE_MESSAGE,
        type_name=".tbtest.SummaryMetadata")
    summary = fd.message_type.add(name="Summary")
    add(summary, "value", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED,
        ".tbtest.Value")
    event = fd.message_type.add(name="Event")
    add(event, "wall_time", 1, F.TYPE_DOUBLE)
    add(event, "step", 2, F.TYPE_INT64)
    add(event, "file_version", 3, F.TYPE_STRING)
    add(event, "summary", 5, F.TYPE_MESSAGE, type_name=".tbtest.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tbtest.Event"))


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            sys.exit(f"{path}: truncated record header at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(header) != length_crc:
            sys.exit(f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        crc_bytes = data[pos + 12 + length:pos + 16 + length]
        if len(body) != length or len(crc_bytes) != 4:
            sys.exit(f"{path}: truncated record at byte {pos}")
        if masked(body) != struct.unpack("<I", crc_bytes)[0]:
            sys.exit(f"{path}: bad data CRC at byte {pos}")
        yield body
        pos += 16 + length


def main():
    event_class = build_messages()
    out = []
    for path in sys.argv[1:]:
        for body in records(path):
            e = event_class()
            e.ParseFromString(body)
            item = {"wall_time": e.wall_time, "step": e.step}
            if e.file_version:
                item["file_version"] = e.file_version
            if e.HasField("summary"):
                values = []
                for v in e.summary.value:
                    if v.HasField("tensor"):
                        values.append({
                            "tag": v.tag,
                            "plugin": v.metadata.plugin_data.plugin_name,
                            "dtype": v.tensor.dtype,
                            "shape": [d.size for d in v.tensor.tensor_shape.dim],
                            "text": [s.decode() for s in v.tensor.string_val],
                        })
                    else:
                        values.append({"tag": v.tag,
                                       "simple_value": v.simple_value})
                item["values"] = values
            out.append(item)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
