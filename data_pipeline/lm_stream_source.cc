#include "data_pipeline/lm_stream_source.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

absl::StatusOr<std::unique_ptr<LmStreamSource>> LmStreamSource::Create(
    const std::string& data_dir, const SamplerOptions& options) {
  Config config;
  config.data = options.data;
  config.train.objective = Objective::kClm;
  config.model.attn_type = "uni";
  config.train.batch_size = options.batch_size;
  XLNET_RETURN_IF_ERROR(ValidateConfig(config));
  const int64_t B = options.batch_size;
  const int W = options.world_size;
  const int64_t L = options.data.seq_len;
  if (W < 1 || options.rank < 0 || options.rank >= W) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " is not in [0, world_size=", W, ")"));
  }
  if (B % W != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.batch_size=", B, " must be a multiple of world_size = ", W));
  }
  auto source = std::unique_ptr<LmStreamSource>(new LmStreamSource());
  LmStreamSource& s = *source;
  s.options_ = options;
  XLNET_ASSIGN_OR_RETURN(
      s.prepared_, OpenPreparedCorpus(data_dir, options.data, options.split,
                                      options.verify));
  const int64_t N = s.prepared_.corpus.size();
  s.stream_length_ = N / B;
  if (s.stream_length_ < L + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        data_dir, ": the ",
        options.split == Split::kTrain ? "training" : "evaluation",
        " split has ", N, " tokens, too few for ", B,
        " streams of at least seq_len + 1 = ", L + 1,
        " tokens; use more text, a smaller batch_size or seq_len"));
  }
  s.steps_per_epoch_ = (s.stream_length_ - 1) / L;
  const int64_t per_rank = B / W;
  for (int64_t r = 0; r < per_rank; ++r) {
    s.local_rows_.push_back(options.rank * per_rank + r);
  }
  const std::string key = absl::StrCat(
      "causal_lm seed=", options.seed, " batch=", B,
      " split=", static_cast<int>(options.split),
      " eval_fraction=", options.data.eval_fraction, " seq_len=", L,
      " corpus=", N, " tokenizer=", s.prepared_.tokenizer->hash());
  s.batches_.Start(
      [&s](int64_t step) { return s.BuildBatch(step, s.local_rows_); }, options,
      HexU64(Fnv1a64(key.data(), key.size())),
      "data, seed, batch size or seq_len");
  return source;
}

LmStreamSource::~LmStreamSource() { batches_.Stop(); }

int64_t LmStreamSource::CorpusPosition(int64_t step, int64_t row,
                                       int64_t pos) const {
  TORCH_CHECK(step >= 0 && row >= 0 && row < options_.batch_size && pos >= 0 &&
                  pos <= options_.data.seq_len,
              "step ", step, " row ", row, " position ", pos,
              " outside the batches");
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t window = step % steps_per_epoch_;
  const int64_t start =
      EpochOffset(options_.seed, epoch, prepared_.corpus.size()) +
      row * stream_length_ + window * options_.data.seq_len + pos;
  return start % prepared_.corpus.size();
}

LmBatch LmStreamSource::BuildBatch(int64_t step,
                                   const std::vector<int64_t>& rows) const {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t L = options_.data.seq_len;
  std::vector<int32_t> window(L + 1);
  LmBatch b;
  b.input_ids = torch::empty({n, L}, torch::kInt64);
  b.target = torch::empty({n, L}, torch::kInt64);
  auto inputs = b.input_ids.accessor<int64_t, 2>();
  auto targets = b.target.accessor<int64_t, 2>();
  for (int64_t k = 0; k < n; ++k) {
    CopyIdsCircular(prepared_.corpus, CorpusPosition(step, rows[k], 0), L + 1,
                    window.data());
    for (int64_t i = 0; i < L; ++i) {
      inputs[k][i] = window[i];
      targets[k][i] = window[i + 1];
    }
  }
  return b;
}

}  // namespace xlnet::data
