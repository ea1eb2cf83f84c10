// TensorBoard event files, written by hand.
//
// Why our own code: the format is TFRecord framing around protobuf
// messages. Debian's libprotobuf is deliberately not a dependency (it would
// need protoc and TensorBoard's .proto files for three small messages), so
// the few fields we write are encoded here directly (varints,
// length-delimited fields, fixed64/fixed32). CRC-32C is a 20-line table
// loop; no CRC-32C library is among the project's installed dependencies.
//
// Field numbers, from tensorboard/compat/proto/ (same as TensorFlow's
// core/util/event.proto and core/framework/{summary,tensor}.proto):
//   Event:           double wall_time = 1; int64 step = 2;
//                    string file_version = 3; Summary summary = 5;
//   Summary:         repeated Value value = 1;
//   Summary.Value:   string tag = 1; float simple_value = 2;
//                    TensorProto tensor = 8; SummaryMetadata metadata = 9;
//   SummaryMetadata: PluginData plugin_data = 1;
//   PluginData:      string plugin_name = 1;
//   TensorProto:     DataType dtype = 1 (DT_STRING = 7);
//                    TensorShapeProto tensor_shape = 2;
//                    repeated bytes string_val = 8;
//   TensorShapeProto: repeated Dim dim = 2;  Dim: int64 size = 1;
#include "train/tb_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace xlnet {
namespace {

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
// Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void PutTag(std::string* out, int field, int wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}
void PutBytes(std::string* out, int field, std::string_view bytes) {
  PutTag(out, field, 2);
  PutVarint(out, bytes.size());
  out->append(bytes);
}
void PutDouble(std::string* out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutTag(out, field, 1);
  PutFixed64(out, bits);
}

std::string EventHeader(double wall_time, int64_t step) {
  std::string event;
  PutDouble(&event, 1, wall_time);
  if (step != 0) {
    PutTag(&event, 2, 0);
    PutVarint(&event, static_cast<uint64_t>(step));
  }
  return event;
}

std::string SummaryEvent(double wall_time, int64_t step,
                         const std::string& value) {
  std::string summary;
  PutBytes(&summary, 1, value);
  std::string event = EventHeader(wall_time, step);
  PutBytes(&event, 5, summary);
  return event;
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : data) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t MaskedCrc32c(std::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string TfRecord(std::string_view data) {
  std::string length;
  PutFixed64(&length, data.size());
  std::string record = length;
  PutFixed32(&record, MaskedCrc32c(length));
  record.append(data);
  PutFixed32(&record, MaskedCrc32c(data));
  return record;
}

std::string FileVersionEvent(double wall_time) {
  std::string event = EventHeader(wall_time, 0);
  PutBytes(&event, 3, "brain.Event:2");
  return event;
}

std::string ScalarEvent(double wall_time, int64_t step, std::string_view tag,
                        float value) {
  std::string v;
  PutBytes(&v, 1, tag);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  PutTag(&v, 2, 5);
  PutFixed32(&v, bits);
  return SummaryEvent(wall_time, step, v);
}

std::string TextEvent(double wall_time, int64_t step, std::string_view tag,
                      std::string_view text) {
  std::string dim;
  PutTag(&dim, 1, 0);
  PutVarint(&dim, 1);
  std::string shape;
  PutBytes(&shape, 2, dim);
  std::string tensor;
  PutTag(&tensor, 1, 0);
  PutVarint(&tensor, 7);  // DT_STRING
  PutBytes(&tensor, 2, shape);
  PutBytes(&tensor, 8, text);
  std::string plugin;
  PutBytes(&plugin, 1, "text");
  std::string metadata;
  PutBytes(&metadata, 1, plugin);
  std::string v;
  PutBytes(&v, 1, tag);
  PutBytes(&v, 8, tensor);
  PutBytes(&v, 9, metadata);
  return SummaryEvent(wall_time, step, v);
}

absl::StatusOr<std::unique_ptr<TbWriter>> TbWriter::Open(
    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  int64_t t = static_cast<int64_t>(Now());
  std::string path;
  std::FILE* file = nullptr;
  // "x": never open an existing file (a resume in the same second).
  for (int i = 0; i < 100 && !file; ++i, ++t) {
    path = absl::StrCat(dir, "/events.out.tfevents.", t, ".", host);
    file = std::fopen(path.c_str(), "wbx");
    if (!file && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
    }
  }
  if (!file) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir, ": no free events file name"));
  }
  std::unique_ptr<TbWriter> writer(new TbWriter(path, file));
  if (absl::Status s = writer->Write(FileVersionEvent(Now())); !s.ok()) {
    return s;
  }
  return writer;
}

TbWriter::~TbWriter() { std::fclose(file_); }

absl::Status TbWriter::Write(const std::string& event) {
  const std::string record = TfRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": write failed"));
  }
  return absl::OkStatus();
}

absl::Status TbWriter::Scalar(int64_t step, std::string_view tag,
                              double value) {
  return Write(ScalarEvent(Now(), step, tag, static_cast<float>(value)));
}

absl::Status TbWriter::Text(int64_t step, std::string_view tag,
                            std::string_view text) {
  return Write(TextEvent(Now(), step, tag, text));
}

}  // namespace xlnet
