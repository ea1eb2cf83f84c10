#include "model_io/inspect.h"

#include <dirent.h>

#include <algorithm>
#include <iomanip>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "common/strings.h"
#include "config/config.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/model_dir.h"

namespace xlnet {

absl::Status InspectSafetensors(const std::string& path, std::ostream& out) {
  XLNET_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  size_t name_width = 4;
  for (const auto& e : file.entries())
    name_width = std::max(name_width, e.name.size());
  out << std::left << std::setw(name_width + 2) << "name" << std::setw(7)
      << "dtype" << std::setw(22) << "shape"
      << "bytes\n";
  int64_t total_elems = 0;
  for (const auto& e : file.entries()) {
    out << std::left << std::setw(name_width + 2) << e.name << std::setw(7)
        << e.dtype << std::setw(22)
        << absl::StrCat("[", absl::StrJoin(e.shape, ", "), "]")
        << HumanBytes(static_cast<double>(e.end - e.begin)) << "\n";
    total_elems += e.numel();
  }
  out << file.entries().size() << " tensors, " << WithCommas(total_elems)
      << " elements, " << HumanBytes(static_cast<double>(file.data_bytes()))
      << "\n";
  for (const auto& [k, v] : file.metadata()) {
    out << "metadata " << k << " = " << v << "\n";
  }
  return absl::OkStatus();
}

absl::Status InspectModelDir(const std::string& dir, std::ostream& out) {
  const std::string config_path = dir + "/config.json";
  if (!PathExists(config_path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a model directory (no config.json)"));
  }
  // As every reader of a model directory: a damaged one is an error naming
  // the file, not a description of what is left.
  XLNET_RETURN_IF_ERROR(VerifyModelDir(dir));
  XLNET_ASSIGN_OR_RETURN(XLNetConfig c, ReadModelConfigJson(config_path));
  out << "model directory " << dir << "\n";
  out << "  "
      << (PathExists(absl::StrCat(dir, "/", kChecksumsFile))
              ? absl::StrCat(kChecksumsFile, ": every file verified")
              : absl::StrCat("no ", kChecksumsFile, " (not verified)"))
      << "\n";
  out << "  architectures  " << absl::StrJoin(c.architectures, ", ") << "\n";
  out << "  layers " << c.n_layer << ", d_model " << c.d_model << ", heads "
      << c.n_head << " x " << c.d_head << ", d_inner " << c.d_inner << " ("
      << c.ff_activation << "), vocab " << c.vocab_size << "\n";
  out << "  attn_type " << c.attn_type << ", bi_data "
      << (c.bi_data ? "true" : "false") << ", clamp_len " << c.clamp_len
      << ", mem_len "
      << (c.mem_len ? std::to_string(*c.mem_len) : std::string("null"))
      << ", untie_r " << (c.untie_r ? "true" : "false") << "\n";
  const std::string weights = dir + "/model.safetensors";
  if (PathExists(weights)) {
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file,
                           SafetensorsFile::Open(weights));
    int64_t params = 0;
    for (const auto& e : file.entries()) params += e.numel();
    out << "  parameters " << WithCommas(params) << " in "
        << file.entries().size() << " tensors ("
        << HumanBytes(static_cast<double>(file.data_bytes())) << ", "
        << (file.entries().empty() ? "-" : file.entries().front().dtype)
        << ")\n";
  } else {
    out << "  no model.safetensors\n";
  }
  std::vector<std::string> others;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name[0] != '.' && name != "config.json" &&
          name != "model.safetensors") {
        others.push_back(name);
      }
    }
    ::closedir(d);
  }
  std::sort(others.begin(), others.end());
  if (!others.empty())
    out << "  other files: " << absl::StrJoin(others, ", ") << "\n";
  return absl::OkStatus();
}

absl::Status InspectConfig(const std::string& path,
                           const std::vector<std::string>& overrides,
                           std::ostream& out) {
  XLNET_ASSIGN_OR_RETURN(Config config, LoadConfig(path, overrides));
  out << "# resolved config from " << path << "\n" << ConfigToYaml(config);
  return absl::OkStatus();
}

absl::Status InspectPath(const std::string& path,
                         const std::vector<std::string>& overrides,
                         std::ostream& out) {
  if (IsDirectory(path)) return InspectModelDir(path, out);
  if (absl::EndsWith(path, ".yaml") || absl::EndsWith(path, ".yml")) {
    return InspectConfig(path, overrides, out);
  }
  if (absl::EndsWith(path, ".safetensors"))
    return InspectSafetensors(path, out);
  if (absl::EndsWith(path, ".json")) {
    XLNET_ASSIGN_OR_RETURN(XLNetConfig c, ReadModelConfigJson(path));
    out << ModelConfigToJson(c);
    return absl::OkStatus();
  }
  if (!PathExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such file or directory"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path,
      ": don't know how to inspect this (expected a .safetensors file, "
      "a model directory, a .yaml config or a config.json)"));
}

}  // namespace xlnet
