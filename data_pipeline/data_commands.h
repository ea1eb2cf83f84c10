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

// Trains a tokenizer and writes it atomically to `out`; prints a summary.
absl::Status TrainTokenizerFile(const TokenizerTrainOptions& options,
                                const std::string& out, std::ostream& log);

struct DumpOptions {
  std::string data_dir;
  Config config;
  int64_t batches = 1;
  std::string out;
  int rank = 0;
  int world_size = 1;
  Split split = Split::kTrain;
};

// Writes `batches` consecutive batches of one rank, stacked [N, B, ...]
// under the PlmBatch names, to a safetensors file (metadata: the sampler
// settings and the state after the last batch).
absl::Status DumpBatches(const DumpOptions& options, std::ostream& log);

struct InspectOptions {
  std::string data_dir;
  Config config;
  int64_t step = 0;
  int64_t row = 0;
  Split split = Split::kTrain;
};

// Prints one sample: the text with targets marked, segments, the
// factorisation order and the A/B split.
absl::Status InspectSample(const InspectOptions& options, std::ostream& out);

}  // namespace xlnet::data
