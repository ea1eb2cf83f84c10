#include "data_pipeline/protobuf_wire.h"

#include "absl/strings/str_cat.h"

namespace xlnet::data {

bool ReadVarint(const std::string& bytes, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < bytes.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(bytes[(*pos)++]);
    *value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void WriteVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

absl::StatusOr<std::vector<WireField>> MessageFields(
    const std::string& bytes, const std::string& source) {
  std::vector<WireField> fields;
  size_t pos = 0;
  while (pos < bytes.size()) {
    WireField f;
    f.begin = pos;
    uint64_t tag = 0;
    bool ok = ReadVarint(bytes, &pos, &tag);
    f.number = tag >> 3;
    f.wire_type = static_cast<int>(tag & 7);
    uint64_t n = 0;
    switch (f.wire_type) {
      case 0:  // varint
        ok = ok && ReadVarint(bytes, &pos, &f.varint);
        break;
      case 1:  // fixed64
        ok = ok && bytes.size() - pos >= 8;
        f.payload = pos;
        pos += ok ? 8 : 0;
        break;
      case 2:  // length-delimited
        ok = ok && ReadVarint(bytes, &pos, &n) && n <= bytes.size() - pos;
        f.payload = pos;
        pos += ok ? n : 0;
        break;
      case 5:  // fixed32
        ok = ok && bytes.size() - pos >= 4;
        f.payload = pos;
        pos += ok ? 4 : 0;
        break;
      default:
        ok = false;
    }
    if (!ok || f.number == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": not a SentencePiece model (malformed protobuf at byte ",
          f.begin, ")"));
    }
    f.end = pos;
    fields.push_back(f);
  }
  return fields;
}

}  // namespace xlnet::data
