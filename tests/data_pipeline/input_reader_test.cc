// Corpus files streamed as lines (data_pipeline/input_reader.h): plain,
// gzip and zstd give the same lines; damaged compressed data, special files
// and over-long lines are handled with the file named.
#include "data_pipeline/input_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <string>
#include <vector>

#include "tests/data_pipeline/data_test_env.h"
#include "tests/test_util.h"

namespace xlnet::data::testing {

void WriteGzip(const std::string& path, const std::string& text, int members) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  // Several members concatenated (what `cat a.gz b.gz` gives).
  const size_t step = text.size() / members + 1;
  for (size_t at = 0; at < text.size(); at += step) {
    const std::string part = text.substr(at, step);
    ASSERT_EQ(gzwrite(f, part.data(), part.size()),
              static_cast<int>(part.size()));
    if (at + step < text.size()) {
      ASSERT_EQ(gzclose(f), Z_OK);
      f = gzopen(path.c_str(), "ab");
      ASSERT_NE(f, nullptr);
    }
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

void WriteZstd(const std::string& path, const std::string& text, int frames) {
  std::string out;
  const size_t step = text.size() / frames + 1;
  for (size_t at = 0; at < text.size(); at += step) {
    const std::string part = text.substr(at, step);
    std::string frame(ZSTD_compressBound(part.size()), '\0');
    const size_t n =
        ZSTD_compress(frame.data(), frame.size(), part.data(), part.size(), 3);
    ASSERT_FALSE(ZSTD_isError(n));
    out.append(frame.data(), n);
  }
  WriteAll(path, out);
}

namespace {

struct ReadResult {
  std::vector<std::string> lines;  // "<overlong N>" for over-long lines
  std::string error;
};

ReadResult ReadLines(const std::string& path, int64_t max_line_bytes) {
  ReadResult r;
  auto reader = LineReader::Open(path, max_line_bytes);
  if (!reader.ok()) {
    r.error = std::string(reader.status().message());
    return r;
  }
  Line line;
  while (true) {
    auto more = (*reader)->Next(&line);
    if (!more.ok()) {
      r.error = std::string(more.status().message());
      break;
    }
    if (!*more) break;
    EXPECT_EQ(line.number, static_cast<int64_t>(r.lines.size()) + 1);
    r.lines.push_back(line.overlong
                          ? "<overlong " + std::to_string(line.bytes) + ">"
                          : std::string(line.text));
  }
  return r;
}

TEST(InputReaderTest, KindsComeFromTheName) {
  EXPECT_EQ(KindOfInput("a.txt").compression, Compression::kNone);
  EXPECT_EQ(KindOfInput("a.txt").format, TextFormat::kPlain);
  EXPECT_EQ(KindOfInput("a.txt.gz").compression, Compression::kGzip);
  EXPECT_EQ(KindOfInput("a.jsonl.zst").compression, Compression::kZstd);
  EXPECT_EQ(KindOfInput("a.jsonl.zst").format, TextFormat::kJsonLines);
  EXPECT_EQ(KindOfInput("a.json").format, TextFormat::kJsonLines);
  EXPECT_EQ(KindOfInput("a.jsonl.txt").format, TextFormat::kPlain);
}

TEST(InputReaderTest, PlainGzipAndZstdGiveTheSameLines) {
  ::xlnet::testing::TempDir tmp;
  // Longer than the reader's block, with a long line across block borders
  // and no final newline.
  std::string text;
  for (int i = 0; i < 20000; ++i) {
    text += "line " + std::to_string(i) + (i % 7 == 0 ? "" : " text") + "\n";
    if (i == 9000) text += std::string(5000, 'x') + "\n\n";
  }
  text += "last line without newline";
  WriteAll(tmp.Join("a.txt"), text);
  WriteGzip(tmp.Join("a.txt.gz"), text, 3);
  WriteZstd(tmp.Join("a.txt.zst"), text, 3);
  const ReadResult plain = ReadLines(tmp.Join("a.txt"), 1 << 20);
  ASSERT_EQ(plain.error, "");
  ASSERT_EQ(plain.lines.size(), 20003u);
  EXPECT_EQ(plain.lines.back(), "last line without newline");
  EXPECT_EQ(plain.lines[9001], std::string(5000, 'x'));
  EXPECT_EQ(plain.lines[9002], "");
  for (const char* name : {"a.txt.gz", "a.txt.zst"}) {
    const ReadResult r = ReadLines(tmp.Join(name), 1 << 20);
    EXPECT_EQ(r.error, "") << name;
    EXPECT_EQ(r.lines, plain.lines) << name;
  }
  // Over-long lines are read past (memory stays bounded) and reported.
  const ReadResult small = ReadLines(tmp.Join("a.txt.zst"), 100);
  ASSERT_EQ(small.lines.size(), plain.lines.size());
  EXPECT_EQ(small.lines[9001], "<overlong 5000>");
  EXPECT_EQ(small.lines[9003], plain.lines[9003]);
}

// The total for progress lines: known only when every input is plain.
TEST(InputReaderTest, PlainInputBytesIsUnknownOnceOneIsCompressed) {
  ::xlnet::testing::TempDir tmp;
  WriteAll(tmp.Join("a.txt"), "12345\n");
  WriteAll(tmp.Join("b.jsonl"), "{\"text\": \"x\"}\n");
  WriteGzip(tmp.Join("c.txt.gz"), "12345\n", 1);
  EXPECT_EQ(PlainInputBytes({tmp.Join("a.txt"), tmp.Join("b.jsonl")}), 6 + 14);
  EXPECT_EQ(PlainInputBytes({tmp.Join("a.txt"), tmp.Join("c.txt.gz")}), 0);
  EXPECT_EQ(PlainInputBytes({tmp.Join("missing.txt")}), 0);
  EXPECT_EQ(PlainInputBytes({}), 0);
}

TEST(InputReaderTest, DamagedCompressedDataIsAnErrorNamingTheFile) {
  ::xlnet::testing::TempDir tmp;
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += "some text " + std::to_string(i) + "\n";
  WriteGzip(tmp.Join("a.gz"), text, 1);
  WriteZstd(tmp.Join("a.zst"), text, 1);
  for (const char* name : {"a.gz", "a.zst"}) {
    const std::string path = tmp.Join(name);
    const std::string bytes = ReadAll(path);
    WriteAll(path, bytes.substr(0, bytes.size() / 2));
    const ReadResult r = ReadLines(path, 1 << 20);
    EXPECT_NE(r.error.find(path), std::string::npos) << name << r.error;
    EXPECT_NE(r.error.find("truncated"), std::string::npos) << r.error;
  }
  WriteAll(tmp.Join("plain.gz"), "not compressed at all\n");
  const ReadResult wrong = ReadLines(tmp.Join("plain.gz"), 1 << 20);
  EXPECT_NE(wrong.error.find("not gzip data"), std::string::npos)
      << wrong.error;
  ASSERT_EQ(::mkfifo(tmp.Join("fifo.txt").c_str(), 0600), 0);
  const ReadResult fifo = ReadLines(tmp.Join("fifo.txt"), 1 << 20);
  EXPECT_NE(fifo.error.find("not a regular file"), std::string::npos)
      << fifo.error;
}

TEST(InputReaderTest, DecompressionBombsAreReadPastInBoundedLines) {
  ::xlnet::testing::TempDir tmp;
  // 16 MiB without a newline in a few kB, then a normal line.
  const std::string bomb = std::string(16 << 20, 'a') + "\nafter\n";
  WriteGzip(tmp.Join("bomb.gz"), bomb, 1);
  WriteZstd(tmp.Join("bomb.zst"), bomb, 1);
  for (const char* name : {"bomb.gz", "bomb.zst"}) {
    ASSERT_LT(ReadAll(tmp.Join(name)).size(), 128u << 10) << name;
    auto reader = LineReader::Open(tmp.Join(name), 1 << 16);
    ASSERT_TRUE(reader.ok()) << reader.status();
    Line line;
    auto more = (*reader)->Next(&line);
    ASSERT_TRUE(more.ok() && *more) << name;
    EXPECT_TRUE(line.overlong) << name;
    EXPECT_TRUE(line.text.empty()) << name;
    EXPECT_EQ(line.bytes, 16u << 20) << name;
    more = (*reader)->Next(&line);
    ASSERT_TRUE(more.ok() && *more) << name;
    EXPECT_EQ(line.text, "after") << name;
    EXPECT_EQ(line.number, 2) << name;
    more = (*reader)->Next(&line);
    ASSERT_TRUE(more.ok());
    EXPECT_FALSE(*more) << name;
  }
}

TEST(InputReaderTest, RecordTextNamesWhatIsWrong) {
  std::string text;
  ASSERT_TRUE(
      RecordText(R"({"id": 1, "text": "Hi there."})", "text", &text).ok());
  EXPECT_EQ(text, "Hi there.");
  EXPECT_NE(RecordText(R"({"id": 1})", "text", &text)
                .message()
                .find("no field 'text'"),
            std::string::npos);
  EXPECT_NE(RecordText(R"({"text": 5})", "text", &text)
                .message()
                .find("not a string"),
            std::string::npos);
  EXPECT_NE(RecordText("[1, 2]", "text", &text).message().find("object"),
            std::string::npos);
  EXPECT_NE(
      RecordText("{oops", "text", &text).message().find("not valid JSON"),
      std::string::npos);
  EXPECT_EQ(RecordText(R"({"text": "a", "text": "b"})", "text", &text)
                .message(),
            "JSON record: duplicate key 'text'");
}

// A wrong --json_key is named with the fields the file does have.
TEST(InputReaderTest, CheckJsonKeyPresentNamesTheKeysThereAre) {
  ::xlnet::testing::TempDir tmp;
  const std::string path = tmp.Join("docs.jsonl");
  WriteAll(path,
           "not json\n\n{\"title\": \"t\", \"body\": \"Hi.\"}\n"
           "{\"body\": \"Yo.\"}\n");
  const absl::Status wrong = CheckJsonKeyPresent(path, "text", 1 << 20);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message(),
            path +
                ": no JSON record has the field 'text' (--json_key); the "
                "first record's fields: body, title");
  EXPECT_TRUE(CheckJsonKeyPresent(path, "body", 1 << 20).ok());
  // A later record with the key is enough.
  EXPECT_TRUE(CheckJsonKeyPresent(path, "title", 1 << 20).ok());
  WriteAll(path, "plain text\n");
  EXPECT_NE(CheckJsonKeyPresent(path, "text", 1 << 20)
                .message()
                .find("no line is a JSON object"),
            std::string::npos);
  // RecordText's own message lists the record's fields too.
  std::string text;
  EXPECT_NE(RecordText(R"({"id": 1, "body": "x"})", "text", &text)
                .message()
                .find("its fields: body, id"),
            std::string::npos);
}

}  // namespace
}  // namespace xlnet::data::testing
