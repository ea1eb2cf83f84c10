// ParseJson: a repeated key, at any depth, is an error naming the source.
#include "common/json.h"

#include <gtest/gtest.h>

namespace xlnet {
namespace {

TEST(JsonTest, RepeatedKeysAreErrorsAtAnyDepth) {
  auto ok = ParseJson(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}]})",
                      "ok.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)["c"][0]["x"], 3);
  auto top = ParseJson(R"({"a": 1, "a": 2})", "top.json");
  EXPECT_EQ(top.status().message(), "top.json: duplicate key 'a'");
  auto nested = ParseJson(R"({"a": {"x": 1, "y": {}, "x": 2}})", "n.json");
  EXPECT_EQ(nested.status().message(), "n.json: duplicate key 'x'");
  auto bad = ParseJson("{\"a\": ", "bad.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("bad.json: not valid JSON", 0), 0u);
}

}  // namespace
}  // namespace xlnet
