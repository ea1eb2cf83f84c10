#include "data_pipeline/shard_combine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/mapped_file.h"
#include "common/status.h"
#include "common/strings.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {
namespace {

// (task, num_tasks) of a directory name "part-TTTTT-of-NNNNN", if it is one.
std::optional<std::pair<int, int>> ParsePartName(const std::string& name) {
  int task = 0, num_tasks = 0, used = 0;
  if (std::sscanf(name.c_str(), "part-%d-of-%d%n", &task, &num_tasks, &used) !=
          2 ||
      used != static_cast<int>(name.size()) || num_tasks < 2 || task < 0 ||
      task >= num_tasks || PartDirName(task, num_tasks) != name) {
    return std::nullopt;
  }
  return std::make_pair(task, num_tasks);
}

// What must agree between parts, as text for the error message.
std::string Options(const ShardManifest& m) {
  return absl::StrCat(
      "uncased=", m.rules.uncased, " keep_accents=", m.rules.keep_accents,
      " use_eod=", m.use_eod, " max_line_bytes=", m.max_line_bytes,
      " json_key=", m.json_key, " shard_bytes=", m.shard_bytes);
}

bool SameInputs(const ShardManifest& a, const ShardManifest& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (a.inputs[i].path != b.inputs[i].path ||
        a.inputs[i].bytes != b.inputs[i].bytes) {
      return false;
    }
  }
  return true;
}

// Puts `src` at `dst` (replacing it) through a temporary name: a hard link,
// or a copy where links do not work.
absl::Status LinkOrCopy(const std::string& src, const std::string& dst) {
  // A hidden `.NAME.tmp-*` name: CleanStaleTemps removes a leftover.
  const size_t slash = dst.rfind('/');
  const std::string tmp =
      dst.substr(0, slash + 1) + "." + dst.substr(slash + 1) + ".tmp-combine";
  ::unlink(tmp.c_str());
  if (::link(src.c_str(), tmp.c_str()) != 0) {
    std::error_code ec;
    std::filesystem::copy_file(src, tmp, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot link or copy ", src,
                                              " to ", tmp, ": ", ec.message()));
    }
  }
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", dst,
                                            ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// The N of the part-TTTTT-of-NNNNN directories in `out_dir`; every part
// must say the same N.
absl::StatusOr<int> FindSplit(const std::string& out_dir) {
  int num_tasks = 0;
  std::string first_name;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto part = ParsePartName(name);
    if (!part) continue;
    if (num_tasks != 0 && part->second != num_tasks) {
      return absl::InvalidArgumentError(
          absl::StrCat(out_dir, ": parts of different splits: ", first_name,
                       " and ", name, "; remove the stale ones"));
    }
    num_tasks = part->second;
    if (first_name.empty()) first_name = name;
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat(out_dir, ": cannot list: ", ec.message()));
  }
  if (num_tasks == 0) {
    return absl::NotFoundError(absl::StrCat(
        out_dir,
        ": no part directories (part-TTTTT-of-NNNNN from xlnet-data "
        "prepare --num_tasks N --task T --out ",
        out_dir, ")"));
  }

  return num_tasks;
}

