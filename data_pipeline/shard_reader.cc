#include "data_pipeline/shard_reader.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace xlnet::data {

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::Open(const std::string& dir,
                                                         bool verify) {
  XLNET_ASSIGN_OR_RETURN(const ShardManifest manifest, ReadManifest(dir));
  auto set = std::unique_ptr<ShardSet>(new ShardSet());
  set->dir_ = dir;
  set->tokenizer_file_ = dir + "/" + manifest.tokenizer_file;
  set->tokenizer_hash_ = manifest.tokenizer_hash;
  set->vocab_size_ = manifest.vocab_size;
  set->rules_ = manifest.rules;
  set->use_eod_ = manifest.use_eod;
  for (const ManifestShard& s : manifest.shards) {
    const std::string path = dir + "/" + s.file;
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                           MappedFile::Open(path));
    XLNET_ASSIGN_OR_RETURN(const ShardHeader h,
                           DecodeShardHeader(file->data(), file->size(), path));
    if (h.num_tokens != s.tokens || h.checksum != s.checksum) {
      return absl::DataLossError(absl::StrCat(
          path, ": does not match ", dir, "/", kManifestName,
          " (tokens or checksum differ); re-run xlnet-data prepare"));
    }
    if (verify && ShardBodyChecksum(file->data(), file->size()) != h.checksum) {
      return absl::DataLossError(
          absl::StrCat(path, ": checksum mismatch (corrupt shard)"));
    }
    const ShardLayout l = GetShardLayout(h.num_tokens, h.num_docs);
    ShardView view;
    view.path = path;
    view.num_tokens = static_cast<int64_t>(h.num_tokens);
    view.ids = reinterpret_cast<const int32_t*>(file->data() + l.ids);
    view.flags = reinterpret_cast<const uint8_t*>(file->data() + l.flags);
    XLNET_ASSIGN_OR_RETURN(view.docs, DecodeDocTable(file->data(), h, path));
    if (verify) {
      for (int64_t t = 0; t < view.num_tokens; ++t) {
        if (view.ids[t] < 0 || view.ids[t] >= set->vocab_size_ ||
            view.flags[t] > 1) {
          return absl::DataLossError(
              absl::StrCat(path, ": token ", t, " has id ", view.ids[t],
                           " outside the vocabulary of ", set->vocab_size_));
        }
      }
    }
    set->num_tokens_ += view.num_tokens;
    set->shards_.push_back(std::move(view));
    set->files_.push_back(std::move(file));
  }
  return set;
}

absl::StatusOr<Corpus> Corpus::Create(const ShardSet& shards, Split split,
                                      double eval_fraction) {
  // Pick held-out documents by content hash.
  struct DocRef {
    size_t shard;
    size_t doc;
    uint64_t hash;
  };
  std::vector<DocRef> all;
  for (size_t s = 0; s < shards.shards().size(); ++s) {
    const auto& docs = shards.shards()[s].docs;
    for (size_t d = 0; d < docs.size(); ++d) {
      all.push_back(DocRef{s, d, docs[d].hash});
    }
  }
  auto is_eval = [&](uint64_t hash) {
    return static_cast<double>(hash >> 11) * (1.0 / 9007199254740992.0) <
           eval_fraction;
  };
  std::vector<uint8_t> eval(all.size(), 0);
  bool any_eval = false;
  for (size_t i = 0; i < all.size(); ++i) {
    eval[i] = is_eval(all[i].hash);
    any_eval |= eval[i] != 0;
  }
  if (eval_fraction > 0 && !any_eval && all.size() >= 2) {
    size_t best = 0;
    for (size_t i = 1; i < all.size(); ++i) {
      if (all[i].hash < all[best].hash) best = i;
    }
    eval[best] = 1;
  }
  Corpus corpus;
  const bool want_eval = split == Split::kEval;
  for (size_t i = 0; i < all.size(); ++i) {
    if ((eval[i] != 0) != want_eval) continue;
    const ShardView& view = shards.shards()[all[i].shard];
    const DocEntry& doc = view.docs[all[i].doc];
    if (doc.end == doc.begin) continue;
    ++corpus.num_docs_;
    // Extend the previous segment when this document follows it directly.
    if (!corpus.segments_.empty()) {
      Segment& last = corpus.segments_.back();
      if (last.ids + last.length == view.ids + doc.begin) {
        last.length += doc.end - doc.begin;
        corpus.size_ += doc.end - doc.begin;
        continue;
      }
    }
    Segment seg;
    seg.start = corpus.size_;
    seg.ids = view.ids + doc.begin;
    seg.flags = view.flags + doc.begin;
    seg.length = doc.end - doc.begin;
    corpus.segments_.push_back(seg);
    corpus.size_ += seg.length;
  }
  // Keep the sentence flags alternating across segments.
  for (size_t s = 1; s < corpus.segments_.size(); ++s) {
    const Segment& prev = corpus.segments_[s - 1];
    Segment& cur = corpus.segments_[s];
    const uint8_t prev_last = prev.flags[prev.length - 1] ^ prev.invert;
    cur.invert = (cur.flags[0] == prev_last) ? 1 : 0;
  }
  if (corpus.size_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        shards.dir(), ": the ", want_eval ? "evaluation" : "training",
        " split holds no tokens (", all.size(), " documents, eval_fraction ",
        eval_fraction, ")"));
  }
  return corpus;
}

size_t Corpus::FindSegment(int64_t pos) const {
  auto it =
      std::upper_bound(segments_.begin(), segments_.end(), pos,
                       [](int64_t p, const Segment& s) { return p < s.start; });
  return static_cast<size_t>(it - segments_.begin()) - 1;
}

template <typename Fn>
void Corpus::ForEachPiece(int64_t begin, int64_t n, const char* caller,
                          Fn&& fn) const {
  TORCH_CHECK(begin >= 0 && n >= 0 && begin + n <= size_, "Corpus::", caller,
              " out of range");
  int64_t done = 0;
  for (size_t s = n > 0 ? FindSegment(begin) : 0; done < n; ++s) {
    const Segment& seg = segments_[s];
    const int64_t off = begin + done - seg.start;
    const int64_t take = std::min(n - done, seg.length - off);
    fn(seg, off, take, done);
    done += take;
  }
}

void Corpus::CopyIds(int64_t begin, int64_t n, int32_t* out) const {
  ForEachPiece(
      begin, n, "CopyIds",
      [out](const Segment& seg, int64_t off, int64_t take, int64_t done) {
        std::memcpy(out + done, seg.ids + off, 4 * take);
      });
}

void Corpus::CopyFlags(int64_t begin, int64_t n, uint8_t* out) const {
  ForEachPiece(
      begin, n, "CopyFlags",
      [out](const Segment& seg, int64_t off, int64_t take, int64_t done) {
        for (int64_t k = 0; k < take; ++k) {
          out[done + k] = seg.flags[off + k] ^ seg.invert;
        }
      });
}

int32_t Corpus::Id(int64_t pos) const {
  int32_t id;
  CopyIds(pos, 1, &id);
  return id;
}

}  // namespace xlnet::data
