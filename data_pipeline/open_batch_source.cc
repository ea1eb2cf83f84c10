#include "data_pipeline/open_batch_source.h"

#include <vector>

#include "common/status.h"
#include "data_pipeline/blend_sampler.h"
#include "data_pipeline/sampler.h"

namespace xlnet::data {

absl::StatusOr<std::unique_ptr<BatchSource>> OpenBatchSource(
    const std::string& data_dir, const SamplerOptions& options) {
  const std::vector<DataSource>& sources = options.data.sources;
  if (sources.empty() == data_dir.empty()) {
    return absl::InvalidArgumentError(
        sources.empty()
            ? "no data: give --data DIR or set data.sources in the config"
            : "both --data and data.sources are set; use one or the other "
              "(a single source is data.sources: [{path: DIR}])");
  }
  if (sources.empty()) {
    XLNET_ASSIGN_OR_RETURN(auto sampler, Sampler::Create(data_dir, options));
    return std::unique_ptr<BatchSource>(std::move(sampler));
  }
  XLNET_ASSIGN_OR_RETURN(
      auto blend,
      BlendSampler::Create(sources, options, options.data.source_block_steps));
  return std::unique_ptr<BatchSource>(std::move(blend));
}

}  // namespace xlnet::data
