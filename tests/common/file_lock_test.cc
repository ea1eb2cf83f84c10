// FileLock: one holder at a time (flock locks are per open file, so a second
// Acquire in this process is refused as another process's would be).
#include "common/file_lock.h"

#include <gtest/gtest.h>
#include <stdio.h>
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

// A link at the lock's name is refused: following it would lock, and write
// this process's description into, a file outside the directory.
TEST(FileLockTest, SymlinkedLockFileIsRefused) {
  testing::TempDir run;
  testing::TempDir elsewhere;
  const std::string target = elsewhere.Join("victim.txt");
  ASSERT_TRUE(WriteFileAtomic(target, "precious\n").ok());
  const std::string path = run.Join("run.lock");
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  auto lock = FileLock::Acquire(path, "RUN");
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(lock.status().message().rfind(path + ": ", 0), 0u) << lock.status();
  EXPECT_NE(lock.status().message().find("symbolic link"), std::string::npos)
      << lock.status();
  EXPECT_EQ(*ReadFile(target), "precious\n");

  // A dangling link is no way to create a file elsewhere either.
  const std::string dangling = run.Join("other.lock");
  ASSERT_EQ(::symlink(elsewhere.Join("new.txt").c_str(), dangling.c_str()), 0);
  EXPECT_FALSE(FileLock::Acquire(dangling, "RUN").ok());
  EXPECT_FALSE(PathExists(elsewhere.Join("new.txt")));
}

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

// The flock is on the opened file, not on its name: once the name is gone
// a second process takes a fresh lock there. Check() tells.
TEST(FileLockTest, CheckFailsOnceTheLockFileIsRemovedOrReplaced) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("run.lock");
  const std::string expected = "lock file " + path +
                               " was removed or replaced while this process "
                               "holds it";
  {
    auto lock = FileLock::Acquire(path, "RUN");
    ASSERT_TRUE(lock.ok()) << lock.status();
    EXPECT_TRUE((*lock)->Check().ok());
    ASSERT_EQ(::unlink(path.c_str()), 0);
    const absl::Status removed = (*lock)->Check();
    EXPECT_EQ(removed.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(Message(removed), expected);
    // Why it matters: the name is free for another holder now.
    auto second = FileLock::Acquire(path, "RUN");
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_TRUE((*second)->Check().ok());
    EXPECT_EQ(Message((*lock)->Check()), expected);
  }
  {
    auto lock = FileLock::Acquire(path, "RUN");
    ASSERT_TRUE(lock.ok()) << lock.status();
    const std::string other = tmp.Join("other");
    ASSERT_TRUE(WriteFileAtomic(other, "").ok());
    ASSERT_EQ(::rename(other.c_str(), path.c_str()), 0);
    const absl::Status replaced = (*lock)->Check();
    EXPECT_EQ(replaced.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(Message(replaced), expected);
  }
}

}  // namespace
}  // namespace xlnet
