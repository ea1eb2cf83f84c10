// TensorBoard event files (RUN/tb/events.out.tfevents.<time>.<host>):
// scalars and the run's config as text, readable by TensorBoard without
// TensorFlow. Each event is flushed as soon as it is written, so a killed
// run keeps everything logged so far.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet {

// CRC-32C (Castagnoli) of `data`, and TFRecord's masked form of it.
uint32_t Crc32c(std::string_view data);
uint32_t MaskedCrc32c(std::string_view data);

// One TFRecord: uint64 length, masked CRC of the length, data, masked CRC
// of the data (little-endian).
std::string TfRecord(std::string_view data);

// Serialized tensorboard.Event messages (wire format, field numbers in
// tb_writer.cc).
std::string FileVersionEvent(double wall_time);
std::string ScalarEvent(double wall_time, int64_t step, std::string_view tag,
                        float value);
std::string TextEvent(double wall_time, int64_t step, std::string_view tag,
                      std::string_view text);

class TbWriter {
 public:
  // Creates DIR (and parents) and a new events file in it named
  // events.out.tfevents.<unix_time>.<hostname>; never reuses an existing
  // file (a resumed run gets a new one; TensorBoard merges them). Writes
  // the file_version event.
  static absl::StatusOr<std::unique_ptr<TbWriter>> Open(const std::string& dir);
  ~TbWriter();
  TbWriter(const TbWriter&) = delete;
  TbWriter& operator=(const TbWriter&) = delete;

  absl::Status Scalar(int64_t step, std::string_view tag, double value);
  absl::Status Text(int64_t step, std::string_view tag, std::string_view text);
  const std::string& path() const { return path_; }

 private:
  TbWriter(std::string path, std::FILE* file) : path_(path), file_(file) {}
  absl::Status Write(const std::string& event);

  std::string path_;
  std::FILE* file_;
};

}  // namespace xlnet
