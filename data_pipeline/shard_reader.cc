#include "data_pipeline/shard_reader.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace xlnet::data {
namespace {

std::atomic<int64_t> g_shard_bytes_read{0};

// Whether a document of content hash `hash` is held out at `eval_fraction`.
bool IsEval(uint64_t hash, double eval_fraction) {
  return static_cast<double>(hash >> 11) * (1.0 / 9007199254740992.0) <
         eval_fraction;
}

}  // namespace

int64_t ShardBytesRead() {
  return g_shard_bytes_read.load(std::memory_order_relaxed);
}

ShardSet::~ShardSet() = default;

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::Make(
    const std::string& dir, ShardManifest manifest) {
  auto set = std::unique_ptr<ShardSet>(new ShardSet());
  const size_t n = manifest.shards.size();
  set->slots_.reset(new Slot[n]);
  set->files_.resize(n);
  set->shards_.resize(n);
  set->headers_.resize(n);
  set->dir_ = dir;
  set->tokenizer_file_ = dir + "/" + manifest.tokenizer_file;
  for (const ManifestShard& s : manifest.shards) {
    set->num_tokens_ += static_cast<int64_t>(s.tokens);
  }
  set->manifest_ = std::move(manifest);
  return set;
}

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::OpenLazy(
    const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(ShardManifest manifest, ReadManifest(dir));
  if (manifest.num_tasks > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": part ", manifest.task, " of ", manifest.num_tasks,
        " of a preparation split over hosts; when every part is done, run "
        "`xlnet-data combine --out PARENT` and read PARENT"));
  }
  return Make(dir, std::move(manifest));
}

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::Open(const std::string& dir,
                                                         bool verify) {
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<ShardSet> set, OpenLazy(dir));
  for (size_t i = 0; i < set->size(); ++i) {
    XLNET_RETURN_IF_ERROR(verify ? set->Verify(i) : set->Load(i).status());
  }
  return set;
}

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::OpenWithManifest(
    const std::string& dir, const ShardManifest& manifest) {
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<ShardSet> set, Make(dir, manifest));
  for (size_t i = 0; i < set->size(); ++i) {
    XLNET_RETURN_IF_ERROR(set->Load(i).status());
  }
  return set;
}

absl::Status ShardSet::LoadLocked(size_t index) const {
  const ManifestShard& s = manifest_.shards[index];
  const std::string path = dir_ + "/" + s.file;
  XLNET_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                         MappedFile::Open(path));
  XLNET_ASSIGN_OR_RETURN(const ShardHeader h,
                         DecodeShardHeader(file->data(), file->size(), path));
  XLNET_RETURN_IF_ERROR(CheckShardMatchesManifest(h, s, dir_));
  const ShardLayout l = GetShardLayout(h);
  ShardView view;
  view.path = path;
  view.num_tokens = static_cast<int64_t>(h.num_tokens);
  view.ids = file->bytes() + l.ids;
  view.id_bytes = l.id_bytes;
  view.flags = reinterpret_cast<const uint8_t*>(file->data() + l.flags);
  XLNET_ASSIGN_OR_RETURN(view.docs, DecodeDocTable(file->data(), h, path));
  // The header and the two u64 columns of the document table.
  g_shard_bytes_read.fetch_add(
      static_cast<int64_t>(kShardHeaderBytes + 16 * h.num_docs),
      std::memory_order_relaxed);
  shards_[index] = std::move(view);
  headers_[index] = h;
  files_[index] = std::move(file);
  return absl::OkStatus();
}

absl::StatusOr<const ShardView*> ShardSet::Load(size_t index) const {
  TORCH_CHECK(index < size(), "shard ", index, " of ", size());
  Slot& slot = slots_[index];
  if (!slot.loaded.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(slot.mu);
    if (!slot.load_result) {
      slot.load_result = LoadLocked(index);
      slot.loaded.store(slot.load_result->ok(), std::memory_order_release);
    }
    if (!slot.load_result->ok()) return *slot.load_result;
  }
  return &shards_[index];
}

