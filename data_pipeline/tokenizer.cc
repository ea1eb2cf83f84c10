#include "data_pipeline/tokenizer.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "common/status.h"
#include "common/strings.h"
#include "data_pipeline/input_reader.h"
#include "data_pipeline/sentence_splitter.h"
#include "data_pipeline/sentencepiece_bridge.h"
#include "data_pipeline/text.h"
#include "data_pipeline/tokenizer_progress.h"
#include "data_pipeline/tokenizer_rules.h"

namespace xlnet::data {
namespace {

constexpr char kUnderline[] = "\xE2\x96\x81";  // U+2581 "▁"

// Peak RSS of `xlnet-data tokenizer` (EstimateTokenizerTrainingBytes): a
// least-squares fit to four runs on Brown-derived samples of 5.6-90 MiB and
// 57k-917k sentences, vocab 32000 (data_pipeline/README.md, "Tokenizer
// memory"); every run within 0.2% of the fit.
constexpr double kTokenizerBytesPerSampleByte = 23.0;
constexpr double kTokenizerBytesPerSentence = 138.0;
constexpr double kTokenizerBaseBytes = 174.0 * (1 << 20);

// One character of text being preprocessed, with its source byte range.
struct SrcChar {
  uint32_t cp;
  uint32_t begin;
  uint32_t end;
};

// Applies a UTF-16 -> UTF-16 transform to one code point, appending the
// resulting code points.
template <typename Fn>
void TransformChar(uint32_t cp, Fn&& fn, std::vector<uint32_t>* out) {
  UChar src[2];
  int32_t src_len = 0;
  UBool error = false;
  U16_APPEND(src, src_len, 2, static_cast<UChar32>(cp), error);
  (void)error;
  UChar dst[32];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t dst_len = fn(src, src_len, dst, 32, &status);
  if (U_FAILURE(status) || dst_len > 32) {
    out->push_back(cp);  // leave unusual characters unchanged
    return;
  }
  for (int32_t k = 0; k < dst_len;) {
    UChar32 c;
    U16_NEXT(dst, k, dst_len, c);
    out->push_back(static_cast<uint32_t>(c));
  }
}

const UNormalizer2* Nfkd() {
  static const UNormalizer2* nfkd = [] {
    UErrorCode status = U_ZERO_ERROR;
    const UNormalizer2* n = unorm2_getNFKDInstance(&status);
    return U_SUCCESS(status) ? n : nullptr;
  }();
  return nfkd;
}

bool IsOfficialPunctuation(char c) {
  // The official `_is_start_piece` list: '!"#$%&\"()*+,-./:;?@[\\]^_`{|}~'
  static constexpr std::string_view kList = "!\"#$%&()*+,-./:;?@[\\]^_`{|}~";
  return kList.find(c) != std::string_view::npos;
}

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Removes every "▁" from `s`.
std::string RemoveUnderlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, kUnderline) == 0) {
      i += 3;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

absl::Status BridgeError(const std::string& error, const std::string& context) {
  if (error.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(context, ": ", error));
}

}  // namespace

const std::vector<std::string>& SpecialPieces() {
  static const std::vector<std::string> pieces = {"<unk>",  "<s>",   "</s>",
                                                  "<cls>",  "<sep>", "<pad>",
                                                  "<mask>", "<eod>", "<eop>"};
  return pieces;
}

uint64_t Fnv1a64(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string HexU64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(value));
  return buf;
}