// Part `t`'s manifest, checked against part 0's (`parts[0]`, already read
// for t > 0): the same tokenizer, options and inputs, shards of its own
// inputs, and every shard as its manifest says with totals that add up.
absl::StatusOr<ShardManifest> ReadPart(const std::vector<std::string>& dirs,
                                       int t,
                                       const std::vector<ShardManifest>& parts) {
  const int num_tasks = static_cast<int>(dirs.size());
  auto manifest = ReadManifest(dirs[t]);
  if (manifest.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(
        absl::StrCat(dirs[t], ": unfinished: no ", kManifestName, " (task ",
                     t, " of ", num_tasks, " did not finish; run it again)"));
  }
  XLNET_RETURN_IF_ERROR(manifest.status());
  const ShardManifest m = std::move(manifest).value();
  if (m.task != t || m.num_tasks != num_tasks) {
    return absl::DataLossError(absl::StrCat(dirs[t], "/", kManifestName,
                                            ": says task ", m.task, " of ",
                                            m.num_tasks));
  }
  const ShardManifest& first = t == 0 ? m : parts[0];
  if (m.tokenizer_hash != first.tokenizer_hash ||
      m.vocab_size != first.vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        dirs[t], ": made with another tokenizer (hash ", m.tokenizer_hash,
        ", ", m.vocab_size, " pieces) than ", dirs[0], " (hash ",
        first.tokenizer_hash, ", ", first.vocab_size,
        " pieces); re-run its task with the same --tokenizer"));
  }
  if (Options(m) != Options(first)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dirs[t], ": made with other options (", Options(m),
                     ") than ", dirs[0], " (", Options(first), ")"));
  }
  if (!SameInputs(m, first)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dirs[t], ": lists other input files (or sizes) than ",
                     dirs[0], "; every task must be given the same --input"));
  }
  for (const ManifestShard& s : m.shards) {
    if (s.input >= m.inputs.size() ||
        static_cast<int>(s.input % num_tasks) != t) {
      return absl::DataLossError(
          absl::StrCat(dirs[t], "/", kManifestName, ": shard ", s.file,
                       " is from input ", s.input, ", not task ", t, "'s"));
    }
  }
  // Every shard is what the part's manifest says (header, checksum, ids
  // inside the vocabulary, flags) and the counts add up to its totals.
  uint64_t tokens = 0, docs = 0;
  for (const ManifestShard& s : m.shards) {
    const std::string path = dirs[t] + "/" + s.file;
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                           MappedFile::Open(path));
    XLNET_ASSIGN_OR_RETURN(
        const ShardHeader h,
        DecodeShardHeader(file->data(), file->size(), path));
    XLNET_RETURN_IF_ERROR(CheckShardMatchesManifest(h, s, dirs[t]));
    XLNET_RETURN_IF_ERROR(
        VerifyShardBody(file->data(), file->size(), h, m.vocab_size, path));
    tokens += s.tokens;
    docs += s.docs;
  }
  if (tokens != static_cast<uint64_t>(m.totals.tokens) ||
      docs != static_cast<uint64_t>(m.totals.docs)) {
    return absl::DataLossError(
        absl::StrCat(dirs[t], "/", kManifestName, ": totals say ",
                     m.totals.tokens, " tokens and ", m.totals.docs,
                     " documents, its shards hold ", tokens, " and ", docs));
  }
  return m;
}

// The one-task manifest of the combined parts: part 0's settings with the
// totals of all parts (its shards are added as they are linked).
ShardManifest CombinedManifest(const std::vector<ShardManifest>& parts) {
  ShardManifest combined = parts[0];
  combined.task = 0;
  combined.num_tasks = 1;
  combined.shards.clear();
  combined.totals = ManifestTotals();
  for (const ShardManifest& m : parts) {
    combined.totals.files += m.totals.files;
    combined.totals.empty_files += m.totals.empty_files;
    combined.totals.lines += m.totals.lines;
    combined.totals.tokens += m.totals.tokens;
    combined.totals.docs += m.totals.docs;
    combined.totals.invalid_utf8_lines += m.totals.invalid_utf8_lines;
    combined.totals.overlong_lines += m.totals.overlong_lines;
    combined.totals.skipped_records += m.totals.skipped_records;
  }
  return combined;
}

}  // namespace

std::string CombineReport::Summary() const {
  return absl::StrFormat("%d parts, %d shards, %s tokens, %s documents", parts,
                         shards, WithCommas(tokens), WithCommas(docs));
}

