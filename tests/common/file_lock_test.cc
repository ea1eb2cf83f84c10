// FileLock: one holder at a time (flock locks are per open file, so a second
// Acquire in this process is refused as another process's would be).
#include "common/file_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/test_util.h"

namespace xlnet {
namespace {

TEST(FileLockTest, SecondHolderIsRefusedAndToldWhoHoldsIt) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("run.lock");
  auto first = FileLock::Acquire(path, "RUN");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->locked());
  auto second = FileLock::Acquire(path, "RUN");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(second.status().message());
  EXPECT_EQ(message.rfind("RUN is in use by pid " + std::to_string(::getpid()) +
                              " on host ",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("(lock file " + path + ")"), std::string::npos)
      << message;
  first->reset();  // released
  EXPECT_TRUE(FileLock::Acquire(path, "RUN").ok());
}

}  // namespace
}  // namespace xlnet
