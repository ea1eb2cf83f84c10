#include "data_pipeline/step_batches.h"

#include <atomic>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/status.h"
#include "data_pipeline/lm_batch.h"
#include "data_pipeline/plm_batch.h"
#include "data_pipeline/prefetcher.h"

namespace xlnet::data {
namespace {

// Logs, once per process, the shard bytes read when the first batch is
// handed out: what opening the data and building that batch read.
void NoteStartupBytes(int rank) {
  static std::atomic<bool> noted{false};
  if (noted.exchange(true)) return;
  XLOG(INFO) << "rank " << rank << " read " << ShardBytesRead()
             << " bytes of shard data to start";
}

// The field list of each batch type.
const auto& BatchFields(const PlmBatch*) { return kPlmBatchFields; }
const auto& BatchFields(const LmBatch*) { return kLmBatchFields; }

}  // namespace

std::string SamplerState::ToString() const {
  nlohmann::json j = {
      {"version", 1}, {"step", step}, {"fingerprint", fingerprint}};
  return j.dump();
}

absl::StatusOr<SamplerState> SamplerState::FromString(const std::string& text) {
  XLNET_ASSIGN_OR_RETURN(const nlohmann::json j,
                         ParseJson(text, "sampler state"));
  if (!j.is_object() || !j.contains("version") || !j.contains("step") ||
      !j.contains("fingerprint") || !j["fingerprint"].is_string()) {
    return absl::InvalidArgumentError(
        "sampler state: needs version, step and fingerprint");
  }
  XLNET_ASSIGN_OR_RETURN(
      const int64_t version,
      JsonInteger(j["version"], "sampler state: version", 1, INT64_MAX));
  if (version != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler state version ", version, " is not supported"));
  }
  SamplerState state;
  XLNET_ASSIGN_OR_RETURN(
      state.step, JsonInteger(j["step"], "sampler state: step", 0, INT64_MAX));
  state.fingerprint = j["fingerprint"].get<std::string>();
  return state;
}

template <typename Batch>
StepBatches<Batch>::StepBatches() = default;

template <typename Batch>
StepBatches<Batch>::~StepBatches() {
  Stop();
}

template <typename Batch>
void StepBatches<Batch>::Start(BuildFn build, const SamplerOptions& options,
                               std::string fingerprint, std::string what) {
  TORCH_CHECK(prefetcher_ == nullptr, "batches already started");
  fingerprint_ = std::move(fingerprint);
  what_ = std::move(what);
  rank_ = options.rank;
  const bool pin = options.pin_memory;
  prefetcher_ = std::make_unique<Prefetcher<Batch>>(
      [build = std::move(build), pin](int64_t step) {
        Batch batch = build(step);
        if (pin) {
          // On the worker thread, so the copy into page-locked memory
          // overlaps the current step instead of delaying the next one.
          for (const auto& [name, field] : BatchFields(&batch)) {
            if ((batch.*field).defined()) {
              batch.*field = (batch.*field).pin_memory();
            }
          }
        }
        return batch;
      },
      options.data.loader_threads, options.data.prefetch_batches);
}

template <typename Batch>
void StepBatches<Batch>::Stop() {
  prefetcher_.reset();
}

template <typename Batch>
Batch StepBatches<Batch>::Next() {
  TORCH_CHECK(prefetcher_ != nullptr, "batch source not started");
  Batch batch = prefetcher_->Next();
  NoteStartupBytes(rank_);
  return batch;
}

template <typename Batch>
SamplerState StepBatches<Batch>::State() const {
  TORCH_CHECK(prefetcher_ != nullptr, "batch source not started");
  return SamplerState{prefetcher_->next_step(), fingerprint_};
}

template <typename Batch>
absl::Status StepBatches<Batch>::Restore(const SamplerState& state,
                                         bool allow_other_setup) {
  TORCH_CHECK(prefetcher_ != nullptr, "batch source not started");
  if (state.fingerprint != fingerprint_ && !allow_other_setup) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sampler state was saved with different ", what_, " (fingerprint ",
        state.fingerprint, ", these batches ", fingerprint_, ")"));
  }
  if (state.step < 0) {
    return absl::InvalidArgumentError("sampler state: negative step");
  }
  prefetcher_->Restart(state.step);
  return absl::OkStatus();
}

template class StepBatches<PlmBatch>;
template class StepBatches<LmBatch>;

}  // namespace xlnet::data
