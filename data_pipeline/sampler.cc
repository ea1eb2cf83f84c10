#include "data_pipeline/sampler.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/prepared_corpus.h"

namespace xlnet::data {

// One row's stream for one epoch: `length` corpus tokens starting at
// `base` (wrapping around the corpus end), read backwards when `reverse`.
class Sampler::RowStream : public StreamAccess {
 public:
  RowStream(const Corpus& corpus, int64_t base, int64_t length, bool reverse)
      : corpus_(corpus), base_(base), length_(length), reverse_(reverse) {}

  int64_t length() const override { return length_; }

  void Ids(int64_t begin, int64_t n, int32_t* out) const override {
    TORCH_CHECK(begin >= 0 && n >= 0 && begin + n <= length_,
                "stream read out of range");
    if (!reverse_) {
      CopyCircular(base_ + begin, n, out);
    } else {
      // Positions begin..begin+n-1 are corpus offsets length-1-p, descending.
      CopyCircular(base_ + length_ - begin - n, n, out);
      std::reverse(out, out + n);
    }
  }

  uint8_t Flag(int64_t pos) const override {
    const int64_t offset = reverse_ ? length_ - 1 - pos : pos;
    uint8_t flag;
    corpus_.CopyFlags(Wrap(base_ + offset), 1, &flag);
    return flag;
  }

  int64_t CorpusPosition(int64_t pos) const {
    return Wrap(base_ + (reverse_ ? length_ - 1 - pos : pos));
  }

 private:
  int64_t Wrap(int64_t p) const { return p % corpus_.size(); }
  void CopyCircular(int64_t start, int64_t n, int32_t* out) const {
    CopyIdsCircular(corpus_, start, n, out);
  }

  const Corpus& corpus_;
  int64_t base_;
  int64_t length_;
  bool reverse_;
};

// Recycles batch buffers: a tensor's memory goes back to the pool when the
// consumer drops it, so steady-state batches reuse warm pages instead of
// fresh (page-faulting) allocations. The pool outlives the sampler for as
// long as any of its tensors do.
class Sampler::BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  ~BufferPool() {
    for (auto& [bytes, ptr] : free_) std::free(ptr);
  }

  torch::Tensor Take(std::vector<int64_t> shape, torch::ScalarType dtype) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const size_t bytes = std::max<size_t>(1, numel * c10::elementSize(dtype));
    void* ptr = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].first == bytes) {
          ptr = free_[i].second;
          free_[i] = free_.back();
          free_.pop_back();
          break;
        }
      }
    }
    if (ptr == nullptr) {
      ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      TORCH_CHECK(ptr != nullptr, "out of memory allocating ", bytes, " bytes");
    }
    auto self = shared_from_this();
    return torch::from_blob(
        ptr, shape, [self, bytes](void* p) { self->Give(p, bytes); },
        torch::TensorOptions().dtype(dtype));
  }

 private:
  void Give(void* ptr, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kMaxFree) {
      free_.emplace_back(bytes, ptr);
    } else {
      std::free(ptr);
    }
  }
  static constexpr size_t kMaxFree = 256;
  std::mutex mu_;
  std::vector<std::pair<size_t, void*>> free_;
};

Sampler::Sampler() = default;

// The prefetching workers call BuildBatch: stop them before any member it
// reads goes.
Sampler::~Sampler() { StopBatches(); }

