#include "data_pipeline/prepared_corpus.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/plm_sample.h"
#include "data_pipeline/tokenizer_rules.h"

namespace xlnet::data {
namespace {

// One INFO line per directory and process when opening its split read
// every shard's document table: how to make start-up read only the shards
// a rank's rows reach.
void NoteReadsEveryShard(const ShardSet& shards, double eval_fraction) {
  static std::mutex mu;
  static std::set<std::string> noted;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!noted.insert(shards.dir()).second) return;
  }
  if (!shards.split()) {
    XLOG(INFO) << shards.dir() << "/" << kManifestName
               << " does not record the training/evaluation split, so every "
                  "rank read every shard's document table to form it; "
                  "re-running xlnet-data prepare (finished shards are kept) "
                  "makes start-up read only the shards each rank's rows read";
  } else {
    XLOG(INFO) << shards.dir() << "/" << kManifestName
               << " records the split for data.eval_fraction="
               << shards.split()->eval_fraction << ", not " << eval_fraction
               << ", so every rank read every shard's document table; "
                  "re-running xlnet-data prepare with --set "
                  "data.eval_fraction="
               << eval_fraction
               << " makes start-up read only the shards each rank's rows read";
  }
}

}  // namespace

absl::StatusOr<PreparedCorpus> OpenPreparedCorpus(const std::string& data_dir,
                                                  const DataConfig& d,
                                                  Split split, bool verify) {
  PreparedCorpus p;
  // Verifying reads every shard anyway; otherwise a shard is read the
  // first time a row reaches it (shard_reader.h).
  if (verify) {
    XLNET_ASSIGN_OR_RETURN(p.shards, ShardSet::Open(data_dir, verify));
  } else {
    XLNET_ASSIGN_OR_RETURN(p.shards, ShardSet::OpenLazy(data_dir));
  }
  const std::string tokenizer_path =
      d.tokenizer.empty() ? p.shards->tokenizer_file() : d.tokenizer;
  XLNET_ASSIGN_OR_RETURN(p.tokenizer,
                         Tokenizer::Load(tokenizer_path, p.shards->rules()));
  if (p.tokenizer->hash() != p.shards->tokenizer_hash()) {
    return absl::FailedPreconditionError(
        absl::StrCat(tokenizer_path, ": not the tokenizer the shards in ",
                     data_dir, " were made with (hash ", p.tokenizer->hash(),
                     ", manifest says ", p.shards->tokenizer_hash(), ")"));
  }
  if (p.tokenizer->vocab_size() != p.shards->vocab_size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        data_dir, "/", kManifestName, ": vocab_size ", p.shards->vocab_size(),
        " but the tokenizer has ", p.tokenizer->vocab_size(), " pieces"));
  }
  // The casing is the tokenizer's (tokenizer_rules.h): the manifest's rules
  // must be the ones it records. The data config's data.uncased and
  // data.keep_accents are not compared here (their defaults are no choice);
  // xlnet-pretrain refuses those its config sets and that differ.
  XLNET_ASSIGN_OR_RETURN(
      const std::optional<TextRules> recorded,
      RecordedTextRules(p.tokenizer->model_bytes(), tokenizer_path));
  XLNET_RETURN_IF_ERROR(
      ResolveTextRules(tokenizer_path, recorded,
                       {{absl::StrCat(data_dir, "/", kManifestName), "uncased",
                         p.shards->rules().uncased},
                        {absl::StrCat(data_dir, "/", kManifestName),
                         "keep_accents", p.shards->rules().keep_accents}})
          .status());
  if (d.use_eod != p.shards->use_eod()) {
    XLOG(WARNING) << data_dir
                  << " was prepared with use_eod=" << p.shards->use_eod()
                  << ", which differs from the data config; the shards win";
  }
  XLNET_ASSIGN_OR_RETURN(p.corpus,
                         Corpus::Create(*p.shards, split, d.eval_fraction));
  if (!p.corpus.per_slice()) NoteReadsEveryShard(*p.shards, d.eval_fraction);
  return p;
}

void CopyIdsCircular(const Corpus& corpus, int64_t start, int64_t n,
                     int32_t* out) {
  const int64_t size = corpus.size();
  start %= size;
  const int64_t first = std::min(n, size - start);
  corpus.CopyIds(start, first, out);
  if (n > first) corpus.CopyIds(0, n - first, out + first);
}

int64_t EpochOffset(int64_t seed, int64_t epoch, int64_t corpus_size) {
  if (epoch == 0) return 0;
  Rng rng = Rng::For({static_cast<uint64_t>(seed), 0xE90C0FF5E7ULL,
                      static_cast<uint64_t>(epoch)});
  return static_cast<int64_t>(rng.Uniform(corpus_size));
}

}  // namespace xlnet::data
