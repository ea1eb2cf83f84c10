// The parameter count computed from a config alone matches the module's, and
// a model too large for memory is refused by name before anything is built.
#include "model/model_size.h"

#include <gtest/gtest.h>

#include "tests/model/test_util.h"

namespace xlnet {
namespace {

TEST(ModelSizeTest, CountMatchesTheModule) {
  XLNetConfig c = testing::TinyConfig();
  c.d_inner = 48;
  XLNetLMHeadModel model(c);
  double actual = 0;
  for (const auto& p : model->parameters()) actual += p.numel();
  EXPECT_EQ(ModelParameterCount(c), actual);
}

TEST(ModelSizeTest, TooLargeIsRefusedNamingTheKey) {
  XLNetConfig c = testing::TinyConfig();
  EXPECT_TRUE(CheckModelFitsInMemory(c, "tiny.yaml", "model.").ok());
  c.n_layer = 100000000;
  absl::Status s = CheckModelFitsInMemory(c, "big.yaml", "model.");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("big.yaml: the model"), std::string::npos) << s;
  EXPECT_NE(s.message().find("check model.n_layer"), std::string::npos) << s;
  c = testing::TinyConfig();
  c.vocab_size = 2000000000;
  c.d_model = 65536;
  c.n_head = 1;
  c.d_head = 65536;
  s = CheckModelFitsInMemory(c, "config.json", "");
  EXPECT_NE(s.message().find("check vocab_size"), std::string::npos) << s;
}

}  // namespace
}  // namespace xlnet