absl::StatusOr<std::unique_ptr<Sampler>> Sampler::Create(
    const std::string& data_dir, const SamplerOptions& options) {
  Config config;
  config.data = options.data;
  config.train.batch_size = options.batch_size;
  XLNET_RETURN_IF_ERROR(ValidateConfig(config));
  const DataConfig& d = options.data;
  const int64_t B = options.batch_size;
  const int W = options.world_size;
  if (W < 1 || options.rank < 0 || options.rank >= W) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " is not in [0, world_size=", W, ")"));
  }
  const int64_t unit = d.bi_data ? 2 * W : W;
  if (B % unit != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.batch_size=", B, " must be a multiple of ",
        d.bi_data ? "2 * world_size" : "world_size", " = ", unit,
        d.bi_data ? " (bi_data: every rank takes forward and backward rows)"
                  : ""));
  }

  auto sampler = std::unique_ptr<Sampler>(new Sampler());
  Sampler& s = *sampler;
  s.pool_ = std::make_shared<BufferPool>();
  s.options_ = options;
  XLNET_ASSIGN_OR_RETURN(
      PreparedCorpus prepared,
      OpenPreparedCorpus(data_dir, d, options.split, options.verify));
  s.shards_ = std::move(prepared.shards);
  s.tokenizer_ = std::move(prepared.tokenizer);
  s.corpus_ = std::move(prepared.corpus);

  s.num_streams_ = d.bi_data ? B / 2 : B;
  s.stream_length_ = s.corpus_.size() / s.num_streams_;
  if (s.stream_length_ < d.seq_len + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        data_dir, ": the ",
        options.split == Split::kTrain ? "training" : "evaluation",
        " split has ", s.corpus_.size(), " tokens, too few for ",
        s.num_streams_, " streams of at least seq_len + 1 = ", d.seq_len + 1,
        " tokens; use more text, a smaller batch_size or seq_len"));
  }
  s.stride_ = d.reuse_len > 0 ? d.reuse_len : d.seq_len;
  s.steps_per_epoch_ = (s.stream_length_ - d.seq_len) / s.stride_ + 1;

  if (d.bi_data) {
    const int64_t h = B / (2 * W);
    for (int64_t r = 0; r < h; ++r)
      s.local_rows_.push_back(options.rank * h + r);
    for (int64_t r = 0; r < h; ++r) {
      s.local_rows_.push_back(B / 2 + options.rank * h + r);
    }
  } else {
    const int64_t h = B / W;
    for (int64_t r = 0; r < h; ++r)
      s.local_rows_.push_back(options.rank * h + r);
  }

  const int vocab = s.tokenizer_->vocab_size();
  s.is_start_piece_.resize(vocab);
  for (int id = 0; id < vocab; ++id) {
    s.is_start_piece_[id] = s.tokenizer_->IsStartPiece(id) ? 1 : 0;
  }
  const std::string key = absl::StrCat(
      "seed=", options.seed, " batch=", B,
      " split=", static_cast<int>(options.split),
      " eval_fraction=", d.eval_fraction, " seq_len=", d.seq_len,
      " reuse_len=", d.reuse_len, " perm_size=", d.perm_size,
      " num_predict=", d.num_predict, " alpha=", d.mask_alpha,
      " beta=", d.mask_beta, " max_gram=", d.max_gram, " bi_data=", d.bi_data,
      " quirks=", d.official_span_quirks, " corpus=", s.corpus_.size(),
      " tokenizer=", s.tokenizer_->hash());
  s.StartBatches(options, HexU64(Fnv1a64(key.data(), key.size())),
                 "data, seed, batch size or data config");
  return sampler;
}

int64_t Sampler::EpochOffset(int64_t epoch) const {
  return data::EpochOffset(options_.seed, epoch, corpus_.size());
}

int64_t Sampler::CorpusPosition(int64_t step, int64_t row, int64_t pos) const {
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t stream = row % num_streams_;
  const bool reverse = row >= num_streams_;
  RowStream rs(corpus_, EpochOffset(epoch) + stream * stream_length_,
               stream_length_, reverse);
  return rs.CorpusPosition(pos);
}