PreprocessedText PreprocessText(std::string_view original,
                                const TextRules& rules, bool with_offsets) {
  // 1. Decode; strip and collapse whitespace runs to one space.
  std::vector<SrcChar> chars;
  chars.reserve(original.size());
  bool pending_space = false;
  SrcChar space{' ', 0, 0};
  for (size_t i = 0; i < original.size();) {
    const size_t begin = i;
    const uint32_t cp = NextCodePoint(original, &i);
    const SrcChar c{cp, static_cast<uint32_t>(begin), static_cast<uint32_t>(i)};
    if (IsPythonSpace(cp)) {
      if (!pending_space) space = SrcChar{' ', c.begin, c.end};
      pending_space = true;
      continue;
    }
    if (pending_space && !chars.empty()) chars.push_back(space);
    pending_space = false;
    chars.push_back(c);
  }
  // 2. `` and '' -> " (the two patterns cannot overlap each other).
  std::vector<SrcChar> quoted;
  quoted.reserve(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) {
    const uint32_t cp = chars[i].cp;
    if ((cp == '`' || cp == '\'') && i + 1 < chars.size() &&
        chars[i + 1].cp == cp) {
      quoted.push_back(SrcChar{'"', chars[i].begin, chars[i + 1].end});
      ++i;
    } else {
      quoted.push_back(chars[i]);
    }
  }
  // 3. NFKD + drop combining marks; 4. lowercase. Per character.
  std::vector<SrcChar> result;
  result.reserve(quoted.size());
  std::vector<uint32_t> buffer;
  const UNormalizer2* nfkd = Nfkd();
  for (const SrcChar& c : quoted) {
    buffer.clear();
    if (c.cp < 0x80 || rules.keep_accents || nfkd == nullptr) {
      buffer.push_back(c.cp);
    } else {
      TransformChar(
          c.cp,
          [nfkd](const UChar* src, int32_t n, UChar* dst, int32_t cap,
                 UErrorCode* status) {
            return unorm2_normalize(nfkd, src, n, dst, cap, status);
          },
          &buffer);
      size_t kept = 0;
      for (uint32_t cp : buffer) {
        if (u_getCombiningClass(static_cast<UChar32>(cp)) == 0) {
          buffer[kept++] = cp;
        }
      }
      buffer.resize(kept);
    }
    for (uint32_t cp : buffer) {
      if (!rules.uncased) {
        result.push_back(SrcChar{cp, c.begin, c.end});
      } else if (cp < 0x80) {
        const uint32_t lower = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        result.push_back(SrcChar{lower, c.begin, c.end});
      } else {
        std::vector<uint32_t> lowered;
        TransformChar(
            cp,
            [](const UChar* src, int32_t n, UChar* dst, int32_t cap,
               UErrorCode* status) {
              return u_strToLower(dst, cap, src, n, "", status);
            },
            &lowered);
        for (uint32_t l : lowered) result.push_back(SrcChar{l, c.begin, c.end});
      }
    }
  }
  // 5. Encode as UTF-8, remembering each byte's source.
  PreprocessedText out;
  out.text.reserve(result.size());
  for (const SrcChar& c : result) {
    const size_t before = out.text.size();
    AppendUtf8(c.cp, &out.text);
    if (with_offsets) {
      for (size_t k = before; k < out.text.size(); ++k) {
        out.src_begin.push_back(c.begin);
        out.src_end.push_back(c.end);
      }
    }
  }
  return out;
}

