// The one place a config's batches are opened: `--data DIR` gives a Sampler
// of that prepared directory, `data.sources` a BlendSampler of several; the
// caller holds either as a BatchSource (batch_source.h).
//
//   XLNET_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> batches,
//                          OpenBatchSource(data_dir, sampler_options));
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data_pipeline/batch_source.h"

namespace xlnet::data {

// The batches of a config: a Sampler over `data_dir`, or a BlendSampler
// over options.data.sources (blocks of data.source_block_steps). Exactly one
// of the two must be given; the error says which flag or key to use.
absl::StatusOr<std::unique_ptr<BatchSource>> OpenBatchSource(
    const std::string& data_dir, const SamplerOptions& options);

}  // namespace xlnet::data
