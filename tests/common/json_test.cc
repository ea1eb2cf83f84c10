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

TEST(JsonTest, IntegersAreRangeCheckedNotCast) {
  auto j = ParseJson(
      R"({"ok": 7, "neg": -3, "big": 4294967297, "huge": 18446744073709551615,
          "float": 1.0, "e": 1e300, "s": "7"})",
      "n.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*JsonInteger((*j)["ok"], "n.json: ok", 0, 10), 7);
  EXPECT_EQ(*JsonInteger((*j)["neg"], "n.json: neg", -5, 0), -3);
  // get<int>() would read 2^32 + 1 as 1.
  auto big = JsonInteger((*j)["big"], "n.json: big", 0, INT32_MAX);
  EXPECT_EQ(big.status().message(),
            "n.json: big: 4294967297 is not an integer in [0, 2147483647]");
  EXPECT_FALSE(JsonInteger((*j)["huge"], "h", INT64_MIN, INT64_MAX).ok());
  EXPECT_FALSE(JsonInteger((*j)["neg"], "neg", 0, 10).ok());
  EXPECT_FALSE(JsonInteger((*j)["float"], "f", 0, 10).ok());
  EXPECT_FALSE(JsonInteger((*j)["e"], "e", INT64_MIN, INT64_MAX).ok());
  EXPECT_FALSE(JsonInteger((*j)["s"], "s", 0, 10).ok());
  EXPECT_EQ(*JsonInteger(nlohmann::json(UINT32_MAX), "u", 0, UINT32_MAX),
            int64_t{UINT32_MAX});
}

TEST(JsonTest, HugeNumbersAreErrorsNotExceptions) {
  auto j = ParseJson(R"({"a": 1e512})", "big.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().rfind("big.json: not valid JSON", 0), 0u);
}

}  // namespace
}  // namespace xlnet
