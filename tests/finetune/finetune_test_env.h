// Shared fixture of xlnet_finetune_test: a small XLNet tokenizer trained once
// per test binary on the bundled Brown sample, and paths of the committed
// fixtures in tests/fixtures/finetune/.
#pragma once

#include <string>

#include "data_pipeline/tokenizer.h"

namespace xlnet::finetune::testing {

// The tokenizer (vocab 1000, cased), trained on first use.
const data::Tokenizer& SmallTokenizer();
// tests/fixtures/finetune/<name> in the source tree.
std::string FixturePath(const std::string& name);

}  // namespace xlnet::finetune::testing
