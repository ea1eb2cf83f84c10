// The protobuf wire format, as far as reading and editing a SentencePiece
// ModelProto (spiece.model) needs: its fields, without a protobuf library.
// Written here because SentencePiece's own protobuf-lite lives only inside
// the privately loaded bridge module (sentencepiece_bridge.h), and LibTorch's
// libprotobuf is not ours to link against; the subset is small (varints,
// fixed32/64, length-delimited fields; groups refused).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xlnet::data {

// One field of a serialized message: bytes [begin, end) hold its tag and
// value; for a length-delimited field, [payload, end) the value.
struct WireField {
  uint64_t number = 0;
  // The wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
  int wire_type = 0;
  // A varint field's value.
  uint64_t varint = 0;
  size_t begin = 0;
  size_t payload = 0;
  size_t end = 0;
};

// Reads a varint at `*pos`, advancing it; false when the bytes end first or
// it is longer than 10 bytes.
bool ReadVarint(const std::string& bytes, size_t* pos, uint64_t* value);

// Appends `value` as a varint.
void WriteVarint(uint64_t value, std::string* out);

// The fields of the message `bytes` (at top level: a nested message is one
// length-delimited field, whose payload can be parsed the same way). A
// malformed message is InvalidArgument naming `source` and the byte.
absl::StatusOr<std::vector<WireField>> MessageFields(const std::string& bytes,
                                                     const std::string& source);

}  // namespace xlnet::data
