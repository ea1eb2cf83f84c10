// What the `xlnet-data` verbs do (tools/data_main.cc only parses flags):
//   tokenizer  TrainTokenizerFile
//   prepare    PrepareShards (shard_writer.h)
//   dump       DumpBatches
//   inspect    InspectSample
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "config/config.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/tokenizer.h"

namespace xlnet::data {

// Trains a tokenizer and writes it atomically to `out` (its folder made
// first); prints a summary to `log`. Unless options.progress is set, the
// phases go to the log (XLOG INFO) with the time since the start.
absl::Status TrainTokenizerFile(const TokenizerTrainOptions& options,
                                const std::string& out, std::ostream& log);

struct DumpOptions {
  // The prepared directory (--data); empty when config.data.sources names
  // the corpora of a blend (OpenBatchSource: exactly one of the two).
  std::string data_dir;
  // Batch size, seed and data settings of the run the batches are for.
  Config config;
  // How many consecutive batches, from step 0.
  int64_t batches = 1;
  // The safetensors file to write.
  std::string out;
  // Whose batches: rank `rank` of `world_size`.
  int rank = 0;
  int world_size = 1;
  // Which split of the corpora.
  Split split = Split::kTrain;
};

// Writes `batches` consecutive batches of one rank, stacked [N, B, ...]
// under the PlmBatch names, to a safetensors file (metadata: the sampler
// settings, the sources and the state after the last batch). The batches
// are exactly those training reads (OpenBatchSource).
absl::Status DumpBatches(const DumpOptions& options, std::ostream& log);

struct InspectOptions {
  // As DumpOptions: --data, or empty with config.data.sources.
  std::string data_dir;
  Config config;
  // The sample of global row `row` at `step` (a blend's step: the row
  // reads one source at that source's own step, which is printed).
  int64_t step = 0;
  int64_t row = 0;
  Split split = Split::kTrain;
};

// Prints one sample: the text with targets marked, segments, the
// factorisation order and the A/B split; for a blend, first the source the
// row reads.
absl::Status InspectSample(const InspectOptions& options, std::ostream& out);

}  // namespace xlnet::data
