// Our own safetensors reader and writer (the format HuggingFace uses for
// model.safetensors): an 8-byte little-endian header length N, N bytes of
// JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {str: str}}, then the tensor bytes.
//
// Reading is memory-mapped and validates everything before any tensor is
// touched: the header length against the file size, the JSON, each dtype,
// shape and byte count, offsets in range, no overlaps and no holes. A bad
// file gives an error naming the file and the problem, never a crash or a
// huge allocation. Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8,
// U8, BOOL.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace xlnet {

class MappedFile;

// Tensors by name, in order: a state dict, the contents of a tensor file.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// One tensor's header entry.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;           // "F32", "BF16", ...
  std::vector<int64_t> shape;  // may be empty (a scalar)
  uint64_t begin = 0;          // offsets into the data section
  uint64_t end = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // Entries in file order (sorted by offset).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }
  bool Contains(const std::string& name) const;
  const SafetensorsEntry* Find(const std::string& name) const;
  // A copy of tensor `name` as a contiguous CPU tensor of its stored dtype.
  absl::StatusOr<torch::Tensor> Load(const std::string& name) const;
  // All tensors, in file order.
  absl::StatusOr<NamedTensors> LoadAll() const;
  // Total bytes of tensor data.
  uint64_t data_bytes() const;

 private:
  std::string path_;
  std::shared_ptr<const MappedFile> mapping_;
  uint64_t data_offset_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses only the header of a safetensors file held in memory (for tests and
// tools). `data_size` is the number of bytes after the header.
absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(
    const std::string& header_json, uint64_t data_size,
    const std::string& source, std::map<std::string, std::string>* metadata);

// Writes tensors (any device/layout; copied to contiguous CPU) atomically.
// Names must be unique and non-empty.
absl::Status WriteSafetensors(
    const std::string& path, const NamedTensors& tensors,
    const std::map<std::string, std::string>& metadata = {});

// Mapping between safetensors dtype names and torch dtypes.
absl::StatusOr<torch::ScalarType> SafetensorsDtypeToTorch(
    const std::string& dtype);
absl::StatusOr<std::string> TorchDtypeToSafetensors(torch::ScalarType dtype);
// Bytes per element of a safetensors dtype, 0 if unknown.
int SafetensorsDtypeSize(const std::string& dtype);

}  // namespace xlnet
