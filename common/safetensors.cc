#include "common/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/mapped_file.h"
#include "common/status.h"

namespace xlnet {
namespace {

using Json = nlohmann::json;

// The format's own cap on header size; keeps a corrupt length from
// triggering a huge parse.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  int size;
};

const DtypeInfo kDtypes[] = {
    {"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4},
    {"F16", torch::kFloat16, 2}, {"BF16", torch::kBFloat16, 2},
    {"I64", torch::kInt64, 8},   {"I32", torch::kInt32, 4},
    {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},
    {"U8", torch::kUInt8, 1},    {"BOOL", torch::kBool, 1},
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

}  // namespace

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int SafetensorsDtypeSize(const std::string& dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.size;
  }
  return 0;
}

absl::StatusOr<torch::ScalarType> SafetensorsDtypeToTorch(
    const std::string& dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported safetensors dtype '", dtype, "'"));
}

absl::StatusOr<std::string> TorchDtypeToSafetensors(torch::ScalarType dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.type) return std::string(d.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "torch dtype ", c10::toString(dtype), " has no safetensors equivalent"));
}

absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(
    const std::string& header_json, uint64_t data_size,
    const std::string& source, std::map<std::string, std::string>* metadata) {
  // Duplicate tensor names are refused: readers disagree on which wins.
  XLNET_ASSIGN_OR_RETURN(Json root,
                         ParseJson(header_json, absl::StrCat(source, ": header")));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": header is not a JSON object"));
  }
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": __metadata__ must be an object"));
      }
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ": __metadata__ value of '", k, "' is not a string"));
        }
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = absl::StrCat(source, ": tensor '", name, "'");
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": empty tensor name"));
    }
    if (!value.is_object() || !value.contains("dtype") ||
        !value.contains("shape") || !value.contains("data_offsets")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": entry needs dtype, shape and data_offsets"));
    }
    SafetensorsEntry entry;
    entry.name = name;
    if (!value["dtype"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dtype is not a string"));
    }
    entry.dtype = value["dtype"].get<std::string>();
    const int elem = SafetensorsDtypeSize(entry.dtype);
    if (elem == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unsupported dtype '", entry.dtype, "'"));
    }
    const Json& shape = value["shape"];
    if (!shape.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": shape is not a list"));
    }
    // numel with overflow checks: every dimension and the product must fit.
    uint64_t numel = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned() &&
          !(d.is_number_integer() && d.get<int64_t>() >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": shape has a non-integer or negative dimension ",
            d.dump()));
      }
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (1ull << 62) || (dim != 0 && numel > (1ull << 62) / dim)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": shape too large"));
      }
      numel *= dim;
      entry.shape.push_back(static_cast<int64_t>(dim));
    }
    const Json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": data_offsets must be two non-negative integers"));
    }
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    if (entry.begin > entry.end || entry.end > data_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": data_offsets [", entry.begin, ", ", entry.end,
                       "] outside the data section of ", data_size, " bytes"));
    }
    if (numel > (1ull << 62) / static_cast<uint64_t>(elem) ||
        numel * elem != entry.end - entry.begin) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", entry.dtype, " ", ShapeString(entry.shape),
                       " needs ", numel * elem, " bytes but data_offsets span ",
                       entry.end - entry.begin));
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t cursor = 0;
  for (const auto& e : entries) {
    if (e.begin < cursor) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": tensor '", e.name, "' overlaps the previous tensor (",
          "starts at ", e.begin, ", previous ends at ", cursor, ")"));
    }
    if (e.begin > cursor) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": unused bytes [", cursor, ", ", e.begin,
                       ") before tensor '", e.name, "'"));
    }
    cursor = e.end;
  }
  if (cursor != data_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", data_size - cursor,
        " bytes after the last tensor are not described by the header"));
  }
  return entries;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  XLNET_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping,
                         MappedFile::Open(path));
  const uint64_t size = mapping->size();
  if (size < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated safetensors file (", size,
                     " bytes; the 8-byte header length alone is missing)"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | mapping->bytes()[i];
  if (header_len > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": header length ", header_len, " exceeds the 100 MiB limit"));
  }
  if (header_len > size - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated file: header length ", header_len,
                     " runs past the end of the file (", size, " bytes)"));
  }
  const std::string header(reinterpret_cast<const char*>(mapping->bytes() + 8),
                           header_len);
  SafetensorsFile file;
  file.path_ = path;
  file.data_offset_ = 8 + header_len;
  XLNET_ASSIGN_OR_RETURN(
      file.entries_, ParseSafetensorsHeader(header, size - file.data_offset_,
                                            path, &file.metadata_));
  for (size_t i = 0; i < file.entries_.size(); ++i) {
    file.index_[file.entries_[i].name] = i;
  }
  file.mapping_ = std::move(mapping);
  return file;
}