absl::Status ShardSet::Verify(size_t index) const {
  TORCH_CHECK(index < size(), "shard ", index, " of ", size());
  Slot& slot = slots_[index];
  if (slot.passed.load(std::memory_order_acquire)) return absl::OkStatus();
  XLNET_RETURN_IF_ERROR(Load(index).status());
  std::lock_guard<std::mutex> lock(slot.mu);
  if (!slot.verify_result) {
    const MappedFile& file = *files_[index];
    const ShardHeader& h = headers_[index];
    slot.verify_result = VerifyShardBody(
        file.data(), file.size(), h, manifest_.vocab_size, shards_[index].path);
    // The ids, the flags and their padding (the checksum pass also reads
    // the document table, counted by Load).
    const ShardLayout l = GetShardLayout(h);
    g_shard_bytes_read.fetch_add(static_cast<int64_t>(l.docs - l.ids),
                                 std::memory_order_relaxed);
    slot.passed.store(slot.verify_result->ok(), std::memory_order_release);
  }
  return *slot.verify_result;
}

struct Corpus::Part {
  uint32_t shard = 0;
  // Corpus position of the part's first token, and its tokens.
  int64_t start = 0;
  int64_t length = 0;
  // Non-empty documents.
  int64_t docs = 0;
  // The effective sentence flag of the split's token before this part; -1
  // when it is the first.
  int prev_flag = -1;
  // The effective flag of the part's last token.
  uint8_t last_flag = 0;
  Selection selection;
  // Segments formed (at once, or on first use per slice).
  std::atomic<bool> ready{false};
  std::mutex mu;
  std::optional<absl::Status> error;
  std::vector<Segment> segments;
};

Corpus::Corpus() = default;
Corpus::~Corpus() = default;
Corpus::Corpus(Corpus&&) noexcept = default;
Corpus& Corpus::operator=(Corpus&&) noexcept = default;

namespace {

// The document held out by the at-least-one rule (shard, document), or
// {-1, -1}: with eval_fraction > 0, two or more documents and none whose
// hash falls below it, the one of least hash. Every shard is loaded.
std::pair<int64_t, int64_t> ForcedEvalDoc(const ShardSet& shards,
                                          double eval_fraction) {
  if (eval_fraction <= 0) return {-1, -1};
  size_t count = 0;
  std::pair<int64_t, int64_t> best{-1, -1};
  uint64_t best_hash = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const auto& docs = shards.shards()[s].docs;
    for (size_t d = 0; d < docs.size(); ++d) {
      if (IsEval(docs[d].hash, eval_fraction)) return {-1, -1};
      if (count == 0 || docs[d].hash < best_hash) {
        best = {static_cast<int64_t>(s), static_cast<int64_t>(d)};
        best_hash = docs[d].hash;
      }
      ++count;
    }
  }
  return count >= 2 ? best : std::pair<int64_t, int64_t>{-1, -1};
}

}  // namespace

void Corpus::FormSegments(const ShardView& view, const Selection& selection,
                          Part* part, int64_t* docs, uint8_t* last_flag) {
  part->segments.clear();
  int64_t pos = part->start;
  int64_t end_token = -1;  // shard offset where the last segment ends
  *docs = 0;
  for (size_t d = 0; d < view.docs.size(); ++d) {
    const DocEntry& doc = view.docs[d];
    const bool eval = IsEval(doc.hash, selection.eval_fraction) ||
                      static_cast<int64_t>(d) == selection.forced_doc;
    if (eval != selection.want_eval || doc.end == doc.begin) continue;
    ++*docs;
    const int64_t n = doc.end - doc.begin;
    // Extend the previous segment when this document follows it directly.
    if (!part->segments.empty() && end_token == doc.begin) {
      part->segments.back().length += n;
    } else {
      Segment seg;
      seg.start = pos;
      seg.ids = view.ids + doc.begin * view.id_bytes;
      seg.id_bytes = static_cast<uint8_t>(view.id_bytes);
      seg.flags = view.flags + doc.begin;
      seg.length = n;
      part->segments.push_back(seg);
    }
    end_token = doc.end;
    pos += n;
  }
  // Keep the sentence flags alternating across segments.
  int prev_last = part->prev_flag;
  for (Segment& seg : part->segments) {
    seg.invert = prev_last >= 0 && seg.flags[0] == prev_last ? 1 : 0;
    prev_last = seg.flags[seg.length - 1] ^ seg.invert;
  }
  *last_flag = static_cast<uint8_t>(std::max(prev_last, 0));
  part->length = pos - part->start;
}