absl::StatusOr<TokenizerSample> SampleTokenizerSentences(
    const TokenizerTrainOptions& options) {
  if (options.inputs.empty()) {
    return absl::InvalidArgumentError("no input files to train on");
  }
  if (options.max_sentences < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_sentences must be at least 1 (got ", options.max_sentences, ")"));
  }
  TokenizerSample sample;
  TokenizerTrainStats& st = sample.stats;
  // Algorithm R: the first k sentences fill the reservoir; the n-th (n > k)
  // replaces a uniformly chosen slot with probability k/n. The modulo of a
  // 64-bit draw is uniform up to n/2^64, far below anything measurable.
  std::mt19937_64 rng(options.seed);
  const size_t k = static_cast<size_t>(options.max_sentences);
  // Progress: bytes read of the inputs' total (unknown when compressed).
  ProgressMeter meter(PlainInputBytes(options.inputs));
  const auto start = std::chrono::steady_clock::now();
  double next_report = options.progress_seconds;
  int64_t bytes_read = 0;
  constexpr int kCheckLines = 256;
  int lines_to_check = kCheckLines;
  auto maybe_report = [&]() {
    if (!options.progress || --lines_to_check > 0) return;
    lines_to_check = kCheckLines;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    meter.Add(secs, bytes_read);
    if (secs < next_report) return;
    next_report = secs + options.progress_seconds;
    options.progress(absl::StrCat("reading the inputs: ", meter.BytesLine(),
                                  "; ", WithCommas(st.sentences_seen),
                                  " sentences"));
  };
  // One candidate sentence into the reservoir.
  auto offer = [&](std::string_view sentence) {
    PreprocessedText p = PreprocessText(sentence, options.rules, false);
    if (p.text.empty()) return;
    ++st.sentences_seen;
    if (sample.sentences.size() < k) {
      st.sample_bytes += static_cast<int64_t>(p.text.size());
      sample.sentences.push_back(std::move(p.text));
      return;
    }
    const uint64_t slot = rng() % static_cast<uint64_t>(st.sentences_seen);
    if (slot < k) {
      std::string& kept = sample.sentences[slot];
      st.sample_bytes += static_cast<int64_t>(p.text.size()) -
                         static_cast<int64_t>(kept.size());
      kept = std::move(p.text);
    }
  };
  std::string record_text;
  std::vector<std::string_view> sentences;
  for (const std::string& path : options.inputs) {
    const TextFormat format = KindOfInput(path).format;
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader,
                           LineReader::Open(path, options.max_line_bytes));
    int64_t records_with_text = 0;
    Line line;
    while (true) {
      XLNET_ASSIGN_OR_RETURN(const bool more, reader->Next(&line));
      if (!more) break;
      bytes_read += static_cast<int64_t>(line.bytes) + (line.newline ? 1 : 0);
      maybe_report();
      if (line.overlong) {
        ++st.skipped_overlong;
        continue;
      }
      if (!IsValidUtf8(line.text)) {
        ++st.skipped_invalid_utf8;
        continue;
      }
      if (format == TextFormat::kPlain) {
        offer(line.text);
        continue;
      }
      // JSON Lines: a record's text split into sentences, as prepare does.
      if (!RecordText(line.text, options.json_key, &record_text).ok()) {
        ++st.skipped_records;
        continue;
      }
      ++records_with_text;
      sentences.clear();
      SplitSentences(record_text, &sentences);
      for (std::string_view sentence : sentences) offer(sentence);
    }
    if (format == TextFormat::kJsonLines && records_with_text == 0) {
      // A misspelt --json_key: the error names the fields there are.
      XLNET_RETURN_IF_ERROR(
          CheckJsonKeyPresent(path, options.json_key, options.max_line_bytes));
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no record has a string field \"",
                       options.json_key, "\" (--json_key)"));
    }
  }
  st.sentences = static_cast<int64_t>(sample.sentences.size());
  if (st.sentences == 0) {
    return absl::InvalidArgumentError("the input files hold no text");
  }
  return sample;
}

uint64_t EstimateTokenizerTrainingBytes(int64_t sample_bytes,
                                        int64_t sentences) {
  return static_cast<uint64_t>(
      kTokenizerBytesPerSampleByte * static_cast<double>(sample_bytes) +
      kTokenizerBytesPerSentence * static_cast<double>(sentences) +
      kTokenizerBaseBytes);
}

