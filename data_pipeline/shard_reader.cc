#include "data_pipeline/shard_reader.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace xlnet::data {

ShardSet::~ShardSet() = default;

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::Open(const std::string& dir,
                                                         bool verify) {
  XLNET_ASSIGN_OR_RETURN(const ShardManifest manifest, ReadManifest(dir));
  if (manifest.num_tasks > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": part ", manifest.task, " of ", manifest.num_tasks,
        " of a preparation split over hosts; when every part is done, run "
        "`xlnet-data combine --out PARENT` and read PARENT"));
  }
  auto set = std::unique_ptr<ShardSet>(new ShardSet());
  set->checks_.reset(new Check[manifest.shards.size()]);
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
    XLNET_RETURN_IF_ERROR(CheckShardMatchesManifest(h, s, dir));
    const ShardLayout l = GetShardLayout(h);
    ShardView view;
    view.path = path;
    view.num_tokens = static_cast<int64_t>(h.num_tokens);
    view.ids = file->bytes() + l.ids;
    view.id_bytes = l.id_bytes;
    view.flags = reinterpret_cast<const uint8_t*>(file->data() + l.flags);
    XLNET_ASSIGN_OR_RETURN(view.docs, DecodeDocTable(file->data(), h, path));
    set->num_tokens_ += view.num_tokens;
    set->shards_.push_back(std::move(view));
    set->headers_.push_back(h);
    set->files_.push_back(std::move(file));
  }
  if (verify) {
    for (size_t i = 0; i < set->shards_.size(); ++i) {
      XLNET_RETURN_IF_ERROR(set->Verify(i));
    }
  }
  return set;
}

absl::Status ShardSet::Verify(size_t index) const {
  TORCH_CHECK(index < shards_.size(), "shard ", index, " of ", shards_.size());
  Check& check = checks_[index];
  if (check.passed.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(check.mu);
  if (!check.result) {
    const MappedFile& file = *files_[index];
    check.result = VerifyShardBody(file.data(), file.size(), headers_[index],
                                   vocab_size_, shards_[index].path);
    check.passed.store(check.result->ok(), std::memory_order_release);
  }
  return *check.result;
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
  corpus.shards_ = &shards;
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
      if (last.shard == all[i].shard &&
          last.ids + last.length * last.id_bytes ==
              view.ids + doc.begin * view.id_bytes) {
        last.length += doc.end - doc.begin;
        corpus.size_ += doc.end - doc.begin;
        continue;
      }
    }
    Segment seg;
    seg.start = corpus.size_;
    seg.ids = view.ids + doc.begin * view.id_bytes;
    seg.id_bytes = static_cast<uint8_t>(view.id_bytes);
    seg.flags = view.flags + doc.begin;
    seg.length = doc.end - doc.begin;
    seg.shard = static_cast<uint32_t>(all[i].shard);
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
    const absl::Status verified = shards_->Verify(seg.shard);
    if (!verified.ok()) throw CorruptShardError(verified);
    fn(seg, off, take, done);
    done += take;
  }
}

void Corpus::CopyIds(int64_t begin, int64_t n, int32_t* out) const {
  ForEachPiece(
      begin, n, "CopyIds",
      [out](const Segment& seg, int64_t off, int64_t take, int64_t done) {
        if (seg.id_bytes == 4) {
          std::memcpy(out + done, seg.ids + 4 * off, 4 * take);
          return;
        }
        const uint8_t* p = seg.ids + 2 * off;
        for (int64_t k = 0; k < take; ++k) {
          uint16_t id;
          std::memcpy(&id, p + 2 * k, 2);
          out[done + k] = id;
        }
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
