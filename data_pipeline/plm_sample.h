// One permutation-LM sample, as the official XLNet data_utils.py builds it:
// the A/B split (`_split_a_and_b`), n-gram span masking (`_sample_mask`) and
// the factorisation-order masks (`_local_perm`), over a stream given as an
// accessor. Everything is driven by an explicit Rng so a sample depends only
// on its seed.
//
// Shapes (L = seq_len, P = num_predict):
//   input_ids [L] int64, token_type_ids [L] int64, perm_mask [L, L] float
//   (1 = position i may NOT attend to j), target_mapping [P, L] float,
//   target [P] int64, target_mask [P] float, is_masked [L] bool.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "config/config.h"

namespace xlnet::data {

// A small, fast, seedable generator (xoshiro256**) with our own
// distributions, so samples are identical on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  // Seeded from several values (seed, row, step, ...).
  static Rng For(std::initializer_list<uint64_t> keys);
  uint64_t Next();
  // Uniform in [0, n); n > 0.
  uint64_t Uniform(uint64_t n);
  // Uniform in [0, 1).
  double UniformDouble();

 private:
  uint64_t s_[4];
};

// Random access to one stream (forward or backward) of token ids and
// sentence flags; positions are in [0, length).
class StreamAccess {
 public:
  virtual ~StreamAccess() = default;
  virtual int64_t length() const = 0;
  // Copies positions [begin, begin + n).
  virtual void Ids(int64_t begin, int64_t n, int32_t* out) const = 0;
  virtual uint8_t Flag(int64_t pos) const = 0;
};

// Result of `_split_a_and_b`: A = [a_begin, a_end), B = [b_begin, b_end),
// |A| + |B| == tot_len; label 1 when B continues A.
struct ABSplit {
  int64_t a_begin = 0;
  int64_t a_end = 0;
  int64_t b_begin = 0;
  int64_t b_end = 0;
  int label = 0;
};

// The official `_split_a_and_b` from `begin` (needs begin + tot_len <
// length). Sentence-boundary scans stop after a bounded distance so a text
// without sentence breaks costs no more than a few windows.
ABSplit SplitAAndB(const StreamAccess& stream, int64_t begin, int64_t tot_len,
                   Rng& rng);

struct SpanOptions {
  int64_t mask_alpha = 6;
  int64_t mask_beta = 1;
  int64_t max_gram = 5;
  // Reproduce the official end test (spans of n pieces, dropped when they
  // reach the segment end) instead of spans of n words.
  bool official_quirks = false;
};

// What `SampleMask` chose, in the segment's own (unflipped) coordinates.
struct MaskResult {
  std::vector<uint8_t> mask;
  // Spans from the n-gram phase, [begin, end).
  std::vector<std::pair<int64_t, int64_t>> spans;
  // Single positions added afterwards to reach the budget.
  std::vector<int64_t> singles;
};

// The official `_sample_mask` over `ids[0, n)`: spans of n in 1..max_gram
// words (p ~ 1/n) in a context of n*alpha/beta, starting at a word-start
// piece, then random single positions up to `goal`. `reverse` samples on the
// flipped segment (backward streams). Never loops forever: when `goal`
// exceeds the segment every position is masked. With the fix (no quirks) a
// span of whole words never exceeds the remaining budget.
MaskResult SampleMask(const int32_t* ids, int64_t n,
                      const std::vector<uint8_t>& is_start_piece, bool reverse,
                      int64_t goal, const SpanOptions& options, Rng& rng);

// Output slots of one sample (pointers into batch tensors, row-major).
// Every element is written; the memory need not be initialised.
struct SampleOut {
  int64_t* input_ids = nullptr;       // [L]
  int64_t* token_type_ids = nullptr;  // [L]
  float* perm_mask = nullptr;         // [L, L]
  float* target_mapping = nullptr;    // [P, L]
  int64_t* target = nullptr;          // [P]
  float* target_mask = nullptr;       // [P]
  bool* is_masked = nullptr;          // [L]
  // A compact batch's (SamplerOptions::compact_masks) perm_mask and
  // target_mapping as bool instead: set these and leave the two float
  // pointers null.
  bool* perm_mask_bool = nullptr;       // [L, L]
  bool* target_mapping_bool = nullptr;  // [P, L]
};

// Optional details for display and tests.
struct SampleDebug {
  ABSplit split;
  int64_t reuse_begin = 0;  // stream position of the first token
  // Factorisation order index per position (-1 = unmasked, visible to all).
  std::vector<int64_t> order;
  MaskResult mask_reuse;
  MaskResult mask_rest;
};

// Builds the sample whose reuse part starts at stream position `pos`:
// [reuse (reuse_len), A, <sep>, B, <sep>, <cls>], segments 0/1/2, spans,
// permutation and targets. `reverse` marks a backward stream.
void BuildSample(const StreamAccess& stream, int64_t pos, bool reverse,
                 const DataConfig& config,
                 const std::vector<uint8_t>& is_start_piece, Rng& rng,
                 const SampleOut& out, SampleDebug* debug = nullptr);

}  // namespace xlnet::data