absl::StatusOr<std::string> TrainTokenizerOnSample(
    TokenizerSample sample, const TokenizerTrainOptions& options) {
  if (options.vocab_size < 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab_size must be at least 32 (got ", options.vocab_size, ")"));
  }
  if (sample.sentences.empty()) {
    return absl::InvalidArgumentError("the input files hold no text");
  }
  size_t next_index = 0;
  // Hands each sentence over and frees it: SentencePiece keeps its own copy,
  // so the sample is not held twice.
  auto next = [&](std::string* sentence) -> bool {
    if (next_index >= sample.sentences.size()) return false;
    *sentence = std::move(sample.sentences[next_index]);
    std::string().swap(sample.sentences[next_index]);
    ++next_index;
    return true;
  };
  spm::BridgeTrainOptions train;
  train.next_sentence = next;
  train.vocab_size = options.vocab_size;
  train.character_coverage = 0.99995;
  train.control_symbols = {"<cls>", "<sep>", "<pad>", "<mask>", "<eod>"};
  train.user_defined_symbols = {
      "<eop>",        ".",        "(",           ")", "\"", "-",
      "\xE2\x80\x93", "\xC2\xA3", "\xE2\x82\xAC"};
  train.num_threads = options.threads;
  train.seed = options.seed;
  // The sample (at most max_sentences) is already drawn, so SentencePiece's
  // own reservoir keeps all of it. The value is recorded in the model's
  // trainer_spec: max_sentences keeps models identical to those trained
  // before the sample was ours.
  train.input_sentence_size = options.max_sentences;
  SentencePiecePhases phases(options.vocab_size);
  if (options.progress) {
    options.progress(absl::StrCat(
        "training SentencePiece (unigram, ", WithCommas(options.vocab_size),
        " pieces, ", options.threads,
        options.threads == 1 ? " thread" : " threads", ") on ",
        WithCommas(static_cast<int64_t>(sample.sentences.size())),
        " sentences"));
    train.log_line = [&](const std::string& line) {
      const std::string phase = phases.Describe(line);
      if (!phase.empty()) options.progress(phase);
    };
  }
  std::string model_bytes;
  const std::string error = spm::Train(train, &model_bytes);
  if (!error.empty()) {
    return TokenizerTrainingError(error, options.vocab_size);
  }
  // The casing is chosen here, once: the file records it for every later
  // step (tokenizer_rules.h).
  return RecordTextRules(model_bytes, options.rules);
}

absl::Status TokenizerTrainingError(const std::string& spm_error,
                                    int vocab_size) {
  // SentencePiece's wording has varied ("Vocabulary size too high",
  // "Vocabulary size is too high"); both end with "<= MAX".
  if (spm_error.find("Vocabulary size") == std::string::npos ||
      spm_error.find("too high") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("SentencePiece training failed: ", spm_error));
  }
  const std::string prefix = absl::StrCat("vocab_size ", vocab_size,
                                          " (--vocab_size) is too large "
                                          "for this corpus");
  const size_t at = spm_error.find("<=");
  int64_t max_size = -1;
  if (at != std::string::npos) {
    char* end = nullptr;
    const char* digits = spm_error.c_str() + at + 2;
    max_size = std::strtoll(digits, &end, 10);
    if (end == digits) max_size = -1;
  }
  if (max_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ": lower --vocab_size or train on more text (",
                     "SentencePiece: ", spm_error, ")"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(prefix, ": it has room for at most ", max_size,
                   " pieces; rerun with --vocab_size ", max_size,
                   " or less, or train on more text"));
}

