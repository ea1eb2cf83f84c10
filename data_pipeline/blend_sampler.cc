#include "data_pipeline/blend_sampler.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data_pipeline/plm_sample.h"

namespace xlnet::data {

namespace {

// Key of the source draw, so it never collides with the masking generator.
constexpr uint64_t kBlendKey = 0xB1E7D50C4CEULL;

}  // namespace

BlendSampler::BlendSampler() = default;

// The prefetching workers call BuildBatch: stop them before any member it
// reads goes.
BlendSampler::~BlendSampler() { StopBatches(); }

absl::StatusOr<std::unique_ptr<BlendSampler>> BlendSampler::Create(
    std::vector<BlendSource> sources, const SamplerOptions& options,
    int64_t block_steps) {
  if (sources.empty()) {
    return absl::InvalidArgumentError("data.sources: no source given");
  }
  if (block_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.source_block_steps=", block_steps, " must be at least 1"));
  }
  auto blend = std::unique_ptr<BlendSampler>(new BlendSampler());
  BlendSampler& b = *blend;
  std::set<std::string> names;
  double total = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    BlendSource& s = sources[i];
    s.name = DataSourceName(s);
    if (!(s.weight > 0) || !std::isfinite(s.weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.sources[", i, "] (", s.path, "): weight ",
                       s.weight, " must be a finite number > 0"));
    }
    if (!names.insert(s.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.sources[", i, "] (", s.path, "): name '", s.name,
                       "' is used by an earlier source; names must be unique"));
    }
    total += s.weight;
  }
  // The sources are only read through BuildBatch, so threads of their own
  // would sit idle.
  SamplerOptions sub = options;
  sub.data.prefetch_batches = 0;
  sub.pin_memory = false;  // the blend pins the batches it hands out
  std::string key = absl::StrCat("blend block_steps=", block_steps);
  double acc = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const BlendSource& s = sources[i];
    auto sampler = Sampler::Create(s.path, sub);
    if (!sampler.ok()) {
      return absl::Status(sampler.status().code(),
                          absl::StrCat("data source '", s.name, "' (", s.path,
                                       "): ", sampler.status().message()));
    }
    const Sampler& first = i == 0 ? **sampler : *b.samplers_[0];
    const Sampler& cur = **sampler;
    const ShardSet& cs = cur.shards();
    const ShardSet& fs = first.shards();
    if (cs.tokenizer_hash() != fs.tokenizer_hash()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data source '", s.name, "' (", s.path, ") was made with tokenizer ",
          cs.tokenizer_hash(), " but source '", sources[0].name, "' with ",
          fs.tokenizer_hash(),
          "; every source of a blend needs the same tokenizer"));
    }
    if (cs.rules().uncased != fs.rules().uncased ||
        cs.rules().keep_accents != fs.rules().keep_accents ||
        cs.use_eod() != fs.use_eod()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data source '", s.name, "' (", s.path,
          ") was prepared with other text rules (uncased, keep_accents, "
          "use_eod) than source '",
          sources[0].name, "'"));
    }
    acc += s.weight / total;
    b.cumulative_.push_back(acc);
    absl::StrAppend(&key, " [", s.name, " w=", s.weight, " ",
                    cur.State().fingerprint, "]");
    b.samplers_.push_back(std::move(sampler).value());
  }
  b.cumulative_.back() = 1.0;  // rounding never leaves a gap at the end
  b.sources_ = std::move(sources);
  b.block_steps_ = block_steps;
  b.seed_ = options.seed;
  b.num_streams_ = b.samplers_[0]->num_streams();
  b.batch_size_ = options.batch_size;
  b.seq_len_ = options.data.seq_len;
  b.memo_.resize(b.num_streams_);
  // One source keeps the single-directory fingerprint: its states resume
  // either way, as its batches are the same.
  b.StartBatches(options,
                 b.samplers_.size() == 1
                     ? b.samplers_[0]->State().fingerprint
                     : HexU64(Fnv1a64(key.data(), key.size())),
                 "data sources, weights, block size, seed, batch size or "
                 "data config");
  return blend;
}

