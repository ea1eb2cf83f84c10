#include "tests/finetune/finetune_test_env.h"

#include <gtest/gtest.h>

#include <memory>

namespace xlnet::finetune::testing {

const data::Tokenizer& SmallTokenizer() {
  // Training takes about two seconds; it is deterministic (1 thread, fixed
  // seed), so every test sees the same pieces.
  static const data::Tokenizer* tokenizer = [] {
    data::TokenizerTrainOptions options;
    options.inputs = {std::string(XLNET_SOURCE_DIR) +
                      "/data/sample/brown_sample.txt"};
    options.vocab_size = 1000;
    auto bytes = data::TrainTokenizer(options);
    if (!bytes.ok()) {
      ADD_FAILURE() << bytes.status();
      return static_cast<data::Tokenizer*>(nullptr);
    }
    auto loaded = data::Tokenizer::FromBytes(*bytes, "brown_sample_1000.model");
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status();
      return static_cast<data::Tokenizer*>(nullptr);
    }
    return loaded->release();
  }();
  if (tokenizer == nullptr) throw std::runtime_error("no test tokenizer");
  return *tokenizer;
}

std::string FixturePath(const std::string& name) {
  return std::string(XLNET_SOURCE_DIR) + "/tests/fixtures/finetune/" + name;
}

}  // namespace xlnet::finetune::testing
