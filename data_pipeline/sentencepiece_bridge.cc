// The only translation unit that includes SentencePiece (see the header for
// why): built without the shared precompiled header into the module
// libxlnet_spm_bridge.so; must not include Abseil or LibTorch.
#include "data_pipeline/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <new>
#include <streambuf>
#include <unordered_map>

namespace xlnet::data::spm {
namespace {

// SentencePiece splits list flags as CSV: a field with a comma or a quote
// is quoted, with quotes doubled (so the piece `"` is written `""""`).
std::string JoinCsv(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ",";
    if (item.find_first_of(",\"") == std::string::npos) {
      out += item;
      continue;
    }
    out += '"';
    for (char c : item) {
      if (c == '"') out += '"';
      out += c;
    }
    out += '"';
  }
  return out;
}

// Feeds sentences from a callback to the trainer.
class CallbackIterator : public sentencepiece::SentenceIterator {
 public:
  explicit CallbackIterator(std::function<bool(std::string*)> next)
      : next_(std::move(next)) {
    Next();
  }
  bool done() const override { return done_; }
  void Next() override { done_ = !next_(&value_); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override {
    return sentencepiece::util::Status();
  }

 private:
  std::function<bool(std::string*)> next_;
  std::string value_;
  bool done_ = false;
};

// Hands each complete line written to it to a callback. Locked: where the
// module's std::cerr is the process's, other threads' writes land here too
// while training runs.
class LineBuf : public std::streambuf {
 public:
  explicit LineBuf(const std::function<void(const std::string&)>& sink)
      : sink_(sink) {}
  ~LineBuf() override {
    if (!line_.empty()) sink_(line_);
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    std::lock_guard<std::mutex> lock(mu_);
    Put(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::streamsize i = 0; i < n; ++i) Put(s[i]);
    return n;
  }

 private:
  void Put(char c) {
    if (c != '\n') {
      line_.push_back(c);
      return;
    }
    sink_(line_);
    line_.clear();
  }

  const std::function<void(const std::string&)>& sink_;
  std::mutex mu_;
  std::string line_;
};

// SentencePiece logs to std::cerr, and its log is the only view of its
// phases. In this module (dlopen()ed with RTLD_DEEPBIND, see the header)
// `std::cerr` binds to libstdc++'s own definition. When the executable holds
// a copy of std::cerr (a copy relocation, which GCC's PIE code makes for
// data it references), libstdc++ constructs that copy at start-up and its
// own definition stays zero-filled storage that was never constructed:
// writing to it crashes. So the stream this module sees is made usable
// once, given the process's std::cerr (`process`, taken by the loader, which
// is bound normally):
// - the process's std::cerr itself: used as it is;
// - zero-filled storage: an ostream on the process's std::cerr's buffer is
//   constructed there (libstdc++ never touches that storage: its own code
//   uses the executable's copy);
// - anything else: no stream (nullptr), and SentencePiece stays quiet.
// The caller swaps the returned stream's buffer while training.
std::ostream* UsableModuleCerr(std::ostream* process) {
  static std::ostream* const stream = [process]() -> std::ostream* {
    std::ostream* mine = &std::cerr;
    if (process == nullptr) return nullptr;
    if (process == mine) return mine;
    const auto* bytes = reinterpret_cast<const unsigned char*>(mine);
    if (!std::all_of(bytes, bytes + sizeof(std::ostream),
                     [](unsigned char b) { return b == 0; })) {
      return nullptr;
    }
    return new (static_cast<void*>(mine)) std::ostream(process->rdbuf());
  }();
  return stream;
}

// Serialises training runs that capture the log (the stream is global).
std::mutex& LogCaptureMutex() {
  static std::mutex mu;
  return mu;
}

std::string TrainImpl(const BridgeTrainOptions& options,
                      std::string* model_bytes) {
  std::unique_lock<std::mutex> capture_lock(LogCaptureMutex(), std::defer_lock);
  std::ostream* log_stream = nullptr;
  if (options.log_line) {
    log_stream = UsableModuleCerr(options.process_cerr);
    if (log_stream == nullptr) {
      options.log_line(
          "(no log: SentencePiece's std::cerr is not usable in this process)");
    } else {
      capture_lock.lock();
    }
  }
  LineBuf line_buf(options.log_line);
  std::streambuf* saved_buf =
      log_stream != nullptr ? log_stream->rdbuf(&line_buf) : nullptr;
  struct Restore {
    std::ostream* stream;
    std::streambuf* buf;
    ~Restore() {
      if (stream != nullptr) stream->rdbuf(buf);
    }
  } restore{log_stream, saved_buf};
  sentencepiece::SetRandomGeneratorSeed(options.seed);
  // No model_prefix: the model is returned in memory, nothing is written.
  std::unordered_map<std::string, std::string> kwargs = {
      {"model_type", "unigram"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(options.num_threads)},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"minloglevel", log_stream != nullptr ? "0" : "2"},
  };
  if (!options.control_symbols.empty()) {
    kwargs["control_symbols"] = JoinCsv(options.control_symbols);
  }
  if (!options.user_defined_symbols.empty()) {
    kwargs["user_defined_symbols"] = JoinCsv(options.user_defined_symbols);
  }
  CallbackIterator iterator(options.next_sentence);
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(kwargs, &iterator, model_bytes);
  if (!status.ok()) return status.ToString();
  return "";
}

using Processor = sentencepiece::SentencePieceProcessor;

const Processor& P(const void* p) { return *static_cast<const Processor*>(p); }

void* Create() { return new Processor(); }
void Destroy(void* p) { delete static_cast<Processor*>(p); }

std::string Load(void* p, const std::string& model_bytes) {
  const auto status =
      static_cast<Processor*>(p)->LoadFromSerializedProto(model_bytes);
  return status.ok() ? "" : status.ToString();
}

std::string Encode(const void* p, const std::string& text,
                   std::vector<BridgePiece>* pieces) {
  sentencepiece::ImmutableSentencePieceText spt;
  const auto status = P(p).Encode(text, spt.mutable_proto());
  if (!status.ok()) return status.ToString();
  pieces->clear();
  pieces->reserve(spt.pieces_size());
  for (size_t i = 0; i < spt.pieces_size(); ++i) {
    const auto sp = spt.pieces(static_cast<int>(i));
    pieces->push_back(BridgePiece{static_cast<int>(sp.id()), sp.piece(),
                                  sp.begin(), sp.end()});
  }
  return "";
}

std::string EncodePieces(const void* p, const std::string& text,
                         std::vector<std::string>* pieces) {
  const auto status = P(p).Encode(text, pieces);
  return status.ok() ? "" : status.ToString();
}

int Size(const void* p) { return P(p).GetPieceSize(); }
int PieceToId(const void* p, const std::string& piece) {
  return P(p).PieceToId(piece);
}
const std::string& IdToPiece(const void* p, int id) { return P(p).IdToPiece(id); }
bool IsControl(const void* p, int id) { return P(p).IsControl(id); }
int UnkId(const void* p) { return P(p).unk_id(); }

const BridgeApi kApi = {kBridgeApiVersion, &TrainImpl, &Create,   &Destroy,
                        &Load,             &Encode,    &EncodePieces, &Size,
                        &PieceToId,        &IdToPiece, &IsControl, &UnkId};

}  // namespace
}  // namespace xlnet::data::spm

extern "C" __attribute__((visibility("default"))) const void*
XlnetSpmBridgeApi() {
  return &xlnet::data::spm::kApi;
}