bool SafetensorsFile::Contains(const std::string& name) const {
  return index_.count(name) > 0;
}

const SafetensorsEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

absl::StatusOr<torch::Tensor> SafetensorsFile::Load(
    const std::string& name) const {
  const SafetensorsEntry* entry = Find(name);
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path_, ": no tensor named '", name, "'"));
  }
  XLNET_ASSIGN_OR_RETURN(torch::ScalarType type,
                         SafetensorsDtypeToTorch(entry->dtype));
  torch::Tensor out =
      torch::empty(entry->shape, torch::TensorOptions().dtype(type));
  const size_t bytes = entry->end - entry->begin;
  if (bytes > 0) {
    std::memcpy(out.data_ptr(), mapping_->bytes() + data_offset_ + entry->begin,
                bytes);
  }
  if (type == torch::kBool) {
    // Bytes other than 0/1 are not valid bools; normalise instead of UB.
    out = out.view(torch::kUInt8).ne(0);
  }
  return out;
}

absl::StatusOr<NamedTensors> SafetensorsFile::LoadAll() const {
  NamedTensors out;
  for (const auto& e : entries_) {
    XLNET_ASSIGN_OR_RETURN(torch::Tensor t, Load(e.name));
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

uint64_t SafetensorsFile::data_bytes() const {
  return entries_.empty() ? 0 : entries_.back().end;
}

absl::Status WriteSafetensors(
    const std::string& path, const NamedTensors& tensors,
    const std::map<std::string, std::string>& metadata) {
  // The header lists tensors in data order. It is assembled entry by entry:
  // an ordered_json object looks each name up linearly, O(n^2) for n
  // tensors; names are checked for repeats in a set instead.
  std::string header_text = "{";
  if (!metadata.empty()) {
    header_text += "\"__metadata__\":" + Json(metadata).dump();
  }
  std::set<std::string> names;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": invalid tensor name '", name, "'"));
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": duplicate tensor name '", name, "'"));
    }
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", name, "' is undefined"));
    }
    XLNET_ASSIGN_OR_RETURN(std::string dtype,
                           TorchDtypeToSafetensors(tensor.scalar_type()));
    torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes =
        static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    const nlohmann::ordered_json entry = {
        {"dtype", dtype},
        {"shape", cpu.sizes().vec()},
        {"data_offsets", {offset, offset + bytes}}};
    if (header_text.size() > 1) header_text += ",";
    header_text += Json(name).dump() + ":" + entry.dump();
    offset += bytes;
    data.push_back(std::move(cpu));
  }
  header_text += "}";
  // Pad with spaces so the data section starts 8-byte aligned.
  while ((8 + header_text.size()) % 8 != 0) header_text.push_back(' ');
  return WriteFileAtomicWith(path, [&](int fd, const std::string& tmp) {
    uint8_t len[8];
    uint64_t n = header_text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    XLNET_RETURN_IF_ERROR(WriteAll(fd, len, 8, tmp));
    XLNET_RETURN_IF_ERROR(
        WriteAll(fd, header_text.data(), header_text.size(), tmp));
    for (const auto& t : data) {
      XLNET_RETURN_IF_ERROR(
          WriteAll(fd, t.data_ptr(), t.numel() * t.element_size(), tmp));
    }
    return absl::OkStatus();
  });
}

}  // namespace xlnet
