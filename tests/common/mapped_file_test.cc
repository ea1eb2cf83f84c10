#include "common/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/file_util.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

TEST(MappedFileTest, MapsWholeFiles) {
  ::xlnet::testing::TempDir tmp;
  const std::string path = tmp.Join("a.bin");
  const std::string bytes("ab\0cd", 5);
  ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  EXPECT_EQ((*file)->size(), 5u);
  EXPECT_EQ((*file)->view(), bytes);
  EXPECT_EQ((*file)->bytes()[4], 'd');

  const std::string empty = tmp.Join("empty");
  ASSERT_TRUE(WriteFileAtomic(empty, "").ok());
  auto none = MappedFile::Open(empty);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)->size(), 0u);
  ASSERT_NE((*none)->data(), nullptr);
}

TEST(MappedFileTest, RefusesMissingSpecialAndOversizedFiles) {
  ::xlnet::testing::TempDir tmp;
  auto missing = MappedFile::Open(tmp.Join("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(tmp.Join("nope")),
            std::string::npos);

  const std::string fifo = tmp.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = MappedFile::Open(fifo);
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_EQ(from_fifo.status().message(),
            fifo + ": not a regular file (a FIFO)");
  EXPECT_FALSE(MappedFile::Open("/dev/zero").ok());
  EXPECT_FALSE(MappedFile::Open(tmp.path()).ok());

  const std::string path = tmp.Join("four");
  ASSERT_TRUE(WriteFileAtomic(path, "1234").ok());
  EXPECT_TRUE(MappedFile::Open(path, 4).ok());
  auto over = MappedFile::Open(path, 3);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            path + ": larger than the limit of 3 bytes");
}

}  // namespace
}  // namespace xlnet