absl::StatusOr<Corpus> Corpus::Create(const ShardSet& shards, Split split,
                                      double eval_fraction) {
  return Build(shards, split, eval_fraction, /*use_record=*/true);
}

absl::StatusOr<Corpus> Corpus::Build(const ShardSet& shards, Split split,
                                     double eval_fraction, bool use_record) {
  Corpus corpus;
  corpus.shards_ = &shards;
  corpus.split_ = split;
  corpus.eval_fraction_ = eval_fraction;
  const bool want_eval = split == Split::kEval;
  const int k = want_eval ? 1 : 0;
  const std::optional<ManifestSplit>& recorded = shards.split();
  int64_t all_docs = 0;
  if (use_record && recorded && recorded->eval_fraction == eval_fraction &&
      recorded->shards.size() == shards.size()) {
    // Placed from the manifest; shards load as reads reach them.
    corpus.per_slice_ = true;
    for (size_t s = 0; s < shards.size(); ++s) {
      all_docs += static_cast<int64_t>(shards.manifest_shards()[s].docs);
      const ManifestSplit::Part& rec = recorded->shards[s][k];
      if (rec.tokens == 0) continue;
      auto part = std::make_unique<Part>();
      part->shard = static_cast<uint32_t>(s);
      part->start = corpus.size_;
      part->length = static_cast<int64_t>(rec.tokens);
      part->docs = static_cast<int64_t>(rec.docs);
      part->prev_flag =
          corpus.size_ > 0 ? recorded->shards[s - 1][k].last_flag : -1;
      part->last_flag = rec.last_flag;
      part->selection =
          Selection{want_eval, eval_fraction,
                    recorded->forced_shard == static_cast<int64_t>(s)
                        ? recorded->forced_doc
                        : -1};
      corpus.size_ += part->length;
      corpus.num_docs_ += part->docs;
      corpus.parts_.push_back(std::move(part));
    }
  } else {
    // Every shard's document table decides the split.
    for (size_t s = 0; s < shards.size(); ++s) {
      XLNET_RETURN_IF_ERROR(shards.Load(s).status());
      all_docs += static_cast<int64_t>(shards.shards()[s].docs.size());
    }
    const auto forced = ForcedEvalDoc(shards, eval_fraction);
    int prev_flag = -1;
    for (size_t s = 0; s < shards.size(); ++s) {
      auto part = std::make_unique<Part>();
      part->shard = static_cast<uint32_t>(s);
      part->start = corpus.size_;
      part->prev_flag = prev_flag;
      part->selection = Selection{
          want_eval, eval_fraction,
          forced.first == static_cast<int64_t>(s) ? forced.second : -1};
      FormSegments(shards.shards()[s], part->selection, part.get(), &part->docs,
                   &part->last_flag);
      if (part->length == 0) continue;
      prev_flag = part->last_flag;
      part->ready.store(true, std::memory_order_release);
      corpus.size_ += part->length;
      corpus.num_docs_ += part->docs;
      corpus.parts_.push_back(std::move(part));
    }
  }
  if (corpus.size_ == 0 && use_record) {
    return absl::FailedPreconditionError(absl::StrCat(
        shards.dir(), ": the ", want_eval ? "evaluation" : "training",
        " split holds no tokens (", all_docs, " documents, eval_fraction ",
        eval_fraction, ")"));
  }
  return corpus;
}

const std::vector<int64_t>* Corpus::recorded_unigram() const {
  if (!per_slice_ || split_ != Split::kTrain) return nullptr;
  return &shards_->split()->train_unigram;
}

