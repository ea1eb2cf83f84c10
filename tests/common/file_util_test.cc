#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "tests/test_util.h"

namespace xlnet {
namespace {

class FileUtilTest : public ::testing::Test {
 protected:
  // Writes a complete "model directory" with two files holding `tag`.
  absl::Status WriteModelDir(const std::string& path, const std::string& tag) {
    auto writer = AtomicDirWriter::Begin(path);
    if (!writer.ok()) return writer.status();
    absl::Status s = WriteFileAtomic(writer->Path("config.json"), tag);
    if (s.ok()) s = WriteFileAtomic(writer->Path("weights.bin"), tag + tag);
    if (s.ok()) s = writer->Commit();
    return s;
  }

  std::string Read(const std::string& path) {
    auto text = ReadFile(path);
    return text.ok() ? *text : "<missing>";
  }

  xlnet::testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST_F(FileUtilTest, WriteFileAtomicReplacesContents) {
  const std::string path = dir_ + "/a.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second").ok());
  EXPECT_EQ(Read(path), "second");
  EXPECT_EQ(*CleanStaleTemps(dir_), 0);
}

TEST_F(FileUtilTest, AtomicDirCreatesAndReplaces) {
  const std::string model = dir_ + "/runs/model";
  ASSERT_TRUE(WriteModelDir(model, "v1").ok());
  EXPECT_EQ(Read(model + "/config.json"), "v1");
  ASSERT_TRUE(WriteModelDir(model, "v2").ok());
  EXPECT_EQ(Read(model + "/config.json"), "v2");
  EXPECT_EQ(Read(model + "/weights.bin"), "v2v2");
  // Nothing left behind: the old directory was removed after the swap.
  EXPECT_EQ(*CleanStaleTemps(dir_ + "/runs"), 0);
}

TEST_F(FileUtilTest, UncommittedWriterLeavesOldDirectory) {
  const std::string model = dir_ + "/model";
  ASSERT_TRUE(WriteModelDir(model, "old").ok());
  {
    auto writer = AtomicDirWriter::Begin(model);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(WriteFileAtomic(writer->Path("config.json"), "new").ok());
    // Destroyed without Commit (an error path): temp removed, old kept.
  }
  EXPECT_EQ(Read(model + "/config.json"), "old");
  EXPECT_EQ(*CleanStaleTemps(dir_), 0);
}

// A writer process killed in the middle of writing (simulated crash: the
// child _exit()s with files half written) leaves the old directory intact
// and loadable; the leftovers are hidden and cleaned up later.
TEST_F(FileUtilTest, CrashMidWriteKeepsOldDirectory) {
  const std::string model = dir_ + "/model";
  ASSERT_TRUE(WriteModelDir(model, "old").ok());
  for (int crash_point = 0; crash_point < 3; ++crash_point) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto writer = AtomicDirWriter::Begin(model);
      if (!writer.ok()) _exit(3);
      if (crash_point >= 1) {
        std::ofstream(writer->Path("config.json")) << "new";
      }
      if (crash_point >= 2) {
        // Half of the second file, then the crash.
        std::ofstream(writer->Path("weights.bin")) << "ne";
      }
      _exit(9);  // No destructor, no commit: like SIGKILL.
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_EQ(WEXITSTATUS(status), 9);
    EXPECT_EQ(Read(model + "/config.json"), "old") << crash_point;
    EXPECT_EQ(Read(model + "/weights.bin"), "oldold") << crash_point;
  }
  // The crashed writers left hidden temp directories; cleanup finds them.
  auto removed = CleanStaleTemps(dir_);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 3);
  EXPECT_EQ(Read(model + "/config.json"), "old");
}

TEST_F(FileUtilTest, CrashMidFileWriteKeepsOldFile) {
  const std::string path = dir_ + "/state.json";
  ASSERT_TRUE(WriteFileAtomic(path, "complete").ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    WriteFileAtomicWith(path, [](int fd, const std::string&) -> absl::Status {
      ssize_t ignored = ::write(fd, "parti", 5);
      (void)ignored;
      _exit(9);
    }).IgnoreError();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(WEXITSTATUS(status), 9);
  EXPECT_EQ(Read(path), "complete");
}

TEST_F(FileUtilTest, ErrorsNamePaths) {
  auto missing = ReadFile(dir_ + "/nope.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.txt"), std::string::npos);
  auto bad = WriteFileAtomic(dir_ + "/no/such/dir/file", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/no/such/dir"), std::string::npos);
}

TEST_F(FileUtilTest, ReadFileRefusesSpecialFilesAndHonoursTheBound) {
  const std::string path = dir_ + "/ten.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "0123456789").ok());
  EXPECT_EQ(*ReadFile(path, 10), "0123456789");
  auto over = ReadFile(path, 9);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            path + ": larger than the limit of 9 bytes");

  // A FIFO would block and /dev/zero never ends: both are refused at once.
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = ReadFile(fifo);
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_EQ(from_fifo.status().message(),
            fifo + ": not a regular file (a FIFO)");
  auto zero = ReadFile("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(),
            "/dev/zero: not a regular file (a character device)");
  auto dir = ReadFile(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("a directory"), std::string::npos);

  // Files under /proc report size 0 but have contents.
  auto status = ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_NE(status->find("Pid:"), std::string::npos);
  EXPECT_FALSE(ReadFile("/proc/self/status", 4).ok());
}

}  // namespace
}  // namespace xlnet