int BlendSampler::Draw(int64_t stream, int64_t block) const {
  if (samplers_.size() == 1) return 0;
  Rng rng =
      Rng::For({static_cast<uint64_t>(seed_), kBlendKey,
                static_cast<uint64_t>(stream), static_cast<uint64_t>(block)});
  const double u = rng.UniformDouble();
  for (size_t i = 0; i < cumulative_.size(); ++i) {
    if (u < cumulative_[i]) return static_cast<int>(i);
  }
  return static_cast<int>(cumulative_.size()) - 1;
}

std::vector<int64_t> BlendSampler::BlockCounts(int64_t stream,
                                               int64_t block) const {
  const size_t n = samplers_.size();
  const int64_t checkpoint = block / kCheckpointBlocks;
  std::vector<int64_t> counts;
  {
    std::lock_guard<std::mutex> lock(memo_mu_);
    auto& memo = memo_[stream];
    if (memo.empty()) memo.push_back(std::vector<int64_t>(n, 0));
    while (static_cast<int64_t>(memo.size()) <= checkpoint) {
      std::vector<int64_t> next = memo.back();
      const int64_t start =
          (static_cast<int64_t>(memo.size()) - 1) * kCheckpointBlocks;
      for (int64_t k = start; k < start + kCheckpointBlocks; ++k) {
        ++next[Draw(stream, k)];
      }
      memo.push_back(std::move(next));
    }
    counts = memo[checkpoint];
  }
  for (int64_t k = checkpoint * kCheckpointBlocks; k < block; ++k) {
    ++counts[Draw(stream, k)];
  }
  return counts;
}

int BlendSampler::SourceOf(int64_t step, int64_t row,
                           int64_t* source_step) const {
  TORCH_CHECK(step >= 0 && row >= 0 && row < batch_size_, "step ", step,
              " row ", row, " outside the blend");
  const int64_t stream = row % num_streams_;
  const int64_t block = step / block_steps_;
  const int source = Draw(stream, block);
  if (source_step != nullptr) {
    *source_step = samplers_.size() == 1
                       ? step
                       : block_steps_ * BlockCounts(stream, block)[source] +
                             step % block_steps_;
  }
  return source;
}

PlmBatch BlendSampler::BuildBatch(int64_t step,
                                  const std::vector<int64_t>& rows) const {
  if (samplers_.size() == 1) return samplers_[0]->BuildBatch(step, rows);
  if (rows.empty()) return samplers_[0]->BuildBatch(step, rows);
  std::vector<PlmBatch> parts;
  parts.reserve(rows.size());
  for (int64_t row : rows) {
    int64_t source_step = 0;
    const int source = SourceOf(step, row, &source_step);
    parts.push_back(samplers_[source]->BuildBatch(source_step, {row}));
  }
  return PlmBatch::Cat(parts);
}

std::vector<int64_t> BlendSampler::TokensConsumed(int64_t steps) const {
  TORCH_CHECK(steps >= 0, "negative step count");
  std::vector<int64_t> tokens(samplers_.size(), 0);
  const int64_t block = steps / block_steps_;
  const int64_t within = steps % block_steps_;
  for (int64_t row = 0; row < batch_size_; ++row) {
    const int64_t stream = row % num_streams_;
    const std::vector<int64_t> counts = samplers_.size() == 1
                                            ? std::vector<int64_t>{block}
                                            : BlockCounts(stream, block);
    for (size_t s = 0; s < counts.size(); ++s) {
      tokens[s] += counts[s] * block_steps_ * seq_len_;
    }
    if (within > 0) tokens[Draw(stream, block)] += within * seq_len_;
  }
  return tokens;
}

std::vector<SourcePart> BlendSampler::Parts() const {
  double total = 0;
  for (const BlendSource& s : sources_) total += s.weight;
  std::vector<SourcePart> parts;
  for (size_t i = 0; i < samplers_.size(); ++i) {
    parts.push_back(SourcePart{samplers_[i].get(), sources_[i].weight / total,
                               sources_[i].name});
  }
  return parts;
}

RowOrigin BlendSampler::Origin(int64_t step, int64_t row) const {
  int64_t source_step = 0;
  const int source = SourceOf(step, row, &source_step);
  return RowOrigin{samplers_[source].get(), source_step, sources_[source].name};
}

}  // namespace xlnet::data
