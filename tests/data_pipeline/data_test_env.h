// Shared fixture of xlnet_data_test: a tokenizer (vocab 1000) trained on the
// bundled Brown sample and its shards, built once per test binary in a
// temporary directory.
#pragma once

#include <string>

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

}  // namespace xlnet::data::testing