const std::vector<Corpus::Segment>& Corpus::Segments(const Part& cpart) const {
  Part& part = const_cast<Part&>(cpart);
  if (part.ready.load(std::memory_order_acquire)) return part.segments;
  std::lock_guard<std::mutex> lock(part.mu);
  if (!part.error && !part.ready.load(std::memory_order_relaxed)) {
    absl::Status status = shards_->Verify(part.shard);
    if (status.ok()) {
      const int64_t expected = part.length;
      int64_t docs = 0;
      uint8_t last_flag = 0;
      FormSegments(*shards_->Load(part.shard).value(), part.selection, &part,
                   &docs, &last_flag);
      if (part.length != expected || docs != part.docs ||
          last_flag != part.last_flag) {
        status = absl::DataLossError(absl::StrCat(
            shards_->dir(), "/", kManifestName, ": its split of ",
            shards_->manifest_shards()[part.shard].file, " (", expected,
            " tokens, ", part.docs, " documents) is not what the shard holds (",
            part.length, " tokens, ", docs,
            " documents); re-run xlnet-data prepare"));
        part.length = expected;
        part.segments.clear();
      }
    }
    if (status.ok()) {
      part.ready.store(true, std::memory_order_release);
    } else {
      part.error = status;
    }
  }
  if (part.error) throw CorruptShardError(*part.error);
  return part.segments;
}

size_t Corpus::FindPart(int64_t pos) const {
  auto it = std::upper_bound(
      parts_.begin(), parts_.end(), pos,
      [](int64_t p, const std::unique_ptr<Part>& s) { return p < s->start; });
  return static_cast<size_t>(it - parts_.begin()) - 1;
}

template <typename Fn>
void Corpus::ForEachPiece(int64_t begin, int64_t n, const char* caller,
                          Fn&& fn) const {
  TORCH_CHECK(begin >= 0 && n >= 0 && begin + n <= size_, "Corpus::", caller,
              " out of range");
  int64_t done = 0;
  for (size_t p = n > 0 ? FindPart(begin) : 0; done < n; ++p) {
    const Part& part = *parts_[p];
    const std::vector<Segment>& segments = Segments(part);
    const absl::Status verified = shards_->Verify(part.shard);
    if (!verified.ok()) throw CorruptShardError(verified);
    auto it = std::upper_bound(
        segments.begin(), segments.end(), begin + done,
        [](int64_t q, const Segment& s) { return q < s.start; });
    for (size_t s = static_cast<size_t>(it - segments.begin()) - 1;
         done < n && s < segments.size(); ++s) {
      const Segment& seg = segments[s];
      const int64_t off = begin + done - seg.start;
      const int64_t take = std::min(n - done, seg.length - off);
      fn(seg, off, take, done);
      done += take;
    }
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

absl::StatusOr<ManifestSplit> RecordSplit(const ShardSet& shards,
                                          double eval_fraction) {
  ManifestSplit out;
  out.eval_fraction = eval_fraction;
  out.shards.resize(shards.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    XLNET_RETURN_IF_ERROR(shards.Load(s).status());
  }
  const auto forced = ForcedEvalDoc(shards, eval_fraction);
  out.forced_shard = forced.first;
  out.forced_doc = forced.second;
  out.train_unigram.assign(shards.vocab_size(), 0);
  for (const Split split : {Split::kTrain, Split::kEval}) {
    const int k = split == Split::kEval ? 1 : 0;
    XLNET_ASSIGN_OR_RETURN(
        const Corpus corpus,
        Corpus::Build(shards, split, eval_fraction, /*use_record=*/false));
    uint8_t carried = 0;
    size_t p = 0;
    for (size_t s = 0; s < shards.size(); ++s) {
      ManifestSplit::Part& rec = out.shards[s][k];
      if (p < corpus.parts_.size() && corpus.parts_[p]->shard == s) {
        const Corpus::Part& part = *corpus.parts_[p++];
        rec.tokens = static_cast<uint64_t>(part.length);
        rec.docs = static_cast<uint64_t>(part.docs);
        carried = part.last_flag;
      }
      rec.last_flag = carried;
    }
    if (split != Split::kTrain) continue;
    std::vector<int32_t> chunk(1 << 20);
    try {
      for (int64_t begin = 0; begin < corpus.size(); begin += chunk.size()) {
        const int64_t n =
            std::min<int64_t>(chunk.size(), corpus.size() - begin);
        corpus.CopyIds(begin, n, chunk.data());
        // Verified ids lie in [0, vocab_size).
        for (int64_t i = 0; i < n; ++i) ++out.train_unigram[chunk[i]];
      }
    } catch (const CorruptShardError& e) {
      return e.status();
    }
  }
  return out;
}

}  // namespace xlnet::data