absl::StatusOr<CombineReport> CombineParts(const std::string& out_dir) {
  if (!IsDirectory(out_dir)) {
    return absl::NotFoundError(absl::StrCat(out_dir, ": no such directory"));
  }
  XLNET_ASSIGN_OR_RETURN(const int num_tasks, FindSplit(out_dir));

  // Never replace a finished directory: its manifest is the only sign of it.
  if (PathExists(out_dir + "/" + kManifestName)) {
    return absl::AlreadyExistsError(absl::StrCat(
        out_dir, "/", kManifestName, ": ", out_dir,
        " already holds a prepared directory, which combining would replace; "
        "move the parts to an empty directory and combine there"));
  }

  // Read and check every part against part 0.
  std::vector<ShardManifest> parts(num_tasks);
  std::vector<std::string> dirs(num_tasks);
  for (int t = 0; t < num_tasks; ++t) {
    dirs[t] = absl::StrCat(out_dir, "/", PartDirName(t, num_tasks));
    if (!IsDirectory(dirs[t])) {
      return absl::NotFoundError(
          absl::StrCat(dirs[t], ": missing: task ", t, " of ", num_tasks,
                       " has not run here (run xlnet-data prepare --task ", t,
                       " --num_tasks ", num_tasks, ", or copy its part)"));
    }
    XLNET_ASSIGN_OR_RETURN(parts[t], ReadPart(dirs, t, parts));
  }
  // The tokenizer beside the shards must be the one the manifests name.
  const std::string tokenizer_src = dirs[0] + "/" + kShardTokenizerName;
  XLNET_ASSIGN_OR_RETURN(const std::string tokenizer_bytes,
                         ReadFile(tokenizer_src, kMaxTokenizerBytes));
  if (HexU64(Fnv1a64(tokenizer_bytes.data(), tokenizer_bytes.size())) !=
      parts[0].tokenizer_hash) {
    return absl::DataLossError(absl::StrCat(
        tokenizer_src, ": not the tokenizer its manifest names (hash ",
        parts[0].tokenizer_hash, ")"));
  }

  // Shards in one-task order: by input, then position.
  struct Ref {
    int part;
    ManifestShard shard;
  };
  std::vector<Ref> refs;
  for (int t = 0; t < num_tasks; ++t) {
    for (const ManifestShard& s : parts[t].shards) refs.push_back(Ref{t, s});
  }
  std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
    return a.shard.input != b.shard.input
               ? a.shard.input < b.shard.input
               : a.shard.byte_begin < b.shard.byte_begin;
  });

  ShardManifest combined = CombinedManifest(parts);

  // Write: no manifest until every shard is in place.
  XLNET_RETURN_IF_ERROR(CleanStaleTemps(out_dir).status());
  CombineReport report;
  report.parts = num_tasks;
  for (size_t k = 0; k < refs.size(); ++k) {
    ManifestShard shard = refs[k].shard;
    const std::string src = dirs[refs[k].part] + "/" + shard.file;
    shard.file = ShardFileName(k);
    XLNET_RETURN_IF_ERROR(LinkOrCopy(src, out_dir + "/" + shard.file));
    report.tokens += static_cast<int64_t>(shard.tokens);
    report.docs += static_cast<int64_t>(shard.docs);
    combined.shards.push_back(std::move(shard));
  }
  report.shards = static_cast<int64_t>(refs.size());
  for (size_t i = refs.size();; ++i) {
    const std::string stale = out_dir + "/" + ShardFileName(i);
    if (!PathExists(stale)) break;
    XLNET_RETURN_IF_ERROR(RemoveAll(stale));
  }
  XLNET_RETURN_IF_ERROR(
      WriteFileAtomic(out_dir + "/" + kShardTokenizerName, tokenizer_bytes));
  // The split over the combined shards (a part's covers its shards alone),
  // for the eval_fraction the parts were prepared with.
  if (parts[0].split) {
    combined.split.reset();
    XLNET_ASSIGN_OR_RETURN(const std::unique_ptr<ShardSet> linked,
                           ShardSet::OpenWithManifest(out_dir, combined));
    XLNET_ASSIGN_OR_RETURN(combined.split,
                           RecordSplit(*linked, parts[0].split->eval_fraction));
  }
  XLNET_RETURN_IF_ERROR(WriteManifest(out_dir, combined));
  for (const std::string& dir : dirs) XLNET_RETURN_IF_ERROR(RemoveAll(dir));
  return report;
}

}  // namespace xlnet::data