absl::StatusOr<std::string> TrainTokenizer(const TokenizerTrainOptions& options,
                                           TokenizerTrainStats* stats) {
  XLNET_ASSIGN_OR_RETURN(TokenizerSample sample,
                         SampleTokenizerSentences(options));
  if (stats) *stats = sample.stats;
  return TrainTokenizerOnSample(std::move(sample), options);
}

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(
    const std::string& path, const TextRules& rules) {
  XLNET_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, kMaxTokenizerBytes));
  return FromBytes(bytes, path, rules);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromBytes(
    const std::string& model_bytes, const std::string& source,
    const TextRules& rules) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  tok->processor_ = std::make_unique<spm::BridgeProcessor>();
  const std::string error = tok->processor_->LoadFromBytes(model_bytes);
  if (!error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a SentencePiece model (", error, ")"));
  }
  const auto& special = SpecialPieces();
  const int size = tok->processor_->Size();
  std::string expected;
  for (size_t id = 0; id < special.size(); ++id) {
    absl::StrAppend(&expected, id ? " " : "", special[id], "=", id);
  }
  for (int id = 0; id < static_cast<int>(special.size()); ++id) {
    const std::string found = id < size ? tok->processor_->IdToPiece(id) : "";
    if (found != special[id]) {
      const int actual = tok->processor_->PieceToId(special[id]);
      const bool present = tok->processor_->IdToPiece(actual) == special[id];
      return absl::FailedPreconditionError(absl::StrCat(
          source, ": not an XLNet tokenizer: ", special[id], " has ",
          present ? absl::StrCat("id ", actual) : std::string("no id"),
          " but XLNet needs id ", id, " (", expected,
          "); train one with `xlnet-data tokenizer`"));
    }
  }
  if (tok->processor_->UnkId() != kUnkId) {
    return absl::FailedPreconditionError(
        absl::StrCat(source, ": not an XLNet tokenizer: unk_id is ",
                     tok->processor_->UnkId(), ", expected 0"));
  }
  tok->model_bytes_ = model_bytes;
  tok->hash_ = HexU64(Fnv1a64(model_bytes.data(), model_bytes.size()));
  tok->rules_ = rules;
  tok->is_start_piece_.resize(size);
  for (int id = 0; id < size; ++id) {
    const std::string& piece = tok->processor_->IdToPiece(id);
    tok->is_start_piece_[id] =
        StartsWith(piece, kUnderline) || StartsWith(piece, "<") ||
        (piece.size() == 1 && IsOfficialPunctuation(piece[0]));
  }
  return tok;
}

int Tokenizer::vocab_size() const { return processor_->Size(); }

const std::string& Tokenizer::IdToPiece(int32_t id) const {
  return processor_->IdToPiece(id);
}

int32_t Tokenizer::PieceToId(const std::string& piece) const {
  return processor_->PieceToId(piece);
}

bool Tokenizer::IsStartPiece(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(is_start_piece_.size()) &&
         is_start_piece_[id];
}

std::string Tokenizer::DecodeForDisplay(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    const std::string& piece = IdToPiece(id);
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, 3, kUnderline) == 0) {
        out.push_back(' ');
        i += 3;
      } else {
        out.push_back(piece[i++]);
      }
    }
  }
  return out;
}