PlmBatch Sampler::BuildBatch(int64_t step,
                             const std::vector<int64_t>& rows) const {
  const DataConfig& d = options_.data;
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t L = d.seq_len;
  const int64_t P = d.num_predict;
  PlmBatch b;
  b.input_ids = pool_->Take({n, L}, torch::kInt64);
  b.token_type_ids = pool_->Take({n, L}, torch::kInt64);
  const bool compact = options_.compact_masks;
  const auto mask_dtype = compact ? torch::kBool : torch::kFloat32;
  b.perm_mask = pool_->Take({n, L, L}, mask_dtype);
  b.target_mapping = pool_->Take({n, P, L}, mask_dtype);
  b.target = pool_->Take({n, P}, torch::kInt64);
  b.target_mask = pool_->Take({n, P}, torch::kFloat32);
  b.is_masked = pool_->Take({n, L}, torch::kBool);
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t pos = (step % steps_per_epoch_) * stride_;
  const int64_t offset = EpochOffset(epoch);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t row = rows[k];
    TORCH_CHECK(row >= 0 && row < options_.batch_size, "row ", row,
                " outside the global batch of ", options_.batch_size);
    const int64_t stream = row % num_streams_;
    const bool reverse = row >= num_streams_;
    RowStream rs(corpus_, offset + stream * stream_length_, stream_length_,
                 reverse);
    Rng rng =
        Rng::For({static_cast<uint64_t>(options_.seed),
                  static_cast<uint64_t>(options_.split),
                  static_cast<uint64_t>(row), static_cast<uint64_t>(step)});
    SampleOut out;
    out.input_ids = b.input_ids.data_ptr<int64_t>() + k * L;
    out.token_type_ids = b.token_type_ids.data_ptr<int64_t>() + k * L;
    if (compact) {
      out.perm_mask_bool = b.perm_mask.data_ptr<bool>() + k * L * L;
      out.target_mapping_bool = b.target_mapping.data_ptr<bool>() + k * P * L;
    } else {
      out.perm_mask = b.perm_mask.data_ptr<float>() + k * L * L;
      out.target_mapping = b.target_mapping.data_ptr<float>() + k * P * L;
    }
    out.target = b.target.data_ptr<int64_t>() + k * P;
    out.target_mask = b.target_mask.data_ptr<float>() + k * P;
    out.is_masked = b.is_masked.data_ptr<bool>() + k * L;
    BuildSample(rs, pos, reverse, d, is_start_piece_, rng, out);
  }
  return b;
}

PlmBatch Sampler::BuildRow(int64_t step, int64_t row,
                           SampleDebug* debug) const {
  PlmBatch b = BuildBatch(step, {row});
  if (debug != nullptr) {
    // Rebuild with the same generator to collect the details.
    const DataConfig& d = options_.data;
    const int64_t L = d.seq_len;
    const int64_t P = d.num_predict;
    std::vector<int64_t> ids(L), types(L), target(P);
    std::vector<float> perm(L * L, 0.0f), mapping(P * L, 0.0f), tmask(P);
    std::unique_ptr<bool[]> masked(new bool[L]);
    SampleOut out{ids.data(),    types.data(), perm.data(), mapping.data(),
                  target.data(), tmask.data(), masked.get()};
    const int64_t stream = row % num_streams_;
    const bool reverse = row >= num_streams_;
    RowStream rs(corpus_,
                 EpochOffset(step / steps_per_epoch_) + stream * stream_length_,
                 stream_length_, reverse);
    Rng rng =
        Rng::For({static_cast<uint64_t>(options_.seed),
                  static_cast<uint64_t>(options_.split),
                  static_cast<uint64_t>(row), static_cast<uint64_t>(step)});
    BuildSample(rs, (step % steps_per_epoch_) * stride_, reverse, d,
                is_start_piece_, rng, out, debug);
  }
  return b;
}

std::vector<SourcePart> Sampler::Parts() const {
  return {SourcePart{this, 1.0, ""}};
}

std::vector<int64_t> Sampler::TokensConsumed(int64_t steps) const {
  TORCH_CHECK(steps >= 0, "negative step count");
  return {steps * options_.batch_size * options_.data.seq_len};
}

RowOrigin Sampler::Origin(int64_t step, int64_t row) const {
  TORCH_CHECK(step >= 0 && row >= 0 && row < options_.batch_size, "step ", step,
              " row ", row, " outside the batches");
  return RowOrigin{this, step, ""};
}

}  // namespace xlnet::data
