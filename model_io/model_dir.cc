#include "model_io/model_dir.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/strings.h"
#include "model/model_size.h"
#include "model_io/checksums.h"
#include "model_io/torch_pickle.h"

namespace xlnet {

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The sizes in config.json that decide how much a model built from it
// allocates (vocab_size, d_model, n_layer, n_head, d_head, d_inner), against
// the stored tensors that have them. Every disagreement in one error naming
// config.json and the keys.
absl::Status CheckConfigAgainstWeights(
    const XLNetConfig& c,
    const std::map<std::string, std::vector<int64_t>>& shapes,
    const std::string& config_path, const std::string& weights_path) {
  // A stored tensor named `name` with or without XLNetLMHeadModel's
  // "transformer." prefix: its stored name and shape.
  using Stored = std::pair<const std::string, std::vector<int64_t>>;
  const auto find = [&](const std::string& name) -> const Stored* {
    for (const std::string& stored : {"transformer." + name, name}) {
      auto it = shapes.find(stored);
      if (it != shapes.end()) return &*it;
    }
    return nullptr;
  };
  std::vector<std::string> problems;
  const auto expect = [&](const char* key, int64_t configured,
                          const Stored* tensor, size_t dim) {
    if (tensor == nullptr) return;
    const std::vector<int64_t>& shape = tensor->second;
    if (shape.size() > dim && shape[dim] != configured) {
      problems.push_back(absl::StrCat(key, " ", configured, " but ",
                                      tensor->first, " is ", ShapeText(shape)));
    }
  };
  const Stored* embedding = find("word_embedding.weight");
  expect("vocab_size", c.vocab_size, embedding, 0);
  expect("d_model", c.d_model, embedding, 1);
  std::set<int64_t> layers;
  for (const auto& [stored, shape] : shapes) {
    std::string name = stored;
    if (absl::StartsWith(name, "transformer.")) name = name.substr(12);
    int64_t index = 0;
    if (absl::StartsWith(name, "layer.") &&
        absl::SimpleAtoi(name.substr(6, name.find('.', 6) - 6), &index)) {
      layers.insert(index);
    }
  }
  // A file without any layer (a partial state dict) says nothing of n_layer;
  // the memory check still bounds what it asks for.
  if (!layers.empty() && static_cast<int64_t>(layers.size()) != c.n_layer) {
    problems.push_back(absl::StrCat("n_layer ", c.n_layer,
                                    " but the weights have ", layers.size(),
                                    " layers"));
  }
  const Stored* q = find("layer.0.rel_attn.q");
  expect("n_head", c.n_head, q, 1);
  expect("d_head", c.d_head, q, 2);
  expect("d_inner", c.d_inner, find("layer.0.ff.layer_1.weight"), 0);
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(config_path, ": ",
                                                 absl::StrJoin(problems, "; "),
                                                 " (in ", weights_path, ")"));
}

// Loading `bytes` of tensors must fit in the memory available now.
absl::Status CheckFitsInMemory(double bytes, const std::string& path) {
  const double available = static_cast<double>(AvailableMemoryBytes());
  if (bytes <= available) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      path, ": its tensors take ", HumanBytes(bytes), ", more than the ",
      HumanBytes(available), " of memory available"));
}

}  // namespace

absl::StatusOr<torch::Tensor> ModelDir::Tensor(const std::string& name) const {
  for (const auto& [stored, tensor] : tensors) {
    if (stored == name) return tensor;
  }
  return absl::NotFoundError(absl::StrCat(weights_path, ": no tensor ", name));
}

absl::Status VerifyModelDir(const std::string& dir) {
  if (!PathExists(absl::StrCat(dir, "/", kChecksumsFile))) {
    return absl::OkStatus();
  }
  return VerifyChecksums(dir);
}

namespace {

// ReadModelDirConfig, verifying DIR first unless the caller has.
absl::StatusOr<XLNetConfig> ReadConfigOf(const std::string& dir,
                                         Checksums checksums) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  const std::string path = absl::StrCat(dir, "/", kConfigFile);
  if (!PathExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a model directory (no ", kConfigFile, ")"));
  }
  if (checksums == Checksums::kVerify) {
    XLNET_RETURN_IF_ERROR(VerifyModelDir(dir));
  }
  XLNET_ASSIGN_OR_RETURN(XLNetConfig config, ReadModelConfigJson(path));
  XLNET_RETURN_IF_ERROR(Annotate(ValidateModelConfig(config), path));
  if (config.d_model != config.n_head * config.d_head) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": d_model ", config.d_model,
                     " != n_head * d_head = ", config.n_head * config.d_head));
  }
  // Whoever builds a model from this config allocates what it says: its
  // sizes against the stored shapes (the safetensors header only; a
  // pytorch_model.bin is checked by ReadModelDir once read) and against
  // memory, before anything is built.
  const std::string weights_path = absl::StrCat(dir, "/", kWeightsFile);
  if (PathExists(weights_path)) {
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file,
                           SafetensorsFile::Open(weights_path));
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const SafetensorsEntry& e : file.entries()) shapes[e.name] = e.shape;
    XLNET_RETURN_IF_ERROR(
        CheckConfigAgainstWeights(config, shapes, path, weights_path));
  }
  XLNET_RETURN_IF_ERROR(CheckModelFitsInMemory(config, path, ""));
  return config;
}

}  // namespace

