#include "model_io/rank_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "model_io/state_json.h"

namespace xlnet {
namespace {

constexpr char kRankManifestKind[] = "rank_manifest";
constexpr int kRankManifestVersion = 1;
constexpr char kStagingPrefix[] = ".staging_step_";

std::string RankManifestFile(int rank) {
  return absl::StrCat(".rank", rank, ".manifest.json");
}

// The parts of STEM.rankR.EXT: stem and rank (nullopt when not per-rank).
std::optional<std::pair<std::string, int>> SplitRankFile(
    const std::string& name) {
  const size_t at = name.rfind(".rank");
  if (at == std::string::npos || at == 0) return std::nullopt;
  const size_t end = name.find('.', at + 5);
  if (end == std::string::npos || end == at + 5) return std::nullopt;
  const std::string digits = name.substr(at + 5, end - at - 5);
  int rank = 0;
  if (digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &rank)) {
    return std::nullopt;
  }
  return std::make_pair(name.substr(0, at) + name.substr(end), rank);
}

}  // namespace

std::string RankFileName(const std::string& stem, int rank) {
  return absl::StrCat(stem, ".rank", rank, ".safetensors");
}

std::optional<int> RankOfFile(const std::string& name) {
  const auto parts = SplitRankFile(name);
  if (!parts) return std::nullopt;
  return parts->second;
}

std::set<std::string> FilesRankLoads(const std::vector<std::string>& listed,
                                     int rank) {
  // Stem (the name without its rank) -> rank 0's and this rank's file.
  std::map<std::string, std::pair<std::string, std::string>> by_stem;
  for (const std::string& name : listed) {
    const auto parts = SplitRankFile(name);
    if (!parts) continue;
    auto& [rank0, own] = by_stem[parts->first];
    if (parts->second == 0) rank0 = name;
    if (parts->second == rank) own = name;
  }
  std::set<std::string> out;
  for (const auto& [stem, files] : by_stem) {
    const std::string& chosen =
        files.second.empty() ? files.first : files.second;
    if (!chosen.empty()) out.insert(chosen);
  }
  return out;
}

std::string StagingDir(const std::string& checkpoints_dir, int64_t step) {
  return absl::StrCat(checkpoints_dir, "/", kStagingPrefix, step);
}

absl::Status RemoveStagingDirs(const std::string& checkpoints_dir) {
  DIR* d = ::opendir(checkpoints_dir.c_str());
  if (d == nullptr) return absl::OkStatus();  // no checkpoints yet
  std::vector<std::string> stale;
  while (struct dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name.rfind(kStagingPrefix, 0) == 0) stale.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : stale) {
    XLNET_RETURN_IF_ERROR(RemoveAll(checkpoints_dir + "/" + name));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> WriteRankFiles(
    const std::string& staging, int64_t step, int world_size, int rank,
    const std::map<std::string, NamedTensors>& files) {
  XLNET_RETURN_IF_ERROR(MakeDirs(staging));
  nlohmann::json entries = nlohmann::json::object();
  int64_t checksummed = 0;
  for (const auto& [name, tensors] : files) {
    if (RankOfFile(name) != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": not a per-rank file name of rank ", rank, " (",
                       RankFileName("STEM", rank), ")"));
    }
    const std::string path = staging + "/" + name;
    XLNET_RETURN_IF_ERROR(WriteSafetensors(path, tensors));
    // From the fresh file (still in the page cache): what rank 0 commits is
    // what this rank's disk holds.
    XLNET_ASSIGN_OR_RETURN(const uint32_t crc, FileCrc32(path));
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::InternalError(absl::StrCat(path, ": cannot stat"));
    }
    entries[name] = {{"crc32", crc},
                     {"bytes", static_cast<int64_t>(st.st_size)}};
    checksummed += st.st_size;
  }
  // Last: its presence says every file above is complete.
  XLNET_RETURN_IF_ERROR(WriteStateJson(staging + "/" + RankManifestFile(rank),
                                       kRankManifestKind, kRankManifestVersion,
                                       {{"step", step},
                                        {"world_size", world_size},
                                        {"rank", rank},
                                        {"files", entries}}));
  return checksummed;
}

absl::StatusOr<ChecksumEntries> MergeRankManifests(const std::string& staging,
                                                   int64_t step,
                                                   int world_size) {
  ChecksumEntries merged;
  std::vector<std::string> problems;
  std::vector<int> missing;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string path = staging + "/" + RankManifestFile(rank);
    if (!PathExists(path)) {
      missing.push_back(rank);
      continue;
    }
    absl::StatusOr<nlohmann::json> manifest =
        ReadStateJson(path, kRankManifestKind, kRankManifestVersion);
    if (!manifest.ok()) {
      problems.push_back(std::string(manifest.status().message()));
      continue;
    }
    const nlohmann::json& m = *manifest;
    const auto integer = [&](const char* key) -> int64_t {
      return m.contains(key) && m[key].is_number_integer()
                 ? m[key].get<int64_t>()
                 : -1;
    };
    if (integer("step") != step || integer("world_size") != world_size ||
        integer("rank") != rank || !m.contains("files") ||
        !m["files"].is_object()) {
      problems.push_back(absl::StrCat(
          path, ": not rank ", rank, "'s manifest of step ", step, " at ",
          world_size, " ranks (it says step ", integer("step"), ", world size ",
          integer("world_size"), ", rank ", integer("rank"), ")"));
      continue;
    }
    for (const auto& [name, entry] : m["files"].items()) {
      const std::string file = staging + "/" + name;
      if (RankOfFile(name) != rank || name.find('/') != std::string::npos) {
        problems.push_back(
            absl::StrCat(path, ": '", name, "' is not a file of rank ", rank));
        continue;
      }
      absl::StatusOr<int64_t> bytes =
          entry.contains("bytes")
              ? JsonInteger(entry["bytes"], file + ": bytes", 0, INT64_MAX)
              : absl::StatusOr<int64_t>(
                    absl::DataLossError(file + ": no bytes"));
      absl::StatusOr<int64_t> crc =
          entry.contains("crc32")
              ? JsonInteger(entry["crc32"], file + ": crc32", 0, UINT32_MAX)
              : absl::StatusOr<int64_t>(
                    absl::DataLossError(file + ": no crc32"));
      struct stat st;
      if (!bytes.ok() || !crc.ok()) {
        problems.push_back(std::string(
            (!bytes.ok() ? bytes.status() : crc.status()).message()));
      } else if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        problems.push_back(absl::StrCat(file, ": missing (listed by rank ",
                                        rank, "'s manifest)"));
      } else if (st.st_size != *bytes) {
        problems.push_back(absl::StrCat(file, ": ", st.st_size,
                                        " bytes but rank ", rank,
                                        "'s manifest lists ", *bytes));
      } else {
        merged[name] = {static_cast<uint32_t>(*crc), *bytes};
      }
    }
  }
  if (!missing.empty()) {
    problems.insert(
        problems.begin(),
        absl::StrCat("no manifest from rank(s) ", absl::StrJoin(missing, ", "),
                     " of ", world_size, " in ", staging));
  }
  if (problems.empty()) return merged;
  return absl::DataLossError(
      absl::StrCat("checkpoint step_", step, " is incomplete: ",
                   absl::StrJoin(problems, "; "), "; nothing was committed"));
}

}  // namespace xlnet
