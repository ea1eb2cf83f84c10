// ConfigKeyLocation: where a key is set (file line, or the --set that sets
// it last), and nullopt where its default applies.
#include "config/config_keys.h"

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

TEST(ConfigKeyLocationTest, SaysWhereAKeyIsSetOrThatItIsNot) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("c.yaml");
  ASSERT_TRUE(
      WriteFileAtomic(path, "data:\n  seq_len: 64\n  uncased: false\n").ok());
  auto at = ConfigKeyLocation(path, {}, "data.uncased");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(*at, path + ":3");
  // Set to its default value is still set.
  at = ConfigKeyLocation(path, {}, "data.keep_accents");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_FALSE(at->has_value());
  at = ConfigKeyLocation(path, {"data.keep_accents=true"}, "data.keep_accents");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(*at, "--set data.keep_accents=true");
  // No file: only the overrides.
  at = ConfigKeyLocation("", {"data.uncased=true", "data.uncased=false"},
                         "data.uncased");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(*at, "--set data.uncased=false");
  at = ConfigKeyLocation("", {}, "data.uncased");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_FALSE(at->has_value());
  EXPECT_FALSE(
      ConfigKeyLocation(tmp.Join("missing.yaml"), {}, "data.uncased").ok());
}

}  // namespace
}  // namespace xlnet
