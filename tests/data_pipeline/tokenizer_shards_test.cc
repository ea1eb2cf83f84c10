// Tokenizer (special ids, text rules, offsets) and shards (determinism,
// resume, malformed input, corpus view).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/file_util.h"
#include "common/strings.h"
#include "data_pipeline/data_commands.h"
#include "data_pipeline/sentence_splitter.h"
#include "data_pipeline/sentencepiece_bridge.h"
#include "data_pipeline/shard_reader.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/text.h"
#include "data_pipeline/token_bytes.h"
#include "data_pipeline/tokenizer.h"
#include "tests/data_pipeline/data_test_env.h"

namespace xlnet::data::testing {

std::string SamplePath() {
  return std::string(XLNET_SOURCE_DIR) + "/data/sample/brown_sample.txt";
}

std::string ReadAll(const std::string& path) {
  auto contents = ReadFile(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  return contents.value_or("");
}

void WriteAll(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

namespace {

struct Env {
  std::string dir;        // this process's scratch directory
  std::string tokenizer;  // shared fixture, cached in the build tree
  std::string data;
  ~Env() {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

// CTest runs every test in its own process; the tokenizer (about 2 s to
// train) and the shards are built once into the build tree and reused,
// under a file lock. A cached tokenizer that no longer loads is retrained;
// PrepareShards itself redoes any shard that is stale.
Env& GetEnv() {
  static Env env;
  static std::once_flag once;
  std::call_once(once, [] {
    char tmpl[] = "/tmp/xlnet_data_test.XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (dir == nullptr) std::abort();
    env.dir = dir;
    const std::string cache =
        std::string(XLNET_BINARY_DIR) + "/tests/data_pipeline_fixture";
    std::filesystem::create_directories(cache);
    const int lock = ::open((cache + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) std::abort();
    env.tokenizer = cache + "/spiece.model";
    // Trained again when this binary is newer than the cached file: a
    // rebuilt binary may train another tokenizer (e.g. one that records its
    // text rules), which the tests must see.
    struct stat cached, self;
    const bool stale = ::stat(env.tokenizer.c_str(), &cached) != 0 ||
                       ::stat("/proc/self/exe", &self) != 0 ||
                       cached.st_mtim.tv_sec < self.st_mtim.tv_sec ||
                       (cached.st_mtim.tv_sec == self.st_mtim.tv_sec &&
                        cached.st_mtim.tv_nsec < self.st_mtim.tv_nsec);
    if (stale || !Tokenizer::Load(env.tokenizer).ok()) {
      TokenizerTrainOptions o;
      o.inputs = {SamplePath()};
      o.vocab_size = 1000;
      auto bytes = TrainTokenizer(o);
      if (!bytes.ok()) {
        std::fprintf(stderr, "tokenizer: %s\n",
                     bytes.status().ToString().c_str());
        std::abort();
      }
      if (!WriteFileAtomic(env.tokenizer, *bytes).ok()) std::abort();
    }
    PrepareOptions p;
    p.inputs = {SamplePath()};
    p.tokenizer_path = env.tokenizer;
    p.out_dir = cache + "/data";
    p.workers = 2;
    p.shard_bytes = 60000;
    p.progress = false;
    auto report = PrepareShards(p);
    if (!report.ok()) {
      std::fprintf(stderr, "prepare: %s\n", report.status().ToString().c_str());
      std::abort();
    }
    ::flock(lock, LOCK_UN);
    ::close(lock);
    env.data = p.out_dir;
  });
  return env;
}

}  // namespace

const std::string& TempDir() { return GetEnv().dir; }
const std::string& TokenizerPath() { return GetEnv().tokenizer; }
const std::string& DataDir() { return GetEnv().data; }

std::vector<std::string> DirFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::unique_ptr<Tokenizer> LoadTok(const TextRules& rules = {}) {
  auto tok = Tokenizer::Load(TokenizerPath(), rules);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

std::string StripUnderline(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
      i += 3;
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

std::vector<std::string> SampleLines(size_t max_lines) {
  std::ifstream in(SamplePath());
  std::vector<std::string> lines;
  std::string line;
  while (lines.size() < max_lines && std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// ---------------------------------------------------------------------------
// Tokenizer

TEST(TokenizerTest, SpecialPiecesSitAtXlnetIds) {
  auto tok = LoadTok();
  EXPECT_EQ(tok->vocab_size(), 1000);
  const std::vector<std::pair<std::string, int>> expected = {
      {"<unk>", kUnkId}, {"<s>", kBosId},    {"</s>", kEosId},
      {"<cls>", kClsId}, {"<sep>", kSepId},  {"<pad>", kPadId},
      {"<mask>", kMaskId}, {"<eod>", kEodId}, {"<eop>", kEopId}};
  for (const auto& [piece, id] : expected) {
    EXPECT_EQ(tok->IdToPiece(id), piece);
    EXPECT_EQ(tok->PieceToId(piece), id);
  }
  // The official user-defined symbols follow, then "▁" as in xlnet's vocab.
  EXPECT_EQ(tok->IdToPiece(9), ".");
  EXPECT_EQ(tok->IdToPiece(12), "\"");
  EXPECT_EQ(tok->IdToPiece(16), "\xE2\x82\xAC");
  EXPECT_EQ(tok->IdToPiece(17), "\xE2\x96\x81");
  // Control symbols never come out of text.
  auto enc = tok->Encode("a <cls> b <sep>");
  ASSERT_TRUE(enc.ok());
  for (int32_t id : enc->ids) {
    EXPECT_NE(id, kClsId);
    EXPECT_NE(id, kSepId);
  }
}

TEST(TokenizerTest, TrainingIsDeterministic) {
  TokenizerTrainOptions o;
  const std::string small = TempDir() + "/small.txt";
  std::string text;
  for (const std::string& line : SampleLines(400)) text += line + "\n";
  WriteAll(small, text);
  o.inputs = {small};
  o.vocab_size = 300;
  auto a = TrainTokenizer(o);
  auto b = TrainTokenizer(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
  // A freshly trained model (the fixture's may be cached) has XLNet's ids.
  auto tok = Tokenizer::FromBytes(*a, "fresh.model");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 300);
  for (int id = 0; id < 9; ++id) EXPECT_EQ((*tok)->IdToPiece(id), SpecialPieces()[id]);
  EXPECT_EQ((*tok)->IdToPiece(12), "\"");
  EXPECT_EQ((*tok)->IdToPiece(17), "\xE2\x96\x81");
}

// The tokenizer reads what prepare reads: a gzip file gives the sample of
// its plain text, a JSON Lines file the sentences of its records' text.
TEST(TokenizerTest, CompressedAndJsonLinesInputsGiveTheirSentences) {
  const std::vector<std::string> lines = SampleLines(300);
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  const std::string plain = TempDir() + "/inputs_plain.txt";
  WriteAll(plain, text);
  WriteGzip(plain + ".gz", text, 2);
  TokenizerTrainOptions o;
  o.inputs = {plain};
  auto from_plain = SampleTokenizerSentences(o);
  ASSERT_TRUE(from_plain.ok()) << from_plain.status();
  o.inputs = {plain + ".gz"};
  auto from_gzip = SampleTokenizerSentences(o);
  ASSERT_TRUE(from_gzip.ok()) << from_gzip.status();
  EXPECT_EQ(from_gzip->sentences, from_plain->sentences);
  EXPECT_EQ(from_gzip->sentences.size(), lines.size());

  // Documents of 10 lines a record under "body", and one record without it.
  std::string jsonl = "{\"title\": \"no body\"}\n";
  std::vector<std::string> expected;
  for (size_t first = 0; first < lines.size(); first += 10) {
    std::string doc;
    for (size_t i = first; i < std::min(lines.size(), first + 10); ++i) {
      doc += (doc.empty() ? "" : "\n") + lines[i];
    }
    jsonl += nlohmann::json{{"body", doc}}.dump() + "\n";
    std::vector<std::string_view> sentences;
    SplitSentences(doc, &sentences);
    for (std::string_view sentence : sentences) {
      std::string s = PreprocessText(sentence, TextRules{}, false).text;
      if (!s.empty()) expected.push_back(s);
    }
  }
  const std::string records = TempDir() + "/inputs.jsonl";
  WriteAll(records, jsonl);
  o.inputs = {records};
  o.json_key = "body";
  auto from_json = SampleTokenizerSentences(o);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(from_json->sentences, expected);
  EXPECT_GT(expected.size(), lines.size());  // lines split further
  EXPECT_EQ(from_json->stats.skipped_records, 1);
  // A key no record has is an error naming the file and the fields.
  o.json_key = "text";
  auto wrong_key = SampleTokenizerSentences(o);
  ASSERT_FALSE(wrong_key.ok());
  EXPECT_NE(wrong_key.status().message().find(records), std::string::npos)
      << wrong_key.status();
  EXPECT_NE(wrong_key.status().message().find("fields: title"),
            std::string::npos)
      << wrong_key.status();
}

// With a progress callback, training reports the pass over the inputs and
// SentencePiece's phases with their counts, and trains the same model as
// without one (capturing SentencePiece's log changes nothing else).
TEST(TokenizerTest, ProgressReportsEachPhaseWithCounts) {
  const std::string three = TempDir() + "/progress.txt";
  std::string text;
  const std::vector<std::string> lines = SampleLines(100000);
  for (int copy = 0; copy < 3; ++copy) {
    for (const std::string& line : lines) text += line + "\n";
  }
  WriteAll(three, text);
  TokenizerTrainOptions o;
  o.inputs = {three};
  o.vocab_size = 1000;
  auto quiet = TrainTokenizer(o);
  ASSERT_TRUE(quiet.ok()) << quiet.status();

  std::vector<std::string> progress;
  o.progress = [&](const std::string& line) { progress.push_back(line); };
  o.progress_seconds = 0;
  auto reported = TrainTokenizer(o);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(*reported, *quiet);

  std::string all;
  for (const std::string& line : progress) all += line + "\n";
  SCOPED_TRACE(all);
  auto find = [&](const std::string& prefix) -> std::string {
    for (const std::string& line : progress) {
      if (line.rfind(prefix, 0) == 0) return line;
    }
    return "";
  };
  // The input pass: bytes of the file's size, with percent and ETA.
  const std::string reading = find("reading the inputs: ");
  EXPECT_NE(reading.find(" of " + HumanBytes(static_cast<double>(text.size()))),
            std::string::npos);
  EXPECT_NE(reading.find("%), "), std::string::npos);
  EXPECT_NE(reading.find(", ETA "), std::string::npos);
  EXPECT_NE(reading.find(" sentences"), std::string::npos);
  // SentencePiece's phases, in order, with counts.
  int64_t sentences = 0;
  for (const std::string& line : lines) sentences += line.empty() ? 0 : 1;
  const std::vector<std::string> phases = {
      "training SentencePiece (unigram, 1,000 pieces, 1 thread) on " +
          WithCommas(3 * sentences) + " sentences",
      "loaded " + WithCommas(3 * sentences) + " sentences into SentencePiece",
      "alphabet: ",
      "seed pieces: building the suffix array",
      "seed pieces: ",
      "EM round 1 of ",
      "EM round 2 of "};
  size_t at = 0;
  for (const std::string& phase : phases) {
    while (at < progress.size() && progress[at].rfind(phase, 0) != 0) ++at;
    EXPECT_LT(at, progress.size()) << "no \"" << phase << "\" in order";
  }
  // The last EM round is at the size SentencePiece stops at (1.1 x the
  // vocabulary), and is the round the first one predicted.
  std::string last_em;
  for (const std::string& line : progress) {
    if (line.rfind("EM round ", 0) == 0) last_em = line;
  }
  EXPECT_NE(last_em.find(": 1,100 pieces (target 1,000)"), std::string::npos)
      << last_em;
  int round = 0, of = 0;
  ASSERT_EQ(std::sscanf(last_em.c_str(), "EM round %d of %d", &round, &of), 2)
      << last_em;
  // The first round's estimate of the rounds is within one of the truth.
  EXPECT_NEAR(round, of, 1);
  // Nothing SentencePiece said was passed on raw.
  for (const std::string& line : progress) {
    EXPECT_EQ(line.find("LOG("), std::string::npos) << line;
  }
}

// A vocabulary larger than a small corpus allows is an error that says the
// largest size that fits, not SentencePiece's raw message.
TEST(TokenizerTest, TooLargeAVocabularySaysTheLargestThatFits) {
  EXPECT_EQ(TokenizerTrainingError(
                "Vocabulary size too high (32000). Please set it to a value "
                "<= 1234.",
                32000)
                .message(),
            "vocab_size 32000 (--vocab_size) is too large for this corpus: "
            "it has room for at most 1234 pieces; rerun with --vocab_size "
            "1234 or less, or train on more text");
  EXPECT_NE(TokenizerTrainingError("Vocabulary size is too high (500).", 500)
                .message()
                .find("lower --vocab_size"),
            std::string::npos);
  EXPECT_EQ(TokenizerTrainingError("other trouble", 500).message(),
            "SentencePiece training failed: other trouble");
  // The real thing, on 400 lines.
  TokenizerTrainOptions o;
  const std::string small = TempDir() + "/small_vocab.txt";
  std::string text;
  for (const std::string& line : SampleLines(400)) text += line + "\n";
  WriteAll(small, text);
  o.inputs = {small};
  o.vocab_size = 32000;
  auto bytes = TrainTokenizer(o);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bytes.status().message().find("has room for at most "),
            std::string::npos)
      << bytes.status();
}

// The reservoir keeps every sentence, in order, when they fit; otherwise a
// seeded uniform sample of exactly max_sentences of them.
TEST(TokenizerTest, SentenceSampleIsUniformSeededAndBounded) {
  const std::string path = TempDir() + "/numbered.txt";
  const int n = 4000;
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "line " + std::to_string(i) + "\n";
    if (i % 10 == 9) text += "\n";  // blank lines are not sentences
  }
  WriteAll(path, text);
  TokenizerTrainOptions o;
  o.inputs = {path};
  auto all = SampleTokenizerSentences(o);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->sentences.size(), static_cast<size_t>(n));
  EXPECT_EQ(all->sentences[0], "line 0");
  EXPECT_EQ(all->sentences[n - 1], "line " + std::to_string(n - 1));
  EXPECT_EQ(all->stats.sentences_seen, n);
  int64_t bytes = 0;
  for (const auto& s : all->sentences) bytes += static_cast<int64_t>(s.size());
  EXPECT_EQ(all->stats.sample_bytes, bytes);

  o.max_sentences = n / 4;
  double mean_of_means = 0;
  const int seeds = 20;
  for (int seed = 0; seed < seeds; ++seed) {
    o.seed = static_cast<uint32_t>(seed);
    auto a = SampleTokenizerSentences(o);
    auto b = SampleTokenizerSentences(o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->sentences, b->sentences);  // same seed, same sample
    ASSERT_EQ(a->sentences.size(), static_cast<size_t>(n / 4));
    EXPECT_EQ(a->stats.sentences, n / 4);
    EXPECT_EQ(a->stats.sentences_seen, n);
    std::set<std::string> distinct(a->sentences.begin(), a->sentences.end());
    EXPECT_EQ(distinct.size(), a->sentences.size());  // without replacement
    int64_t kept_bytes = 0;
    double mean = 0;
    for (const auto& s : a->sentences) {
      kept_bytes += static_cast<int64_t>(s.size());
      mean += std::stod(s.substr(5));
    }
    EXPECT_EQ(a->stats.sample_bytes, kept_bytes);
    mean_of_means += mean / static_cast<double>(a->sentences.size()) / seeds;
  }
  // Uniform over 0..n-1: each sample's mean index has sd ~ 0.25 n / sqrt(k)
  // ~ 31; the mean of 20 samples ~ 7. A sampler that favoured the start or
  // end (e.g. first k lines) would be off by ~1500.
  EXPECT_NEAR(mean_of_means, (n - 1) / 2.0, 40.0);
  o.seed = 1;
  auto c = SampleTokenizerSentences(o);
  o.seed = 2;
  auto d = SampleTokenizerSentences(o);
  EXPECT_NE(c->sentences, d->sentences);

  o.max_sentences = 0;
  EXPECT_FALSE(SampleTokenizerSentences(o).ok());
}

// The memory estimate is the measured fit (data_pipeline/README.md): it
// predicts the 9.5 GB the issue reported for a 400 MB, 4.5M-sentence corpus
// within 10%, and it grows with the sample, not the input.
TEST(TokenizerTest, MemoryEstimateFollowsTheSample) {
  const double gb = EstimateTokenizerTrainingBytes(400'000'000, 4'500'000) / 1e9;
  EXPECT_NEAR(gb, 9.5, 0.95);
  EXPECT_LT(EstimateTokenizerTrainingBytes(1'000'000, 10'000),
            EstimateTokenizerTrainingBytes(2'000'000, 10'000));
  EXPECT_LT(EstimateTokenizerTrainingBytes(1'000'000, 10'000),
            EstimateTokenizerTrainingBytes(1'000'000, 20'000));
}

// A sample estimated above --max_memory_mb is refused before training, with
// the flag to lower; nothing is written.
TEST(TokenizerTest, SampleAboveTheMemoryLimitIsRefused) {
  const std::string input = TempDir() + "/limit.txt";
  std::string text;
  for (const std::string& line : SampleLines(400)) text += line + "\n";
  WriteAll(input, text);
  TokenizerTrainOptions o;
  o.inputs = {input};
  o.vocab_size = 300;
  o.memory_limit_bytes = 100 << 20;  // below the 174 MiB base
  const std::string out = TempDir() + "/limit.model";
  std::ostringstream log;
  const absl::Status s = TrainTokenizerFile(o, out, log);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("lower --max_sentences"), std::string::npos) << s;
  EXPECT_NE(log.str().find("training needs about"), std::string::npos);
  EXPECT_FALSE(PathExists(out));
  o.ignore_memory_estimate = true;
  std::ostringstream log2;
  ASSERT_TRUE(TrainTokenizerFile(o, out, log2).ok());
  EXPECT_TRUE(PathExists(out));
  // --out's folder is made, as the other tools make theirs.
  const std::string nested = TempDir() + "/new/folder/nested.model";
  std::ostringstream log3;
  ASSERT_TRUE(TrainTokenizerFile(o, nested, log3).ok()) << log3.str();
  EXPECT_TRUE(PathExists(nested));
}

TEST(TokenizerTest, RefusesModelWithOtherSpecialIds) {
  // A model with <sep> before <cls> (ids 3 and 4 swapped).
  std::vector<std::string> lines = SampleLines(400);
  size_t next = 0;
  spm::BridgeTrainOptions o;
  o.next_sentence = [&](std::string* s) {
    if (next >= lines.size()) return false;
    *s = lines[next++];
    return true;
  };
  o.vocab_size = 300;
  o.control_symbols = {"<sep>", "<cls>", "<pad>", "<mask>", "<eod>"};
  o.user_defined_symbols = {"<eop>"};
  std::string bytes;
  ASSERT_EQ(spm::Train(o, &bytes), "");
  auto tok = Tokenizer::FromBytes(bytes, "other.model");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(tok.status().message());
  EXPECT_NE(msg.find("other.model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<cls> has id 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs id 3"), std::string::npos) << msg;

  auto garbage = Tokenizer::FromBytes("not a model", "junk.model");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(std::string(garbage.status().message()).find("junk.model"),
            std::string::npos);
  EXPECT_FALSE(Tokenizer::Load(TempDir() + "/missing.model").ok());
}

TEST(TokenizerTest, TokenTextBytesAddUpToTheNormalisedText) {
  auto tok = LoadTok();
  const std::vector<int32_t> bytes = TokenTextBytes(*tok);
  ASSERT_EQ(static_cast<int>(bytes.size()), tok->vocab_size());
  EXPECT_EQ(bytes[kUnkId], 1);
  for (int32_t id = kBosId; id <= kEopId; ++id) EXPECT_EQ(bytes[id], 0);
  // Each line's pieces stand for its normalised text plus the one space
  // (the line break) its first piece's word mark carries.
  int checked = 0;
  for (const std::string& line : SampleLines(300)) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->EncodeIds(line, &ids).ok());
    int64_t sum = 0;
    bool unk = false;
    for (int32_t id : ids) {
      sum += bytes[id];
      unk |= id == kUnkId;
    }
    if (unk) continue;
    const std::string text = PreprocessText(line, tok->rules(), false).text;
    EXPECT_EQ(sum, static_cast<int64_t>(text.size()) + 1) << line;
    ++checked;
  }
  EXPECT_GT(checked, 250);
}

TEST(TokenizerTest, PreprocessTextFollowsXlnetRules) {
  auto run = [](const std::string& s, TextRules r = {}) {
    return PreprocessText(s, r, false).text;
  };
  EXPECT_EQ(run("  Hello\t\n  world \r\n"), "Hello world");
  EXPECT_EQ(run("a\xC2\xA0\xE3\x80\x80" "b"), "a b");  // NBSP + ideographic space
  EXPECT_EQ(run("He said ``hi'' and `ok'"), "He said \"hi\" and `ok'");
  EXPECT_EQ(run("caf\xC3\xA9 na\xC3\xAFve"), "cafe naive");
  EXPECT_EQ(run("caf\xC3\xA9", TextRules{false, true}), "caf\xC3\xA9");
  EXPECT_EQ(run("\xEF\xAC\x81" "ne \xEF\xBC\xA1"), "fine A");  // ligature, fullwidth
  EXPECT_EQ(run("\xC3\x80" "B \xC3\x89t\xC3\xA9", TextRules{true, false}), "ab ete");
  EXPECT_EQ(run("\xC3\x89T\xC3\x89", TextRules{true, true}), "\xC3\xA9t\xC3\xA9");
  EXPECT_EQ(run(""), "");
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));
  EXPECT_FALSE(IsValidUtf8("caf\xC3"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
}

TEST(TokenizerTest, OffsetsMapBackToOriginalText) {
  auto tok = LoadTok();
  std::vector<std::string> texts = SampleLines(300);
  // XLNET_OFFSETS_CORPUS=FILE checks every line of a bigger corpus too.
  if (const char* extra = std::getenv("XLNET_OFFSETS_CORPUS")) {
    std::ifstream in(extra);
    std::string line;
    while (std::getline(in, line)) {
      if (IsValidUtf8(line)) texts.push_back(line);
    }
  }
  texts.push_back("  The ``quick''   brown fox, 1,000,000 caf\xC3\xA9s \xE2\x80\x93 \xC2\xA3" "5!  ");
  texts.push_back("Na\xC3\xAFve r\xC3\xA9sum\xC3\xA9: 12,3 and 4,56, ok");
  for (const std::string& text : texts) {
    auto enc = tok->Encode(text);
    ASSERT_TRUE(enc.ok()) << enc.status();
    ASSERT_EQ(enc->ids.size(), enc->pieces.size());
    int64_t prev_end = 0;
    for (size_t k = 0; k < enc->pieces.size(); ++k) {
      const int64_t b = enc->begin[k];
      const int64_t e = enc->end[k];
      ASSERT_LE(prev_end, b) << text;
      ASSERT_LE(b, e);
      ASSERT_LE(e, static_cast<int64_t>(text.size()));
      prev_end = e;
      // The original characters, run through the text rules, are the piece.
      const std::string surface = text.substr(b, e - b);
      const std::string expected = StripUnderline(enc->pieces[k]);
      EXPECT_EQ(PreprocessText(surface, {}, false).text, expected)
          << "piece " << k << " '" << enc->pieces[k] << "' of: " << text;
      // Code-point offsets select the same characters.
      int64_t cp = 0, cb = -1, ce = -1;
      for (size_t i = 0; i <= text.size(); ++i) {
        const bool start = i == text.size() ||
                           (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
        if (!start) continue;
        if (static_cast<int64_t>(i) == b) cb = cp;
        if (static_cast<int64_t>(i) == e) ce = cp;
        ++cp;
      }
      EXPECT_EQ(enc->char_begin[k], cb);
      EXPECT_EQ(enc->char_end[k], ce);
    }
  }
  EXPECT_EQ(tok->Encode("bad \xFF byte").status().code(),
            absl::StatusCode::kInvalidArgument);
  // `` becomes the user-defined piece ", whose range is the two backquotes.
  auto enc = tok->Encode("The ``quick'' fox");
  ASSERT_TRUE(enc.ok());
  bool found = false;
  for (size_t k = 0; k < enc->pieces.size(); ++k) {
    if (enc->pieces[k] == "\"" && enc->begin[k] == 4) {
      EXPECT_EQ(enc->end[k], 6);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(TokenizerTest, DigitCommaPiecesAreSplit) {
  auto tok = LoadTok();
  for (const std::string& text :
       {std::string("In 1961, 1962, and 1963, prices rose 5,000, 6,000, 7,"),
        std::string("a9, b99, 1234567,")}) {
    auto enc = tok->Encode(text);
    ASSERT_TRUE(enc.ok());
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->EncodeIds(text, &ids).ok());
    EXPECT_EQ(ids, enc->ids);
    for (const std::string& piece : enc->pieces) {
      if (piece.size() >= 2 && piece.back() == ',') {
        EXPECT_FALSE(piece[piece.size() - 2] >= '0' &&
                     piece[piece.size() - 2] <= '9')
            << "digit-comma piece survived: " << piece;
      }
    }
  }
}

TEST(TokenizerTest, DigitCommaReencodingMatchesOfficialEncodePieces) {
  // A corpus where SentencePiece learns pieces like "▁12," so the rule fires.
  const std::string path = TempDir() + "/digits.txt";
  std::string text;
  for (const std::string& line : SampleLines(200)) text += line + "\n";
  for (int i = 0; i < 400; ++i) {
    text += "In 1961, 12, 345, and 6789, the counts 12, 345, rose by 12,345 units.\n";
  }
  WriteAll(path, text);
  TokenizerTrainOptions o;
  o.inputs = {path};
  o.vocab_size = 200;
  auto bytes = TrainTokenizer(o);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto tok = Tokenizer::FromBytes(*bytes, "digits.model");
  ASSERT_TRUE(tok.ok()) << tok.status();
  spm::BridgeProcessor raw;
  ASSERT_EQ(raw.LoadFromBytes(*bytes), "");
  const std::string input = "In 1961, 12, 345, and 6789, x12,";
  std::vector<std::string> pieces;
  ASSERT_EQ(raw.EncodePieces(input, &pieces), "");
  // The official encode_pieces, written out.
  std::vector<std::string> expected;
  bool fired = false;
  for (const std::string& piece : pieces) {
    if (piece.size() > 1 && piece.back() == ',' &&
        std::isdigit(static_cast<unsigned char>(piece[piece.size() - 2]))) {
      fired = true;
      std::vector<std::string> cur;
      ASSERT_EQ(raw.EncodePieces(StripUnderline(piece.substr(0, piece.size() - 1)), &cur), "");
      const bool had = piece.rfind("\xE2\x96\x81", 0) == 0;
      if (!had && !cur.empty() && cur[0].rfind("\xE2\x96\x81", 0) == 0) {
        if (cur[0].size() == 3) {
          cur.erase(cur.begin());
        } else {
          cur[0] = cur[0].substr(3);
        }
      }
      cur.push_back(",");
      expected.insert(expected.end(), cur.begin(), cur.end());
    } else {
      expected.push_back(piece);
    }
  }
  ASSERT_TRUE(fired) << "no digit-comma piece learned; the test needs one";
  auto enc = (*tok)->Encode(input);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->pieces, expected);
  for (size_t k = 0; k < enc->pieces.size(); ++k) {
    if (enc->pieces[k] == ",") {
      EXPECT_EQ(input.substr(enc->begin[k], enc->end[k] - enc->begin[k]), ",");
    }
  }
}

// ---------------------------------------------------------------------------
// Shards

PrepareOptions SampleOptions(const std::string& out, int workers) {
  PrepareOptions p;
  p.inputs = {SamplePath()};
  p.tokenizer_path = TokenizerPath();
  p.out_dir = out;
  p.workers = workers;
  p.shard_bytes = 60000;
  p.progress = false;
  return p;
}

TEST(ShardsTest, ByteIdenticalForAnyWorkerCount) {
  const std::string one = TempDir() + "/w1";
  const std::string three = TempDir() + "/w3";
  auto r1 = PrepareShards(SampleOptions(one, 1));
  auto r3 = PrepareShards(SampleOptions(three, 3));
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_GE(r1->shards, 4);
  EXPECT_EQ(r1->tokens, r3->tokens);
  EXPECT_EQ(r1->docs, 25);
  const auto files = DirFiles(one);
  ASSERT_EQ(files, DirFiles(three));
  for (const std::string& f : files) {
    EXPECT_EQ(ReadAll(one + "/" + f), ReadAll(three + "/" + f)) << f;
  }
  // The shared fixture (2 workers) agrees too.
  for (const std::string& f : files) {
    EXPECT_EQ(ReadAll(one + "/" + f), ReadAll(DataDir() + "/" + f)) << f;
  }
}

TEST(ShardsTest, RerunSkipsFinishedShards) {
  const std::string dir = TempDir() + "/rerun";
  auto first = PrepareShards(SampleOptions(dir, 2));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->shards_skipped, 0);
  const std::string manifest = ReadAll(dir + "/manifest.json");
  auto again = PrepareShards(SampleOptions(dir, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->shards_skipped, again->shards);
  EXPECT_EQ(again->tokens, first->tokens);
  EXPECT_EQ(ReadAll(dir + "/manifest.json"), manifest);
  // A damaged shard is redone, the others kept.
  std::string bytes = ReadAll(dir + "/shard-00001.bin");
  bytes[200] ^= 0x55;
  WriteAll(dir + "/shard-00001.bin", bytes);
  auto repaired = PrepareShards(SampleOptions(dir, 2));
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired->shards_skipped, repaired->shards - 1);
  EXPECT_EQ(ReadAll(dir + "/manifest.json"), manifest);
}

TEST(ShardsTest, MalformedInputIsCountedOrRejected) {
  const std::string dir = TempDir() + "/bad";
  std::filesystem::create_directories(dir);
  const std::string bad = dir + "/bad.txt";
  WriteAll(bad, "Good first line.\nBroken \xFF\xFE line.\n" +
                    std::string(300, 'x') + "\nLast good line.\n\nNext doc.\n");
  WriteAll(dir + "/empty.txt", "");
  PrepareOptions p;
  p.inputs = {bad, dir + "/empty.txt"};
  p.tokenizer_path = TokenizerPath();
  p.out_dir = dir + "/out";
  p.max_line_bytes = 200;
  p.progress = false;
  auto report = PrepareShards(p);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->invalid_utf8_lines, 1);
  EXPECT_EQ(report->overlong_lines, 1);
  EXPECT_EQ(report->empty_files, 1);
  EXPECT_EQ(report->docs, 2);

  p.strict = true;
  auto strict = PrepareShards(p);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(std::string(strict.status().message()).find(bad + ":2: invalid UTF-8"),
            std::string::npos)
      << strict.status();
  p.inputs = {dir + "/empty.txt"};
  auto empty = PrepareShards(p);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(std::string(empty.status().message()).find("empty"), std::string::npos);
  p.inputs = {dir + "/nothing-*.txt"};
  EXPECT_EQ(PrepareShards(p).status().code(), absl::StatusCode::kNotFound);
}

TEST(ShardsTest, ShardContentsFollowTheOfficialLayout) {
  auto set = ShardSet::Open(DataDir(), /*verify=*/true);
  ASSERT_TRUE(set.ok()) << set.status();
  auto tok = LoadTok();
  // Re-tokenize the sample line by line and compare with the shards.
  std::vector<int32_t> expected;
  std::vector<uint8_t> flags;
  std::ifstream in(SamplePath());
  std::string line;
  uint8_t flag = 0, last = 0;
  bool in_doc = false;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (in_doc) {
        expected.push_back(kEodId);
        flags.push_back(last);
        flag = last ^ 1;
      }
      in_doc = false;
      continue;
    }
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->EncodeIds(line, &ids).ok());
    if (ids.empty()) continue;
    expected.insert(expected.end(), ids.begin(), ids.end());
    flags.insert(flags.end(), ids.size(), flag);
    last = flag;
    flag ^= 1;
    in_doc = true;
  }
  if (in_doc) expected.push_back(kEodId), flags.push_back(last);
  auto corpus = Corpus::Create(**set, Split::kTrain, 0.0);
  ASSERT_TRUE(corpus.ok());
  ASSERT_EQ(corpus->size(), static_cast<int64_t>(expected.size()));
  std::vector<int32_t> ids(expected.size());
  std::vector<uint8_t> got_flags(expected.size());
  corpus->CopyIds(0, ids.size(), ids.data());
  corpus->CopyFlags(0, ids.size(), got_flags.data());
  EXPECT_EQ(ids, expected);
  // Flags alternate per line across shard boundaries (up to a global flip).
  const uint8_t flip = got_flags[0] ^ flags[0];
  for (size_t i = 0; i < flags.size(); ++i) {
    ASSERT_EQ(got_flags[i] ^ flip, flags[i]) << "token " << i;
  }
  EXPECT_EQ(corpus->num_docs(), 25);
}

TEST(ShardsTest, EvalSplitHoldsOutWholeDocuments) {
  auto set = ShardSet::Open(DataDir());
  ASSERT_TRUE(set.ok());
  auto train = Corpus::Create(**set, Split::kTrain, 0.1);
  auto eval = Corpus::Create(**set, Split::kEval, 0.1);
  ASSERT_TRUE(train.ok() && eval.ok());
  EXPECT_GE(eval->num_docs(), 1);
  EXPECT_EQ(train->num_docs() + eval->num_docs(), 25);
  EXPECT_EQ(train->size() + eval->size(), (*set)->num_tokens());
  // Every held-out document ends with <eod>; so does the split.
  EXPECT_EQ(eval->Id(eval->size() - 1), kEodId);
}

TEST(ShardsTest, DamagedShardsAreReported) {
  const std::string dir = TempDir() + "/damaged";
  ASSERT_TRUE(PrepareShards(SampleOptions(dir, 2)).ok());
  std::string bytes = ReadAll(dir + "/shard-00000.bin");
  WriteAll(dir + "/shard-00000.bin", bytes.substr(0, bytes.size() - 7));
  auto truncated = ShardSet::Open(dir);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(std::string(truncated.status().message()).find("shard-00000.bin"),
            std::string::npos);
  bytes[300] ^= 1;
  WriteAll(dir + "/shard-00000.bin", bytes);
  EXPECT_TRUE(ShardSet::Open(dir, false).ok());
  auto corrupt = ShardSet::Open(dir, true);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(std::string(corrupt.status().message()).find("checksum"),
            std::string::npos);
  std::filesystem::remove(dir + "/manifest.json");
  EXPECT_EQ(ShardSet::Open(dir).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace xlnet::data::testing