absl::StatusOr<XLNetConfig> ReadModelDirConfig(const std::string& dir) {
  return ReadConfigOf(dir, Checksums::kVerify);
}

absl::StatusOr<ModelDir> ReadModelDir(const std::string& dir,
                                      Checksums checksums) {
  ModelDir out;
  out.path = dir;
  XLNET_ASSIGN_OR_RETURN(out.config, ReadConfigOf(dir, checksums));
  const std::string config_path = absl::StrCat(dir, "/", kConfigFile);
  XLNET_ASSIGN_OR_RETURN(const std::string text,
                         ReadFile(config_path, kMaxConfigFileBytes));
  out.config_json =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  out.weights_path = absl::StrCat(dir, "/", kWeightsFile);
  if (PathExists(out.weights_path)) {
    // ReadModelDirConfig checked config.json against this file's shapes.
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file,
                           SafetensorsFile::Open(out.weights_path));
    XLNET_RETURN_IF_ERROR(CheckFitsInMemory(
        static_cast<double>(file.data_bytes()), out.weights_path));
    XLNET_ASSIGN_OR_RETURN(out.tensors, file.LoadAll());
  } else if (PathExists(absl::StrCat(dir, "/", kTorchWeightsFile))) {
    out.weights_path = absl::StrCat(dir, "/", kTorchWeightsFile);
    XLNET_ASSIGN_OR_RETURN(out.tensors,
                           ReadTorchSaveStateDict(out.weights_path));
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const auto& [name, t] : out.tensors) {
      shapes[name] = t.sizes().vec();
    }
    XLNET_RETURN_IF_ERROR(CheckConfigAgainstWeights(
        out.config, shapes, config_path, out.weights_path));
  } else {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", kWeightsFile, " or ",
                                            kTorchWeightsFile, " beside ",
                                            kConfigFile));
  }
  return out;
}

absl::Status CopyWeightsFromDir(const std::string& dir,
                                const NamedTensors& tensors,
                                Checksums checksums) {
  XLNET_ASSIGN_OR_RETURN(ModelDir model_dir, ReadModelDir(dir, checksums));
  std::map<std::string, const torch::Tensor*> stored;
  for (const auto& [name, tensor] : model_dir.tensors) stored[name] = &tensor;
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_dir.weights_path, ": no tensor ", name));
    }
    const torch::Tensor& saved = *it->second;
    if (saved.sizes() != tensor.sizes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": ", name, " has shape ", c10::str(saved.sizes()),
                       " but the model has ", c10::str(tensor.sizes())));
    }
    tensor.copy_(saved);  // keeps the tensor's device and dtype
  }
  return absl::OkStatus();
}

absl::Status WriteModelDir(
    const std::string& dir, const std::string& config_json,
    const NamedTensors& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra,
    const AdoptFiles& adopt, int64_t* checksummed_bytes) {
  XLNET_ASSIGN_OR_RETURN(AtomicDirWriter writer, AtomicDirWriter::Begin(dir));
  XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(kConfigFile), config_json));
  XLNET_RETURN_IF_ERROR(
      WriteSafetensors(writer.Path(kWeightsFile), tensors, {{"format", "pt"}}));
  if (write_extra) XLNET_RETURN_IF_ERROR(write_extra(writer));
  // Last, over everything above: every reader verifies it.
  XLNET_ASSIGN_OR_RETURN(ChecksumEntries entries,
                         ComputeChecksums(writer.temp_dir()));
  if (checksummed_bytes != nullptr) {
    *checksummed_bytes = 0;
    for (const auto& [name, entry] : entries) {
      *checksummed_bytes += entry.bytes;
    }
  }
  if (adopt) {
    XLNET_ASSIGN_OR_RETURN(const ChecksumEntries adopted, adopt(writer));
    for (const auto& [name, entry] : adopted) {
      if (!entries.emplace(name, entry).second) {
        return absl::InternalError(absl::StrCat(
            writer.Path(name), ": adopted over a file written here"));
      }
    }
  }
  XLNET_RETURN_IF_ERROR(WriteChecksumsFile(writer.temp_dir(), entries));
  return writer.Commit();
}

absl::Status WriteModelDir(
    const std::string& dir, const XLNetConfig& config,
    const NamedTensors& tensors,
    const std::function<absl::Status(const AtomicDirWriter&)>& write_extra) {
  XLNET_RETURN_IF_ERROR(ValidateModelConfig(config));
  return WriteModelDir(dir, ModelConfigToJson(config), tensors, write_extra);
}

absl::StatusOr<std::optional<HfTokenizerConfig>> ReadTokenizerConfig(
    const std::string& dir) {
  HfTokenizerConfig out;
  out.path = absl::StrCat(dir, "/tokenizer_config.json");
  if (!PathExists(out.path)) return std::nullopt;
  XLNET_ASSIGN_OR_RETURN(const std::string text,
                         ReadFile(out.path, kMaxConfigFileBytes));
  XLNET_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(text, out.path));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(out.path, ": expected a JSON object"));
  }
  for (const auto& [key, value] :
       {std::pair<const char*, bool*>{"do_lower_case", &out.do_lower_case},
        {"keep_accents", &out.keep_accents}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(out.path, ": ", key, " must be true or false"));
    }
    *value = j[key].get<bool>();
  }
  if (j.contains("model_max_length") &&
      j["model_max_length"].is_number_integer()) {
    out.model_max_length = j["model_max_length"].get<int64_t>();
  }
  return out;
}

}  // namespace xlnet
