// A narrow wrapper around the SentencePiece library.
//
// Two clashes keep SentencePiece at arm's length:
// - Debian's SentencePiece headers declare `namespace absl { using
//   std::string_view; }`, which clashes with the system Abseil the rest of
//   the project (and its precompiled header) uses;
// - libsentencepiece.so bundles and exports its own protobuf-lite, while
//   LibTorch loads the system libprotobuf: with both in the global symbol
//   scope, protobuf's static initialisers crash before main().
// So sentencepiece_bridge.cc (the only file including SentencePiece) is built
// without the PCH into a module, libxlnet_spm_bridge.so, which
// sentencepiece_loader.cc dlopen()s with RTLD_LOCAL | RTLD_DEEPBIND: its
// SentencePiece and protobuf-lite stay private. The module exports one C
// function returning a table of entry points (BridgeApi). This header speaks
// plain standard C++: errors are strings (empty = success), turned into
// absl::Status by the callers.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace xlnet::data::spm {

// One piece of an encoding: its id, its text and the byte range
// [begin, end) of the input string it covers (SentencePiece's alignment,
// which accounts for its own normalisation).
struct BridgePiece {
  int id = 0;
  std::string piece;
  uint32_t begin = 0;
  uint32_t end = 0;
};

// Options of one training run; `next_sentence` yields training sentences
// (returns false when done).
struct BridgeTrainOptions {
  std::function<bool(std::string* sentence)> next_sentence;
  int vocab_size = 32000;
  double character_coverage = 0.99995;
  std::vector<std::string> control_symbols;
  std::vector<std::string> user_defined_symbols;
  int num_threads = 1;
  uint32_t seed = 0;
  int64_t input_sentence_size = 10000000;
  // When set, SentencePiece's own log lines ("trainer_interface.cc(409)
  // LOG(INFO) Loaded all 57340 sentences"), one call per line without the
  // newline, from the training thread; when unset, SentencePiece is quiet.
  // Where the module cannot capture them (see the module), training is quiet
  // and `log_line` is called once with a line starting "(no log: ".
  std::function<void(const std::string& line)> log_line;
  // The process's std::cerr, as code bound normally sees it (Train() in
  // sentencepiece_loader.cc sets it): the module's own `std::cerr` may be
  // another object.
  std::ostream* process_cerr = nullptr;
};

// The entry points the module exports (through XlnetSpmBridgeApi()).
struct BridgeApi {
  int version;
  // Trains a unigram model; fills `model_bytes` (a .model file's bytes).
  std::string (*train)(const BridgeTrainOptions& options,
                       std::string* model_bytes);
  void* (*create)();
  void (*destroy)(void* processor);
  std::string (*load)(void* processor, const std::string& model_bytes);
  std::string (*encode)(const void* processor, const std::string& text,
                        std::vector<BridgePiece>* pieces);
  std::string (*encode_pieces)(const void* processor, const std::string& text,
                               std::vector<std::string>* pieces);
  int (*size)(const void* processor);
  int (*piece_to_id)(const void* processor, const std::string& piece);
  const std::string& (*id_to_piece)(const void* processor, int id);
  bool (*is_control)(const void* processor, int id);
  int (*unk_id)(const void* processor);
};
inline constexpr int kBridgeApiVersion = 2;
// The name of the exported function returning `const BridgeApi*`.
inline constexpr char kBridgeApiSymbol[] = "XlnetSpmBridgeApi";

// Loads the module once (thread-safe); nullptr and `error` on failure.
// Looks at $XLNET_SPM_BRIDGE, then beside the executable, then where the
// build put it.
const BridgeApi* LoadBridgeApi(std::string* error);

// Trains a unigram model; on success fills `model_bytes` (the serialized
// ModelProto, i.e. the bytes of a .model file) and returns "".
std::string Train(const BridgeTrainOptions& options, std::string* model_bytes);

// A loaded model. Encoding is const and safe to call from many threads.
class BridgeProcessor {
 public:
  BridgeProcessor();
  ~BridgeProcessor();
  BridgeProcessor(const BridgeProcessor&) = delete;
  BridgeProcessor& operator=(const BridgeProcessor&) = delete;

  // Loads from the bytes of a .model file; returns "" or an error.
  std::string LoadFromBytes(const std::string& model_bytes);

  // Pieces with ids and byte offsets into `text`; returns "" or an error.
  std::string Encode(const std::string& text,
                     std::vector<BridgePiece>* pieces) const;
  // Pieces only (faster, no offsets).
  std::string EncodePieces(const std::string& text,
                           std::vector<std::string>* pieces) const;

  int Size() const;
  // Id of `piece`, or the <unk> id when absent.
  int PieceToId(const std::string& piece) const;
  const std::string& IdToPiece(int id) const;
  bool IsControl(int id) const;
  int UnkId() const;

 private:
  const BridgeApi* api_ = nullptr;
  void* processor_ = nullptr;
};

}  // namespace xlnet::data::spm
