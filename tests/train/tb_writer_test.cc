// TensorBoard event files: CRC-32C, TFRecord framing, and the events read
// back by an independent reader (tests/train/read_tfevents.py).
#include "train/tb_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace xlnet {
namespace {

TEST(TbWriterTest, Crc32cKnownValues) {
  // RFC 3720 B.4 and the common check value of "123456789".
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(TbWriterTest, RecordFraming) {
  const std::string record = TfRecord("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(record.substr(12, 3), "abc");
  const uint32_t crc = Crc32c("abc");
  const uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  EXPECT_EQ(MaskedCrc32c("abc"), masked);
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) {
    stored = (stored << 8) | static_cast<unsigned char>(record[15 + i]);
  }
  EXPECT_EQ(stored, masked);
}

TEST(TbWriterTest, ScalarEventBytes) {
  // Event{wall_time: 0.5, step: 3, summary{value{tag: "a",
  // simple_value: 1.0}}}, encoded by hand.
  const std::string expected(
      "\x09\0\0\0\0\0\0\xe0\x3f"  // 1: double 0.5
      "\x10\x03"                  // 2: varint 3
      "\x2a\x0a"                  // 5: summary, 10 bytes
      "\x0a\x08"                  //   1: value, 8 bytes
      "\x0a\x01"                  //     1: tag, 1 byte
      "a"                         //
      "\x15\0\0\x80\x3f",         //     2: float 1.0
      23);
  EXPECT_EQ(ScalarEvent(0.5, 3, "a", 1.0f), expected);
}

TEST(TbWriterTest, IndependentReaderSeesScalarsAndText) {
  XLNET_PYTHON_PROTOBUF_OR_SKIP(python);
  testing::TempDir tmp;
  const std::string dir = tmp.Join("tb");
  const std::string yaml =
      "train:\n  lr: 0.001\n  name: \"\xc3\xa9t\xc3\xa9\"\n";
  {
    auto writer = TbWriter::Open(dir);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Text(0, "config", yaml).ok());
    ASSERT_TRUE((*writer)->Scalar(1, "train/loss", 2.5).ok());
    ASSERT_TRUE((*writer)->Scalar(1, "train/lr", 1e-4).ok());
    ASSERT_TRUE((*writer)->Scalar(300, "train/loss", -0.125).ok());
    ASSERT_TRUE((*writer)->Scalar(1LL << 40, "eval/loss", 7).ok());
  }
  // A second writer (a resumed run) opens a new file beside the first.
  {
    auto writer = TbWriter::Open(dir);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Scalar(301, "train/loss", 0.25).ok());
  }
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().rfind("events.out.tfevents.", 0),
              0u);
    ++files;
  }
  EXPECT_EQ(files, 2);

  const nlohmann::json events = testing::ReadTfEvents(python, dir);
  ASSERT_TRUE(events.is_array()) << events;
  ASSERT_EQ(events.size(), 8u);
  EXPECT_EQ(events[0]["file_version"], "brain.Event:2");
  EXPECT_GT(events[0]["wall_time"].get<double>(), 1.6e9);
  EXPECT_EQ(events[6]["file_version"], "brain.Event:2");
  const auto& text = events[1]["values"][0];
  EXPECT_EQ(text["tag"], "config");
  EXPECT_EQ(text["plugin"], "text");
  EXPECT_EQ(text["dtype"], 7);  // DT_STRING
  EXPECT_EQ(text["shape"], nlohmann::json::array({1}));
  EXPECT_EQ(text["text"], nlohmann::json::array({yaml}));
  using Points = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(testing::TfScalars(events, "train/loss"),
            (Points{{1, 2.5}, {300, -0.125}, {301, 0.25}}));
  EXPECT_EQ(testing::TfScalars(events, "train/lr"),
            (Points{{1, static_cast<double>(1e-4f)}}));
  EXPECT_EQ(testing::TfScalars(events, "eval/loss"),
            (Points{{1LL << 40, 7.0}}));
}

TEST(TbWriterTest, ReaderRejectsACorruptRecord) {
  XLNET_PYTHON_PROTOBUF_OR_SKIP(python);
  testing::TempDir tmp;
  std::string path;
  {
    auto writer = TbWriter::Open(tmp.path());
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Scalar(1, "train/loss", 2.5).ok());
    path = (*writer)->path();
  }
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  std::string corrupt = *bytes;
  corrupt[corrupt.size() - 6] ^= 1;  // inside the last record's data
  ASSERT_TRUE(WriteFileAtomic(path, corrupt).ok());
  const testing::CommandResult r = testing::RunCommand(
      python + " " + testing::SourcePath("tests/train/read_tfevents.py") + " " +
      path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bad data CRC"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace xlnet
