// Shared fixture of xlnet_data_test: a tokenizer (vocab 1000) trained on the
// bundled Brown sample and its shards, built once per test binary in a
// temporary directory.
#pragma once

#include <string>
#include <vector>

#include "data_pipeline/shard_writer.h"

namespace xlnet::data::testing {

// data/sample/brown_sample.txt in the source tree.
std::string SamplePath();
// Temporary directory of this test binary (removed at exit).
const std::string& TempDir();
// The trained spiece.model.
const std::string& TokenizerPath();
// Shards of the sample prepared with 2 workers and small shards.
const std::string& DataDir();
// Contents of a file.
std::string ReadAll(const std::string& path);
void WriteAll(const std::string& path, const std::string& contents);
// `text` compressed into `path` as `members` gzip members / zstd frames.
void WriteGzip(const std::string& path, const std::string& text, int members);
void WriteZstd(const std::string& path, const std::string& text, int frames);
// The documents of the Brown sample (their lines joined with '\n').
std::vector<std::string> SampleDocuments();
// The names in `dir`, sorted.
std::vector<std::string> DirFiles(const std::string& dir);
// Prepare options for tests: the test tokenizer, 2 workers, 60 kB shards,
// no progress lines.
PrepareOptions TestPrepareOptions(const std::vector<std::string>& inputs,
                                  const std::string& out_dir);

}  // namespace xlnet::data::testing