absl::Status Tokenizer::EncodeProcessed(const std::string& processed,
                                        std::vector<std::string>* pieces,
                                        std::vector<uint32_t>* begin,
                                        std::vector<uint32_t>* end) const {
  const bool offsets = begin != nullptr;
  std::vector<spm::BridgePiece> raw;
  std::vector<std::string> raw_pieces;
  if (offsets) {
    XLNET_RETURN_IF_ERROR(BridgeError(processor_->Encode(processed, &raw),
                                      "SentencePiece encode"));
    raw_pieces.reserve(raw.size());
    for (auto& p : raw) raw_pieces.push_back(p.piece);
  } else {
    XLNET_RETURN_IF_ERROR(
        BridgeError(processor_->EncodePieces(processed, &raw_pieces),
                    "SentencePiece encode"));
  }
  pieces->clear();
  if (offsets) begin->clear(), end->clear();
  for (size_t i = 0; i < raw_pieces.size(); ++i) {
    const std::string& piece = raw_pieces[i];
    uint32_t b = offsets ? raw[i].begin : 0;
    uint32_t e = offsets ? raw[i].end : 0;
    // Leading whitespace is not part of a piece's range.
    if (offsets) {
      while (b < e && processed[b] == ' ') ++b;
    }
    // encode_pieces: "len(piece) > 1 and piece[-1] == ',' and
    // piece[-2].isdigit()" -> re-encode without the comma.
    size_t last_start = 0;
    bool digit_comma = false;
    if (piece.size() >= 2 && piece.back() == ',') {
      const uint32_t prev = LastCodePoint(piece, piece.size() - 1, &last_start);
      digit_comma = IsPythonDigit(prev);
    }
    if (!digit_comma) {
      pieces->push_back(piece);
      if (offsets) begin->push_back(b), end->push_back(e);
      continue;
    }
    const std::string stem =
        RemoveUnderlines(piece.substr(0, piece.size() - 1));
    std::vector<spm::BridgePiece> sub;
    XLNET_RETURN_IF_ERROR(
        BridgeError(processor_->Encode(stem, &sub), "SentencePiece encode"));
    if (!StartsWith(piece, kUnderline) && !sub.empty() &&
        StartsWith(sub[0].piece, kUnderline)) {
      if (sub[0].piece.size() == 3) {
        sub.erase(sub.begin());
      } else {
        sub[0].piece = sub[0].piece.substr(3);
      }
    }
    // Offsets: the digits span [b, comma) and the comma its own byte.
    const bool comma_here = offsets && e > b && processed[e - 1] == ',';
    const uint32_t stem_end = comma_here ? e - 1 : e;
    const bool aligned =
        offsets && processed.compare(b, stem_end - b, stem) == 0;
    for (const auto& s : sub) {
      pieces->push_back(s.piece);
      if (!offsets) continue;
      if (aligned) {
        begin->push_back(std::min(b + s.begin, stem_end));
        end->push_back(std::min(b + s.end, stem_end));
      } else {
        begin->push_back(b);
        end->push_back(stem_end);
      }
    }
    pieces->push_back(",");
    if (offsets) {
      begin->push_back(comma_here ? e - 1 : b);
      end->push_back(e);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Encoding> Tokenizer::Encode(std::string_view text) const {
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError("text to encode is not valid UTF-8");
  }
  const PreprocessedText p = PreprocessText(text, rules_, true);
  Encoding enc;
  std::vector<uint32_t> begin;
  std::vector<uint32_t> end;
  XLNET_RETURN_IF_ERROR(EncodeProcessed(p.text, &enc.pieces, &begin, &end));
  // Code-point index of every byte offset of `text` (a continuation byte
  // maps to its character).
  const std::vector<size_t> offsets = CodePointOffsets(text);
  std::vector<int64_t> char_index(text.size() + 1, 0);
  for (size_t k = 0; k + 1 < offsets.size(); ++k) {
    std::fill(char_index.begin() + offsets[k],
              char_index.begin() + offsets[k + 1], static_cast<int64_t>(k));
  }
  char_index[text.size()] = static_cast<int64_t>(offsets.size()) - 1;
  const size_t n = enc.pieces.size();
  enc.ids.resize(n);
  enc.begin.resize(n);
  enc.end.resize(n);
  enc.char_begin.resize(n);
  enc.char_end.resize(n);
  for (size_t k = 0; k < n; ++k) {
    enc.ids[k] = processor_->PieceToId(enc.pieces[k]);
    int64_t ob;
    int64_t oe;
    if (begin[k] < end[k]) {
      ob = p.src_begin[begin[k]];
      oe = p.src_end[end[k] - 1];
    } else {
      // Empty range (a lone "▁"): at the next character's source.
      ob = begin[k] < p.src_begin.size() ? p.src_begin[begin[k]]
                                         : static_cast<int64_t>(text.size());
      oe = ob;
    }
    enc.begin[k] = ob;
    enc.end[k] = oe;
    enc.char_begin[k] = char_index[ob];
    enc.char_end[k] = char_index[oe];
  }
  return enc;
}

absl::Status Tokenizer::EncodeIds(std::string_view text,
                                  std::vector<int32_t>* ids) const {
  const PreprocessedText p = PreprocessText(text, rules_, false);
  std::vector<std::string> pieces;
  XLNET_RETURN_IF_ERROR(EncodeProcessed(p.text, &pieces, nullptr, nullptr));
  ids->clear();
  ids->reserve(pieces.size());
  for (const std::string& piece : pieces) {
    ids->push_back(processor_->PieceToId(piece));
  }
  return absl::OkStatus();
}

}  // namespace xlnet::data
