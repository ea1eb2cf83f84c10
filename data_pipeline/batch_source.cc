#include "data_pipeline/batch_source.h"

namespace xlnet::data {

BatchSource::BatchSource() = default;

BatchSource::~BatchSource() { StopBatches(); }

void BatchSource::StartBatches(const SamplerOptions& options,
                               std::string fingerprint, std::string what) {
  batches_.Start(
      [this](int64_t step) { return BuildBatch(step, local_rows()); }, options,
      std::move(fingerprint), std::move(what));
}

void BatchSource::StopBatches() { batches_.Stop(); }

PlmBatch BatchSource::Next() { return batches_.Next(); }

SamplerState BatchSource::State() const { return batches_.State(); }

absl::Status BatchSource::Restore(const SamplerState& state,
                                  bool allow_other_setup) {
  return batches_.Restore(state, allow_other_setup);
}

}  // namespace xlnet::data
