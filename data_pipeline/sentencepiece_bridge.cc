// The only translation unit that includes SentencePiece (see the header for
// why): built without the shared precompiled header into the module
// libxlnet_spm_bridge.so; must not include Abseil or LibTorch.
#include "data_pipeline/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

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

std::string TrainImpl(const BridgeTrainOptions& options,
                      std::string* model_bytes) {
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
      {"minloglevel", options.verbose ? "0" : "2"},
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
