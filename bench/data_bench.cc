// xlnet-bench-data: throughput of the data pipeline, measured in one run.
//
//   1. shard creation (`PrepareShards`) with 1 and 2 workers: tokens/s,
//      tokens/s per worker and the 2-vs-1 scaling;
//   2. the sampler at the xlnet-base data recipe (seq_len 512, reuse 256,
//      perm 256, num_predict 85, bi_data, global batch 32): batches/s built
//      on one thread, and through Next() with prefetching loader threads;
//   3. the batches the pretraining units take (SamplerOptions::compact_masks,
//      perm_mask and target_mapping as bool): the bytes a step copies to the
//      device, plain and compact, and batches/s on the calling thread.
//
// Without --tokenizer a tokenizer is trained on the input first (timed and
// reported separately).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/runtime.h"
#include "common/status.h"
#include "common/tool_main.h"
#include "data_pipeline/sampler.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

absl::Status Run(int argc, char** argv) {
  // The bundled sample, from the repository's root; a larger corpus with
  // --input.
  std::string input = "data/sample/brown_sample.txt";
  std::string tokenizer;
  std::string work_dir;
  // The demo's vocabulary (scripts/demo.sh): the bundled sample has room
  // for about 7,000 pieces.
  int64_t vocab_size = 1000;
  int64_t shard_kb = 256;
  int64_t batches = 20;
  int64_t loader_threads = 2;
  xlnet::FlagParser flags("xlnet-bench-data",
                          "[--input FILE] [--tokenizer spiece.model]");
  flags.AddString("input", &input, "text corpus (one sentence a line)");
  flags.AddString("tokenizer", &tokenizer,
                  "existing spiece.model (default: train one on --input)");
  flags.AddInt("vocab_size", &vocab_size,
               "vocabulary of the trained tokenizer");
  flags.AddInt("shard_kb", &shard_kb, "text KiB per shard (work unit)");
  flags.AddInt("batches", &batches, "sampler batches to time");
  flags.AddInt("loader_threads", &loader_threads,
               "prefetch threads for Next()");
  flags.AddString("work_dir", &work_dir,
                  "scratch directory (default: a temp dir)");
  XLNET_ASSIGN_OR_RETURN(const bool proceed,
                         flags.ParseCommandLine(argc, argv));
  if (!proceed) return absl::OkStatus();
  if (!xlnet::PathExists(input)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input ", input,
        ": no such file (the default is the bundled sample, relative to the "
        "repository's root: run from there or give --input)"));
  }
  bool remove_work_dir = false;
  if (work_dir.empty()) {
    char tmpl[] = "/tmp/xlnet_bench_data.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      return absl::InternalError("mkdtemp failed");
    work_dir = tmpl;
    remove_work_dir = true;
  }
  XLNET_RETURN_IF_ERROR(xlnet::MakeDirs(work_dir));
  std::cout << "xlnet-bench-data: " << xlnet::RuntimeSummary() << ", "
            << std::thread::hardware_concurrency() << " hardware threads\n";
  std::cout << "input " << input << " ("
            << std::filesystem::file_size(input) / 1024 << " KiB)\n";

  if (tokenizer.empty()) {
    xlnet::data::TokenizerTrainOptions o;
    o.inputs = {input};
    o.vocab_size = static_cast<int>(vocab_size);
    const auto t0 = Clock::now();
    XLNET_ASSIGN_OR_RETURN(std::string bytes, xlnet::data::TrainTokenizer(o));
    tokenizer = work_dir + "/spiece.model";
    XLNET_RETURN_IF_ERROR(xlnet::WriteFileAtomic(tokenizer, bytes));
    std::cout << absl::StrFormat("tokenizer: trained vocab %d in %.1f s\n",
                                 vocab_size, Seconds(t0));
  }

  // 1. Shards with 1 and 2 workers (fresh directories: nothing skipped).
  double rate[3] = {0, 0, 0};
  std::string dir;
  for (int workers : {1, 2}) {
    xlnet::data::PrepareOptions p;
    p.inputs = {input};
    p.tokenizer_path = tokenizer;
    p.out_dir = absl::StrFormat("%s/shards-w%d", work_dir, workers);
    p.workers = workers;
    p.shard_bytes = shard_kb * 1024;
    p.progress = false;
    XLNET_RETURN_IF_ERROR(xlnet::RemoveAll(p.out_dir));
    XLNET_ASSIGN_OR_RETURN(xlnet::data::PrepareReport r,
                           xlnet::data::PrepareShards(p));
    rate[workers] = r.tokens / r.seconds;
    std::cout << absl::StrFormat(
        "prepare, %d worker(s): %d shards, %d tokens in %.2f s = %.0f "
        "tokens/s (%.0f tokens/s per worker)\n",
        workers, r.shards, r.tokens, r.seconds, rate[workers],
        rate[workers] / workers);
    dir = p.out_dir;
  }
  std::cout << absl::StrFormat("prepare scaling 2 vs 1 workers: %.2fx\n",
                               rate[2] / rate[1]);

  // 2. Sampler at the base recipe.
  xlnet::data::SamplerOptions so;
  so.batch_size = 32;
  so.seed = 1234;
  so.data.prefetch_batches = 0;  // xlnet-base data defaults otherwise
  XLNET_ASSIGN_OR_RETURN(auto sampler, xlnet::data::Sampler::Create(dir, so));
  std::cout << absl::StrFormat(
      "sampler: seq_len %d, reuse_len %d, num_predict %d, bi_data %d, batch "
      "%d, %d streams of %d tokens, %d steps per epoch\n",
      so.data.seq_len, so.data.reuse_len, so.data.num_predict, so.data.bi_data,
      so.batch_size, sampler->num_streams(), sampler->stream_length(),
      sampler->steps_per_epoch());
  // A consumer that drops each batch at once gets the same (cache-warm)
  // buffers back from the pool; a trainer holding a few batches (copies to
  // the device, prefetch queues) sees cold ones. Both are timed.
  auto time_batches = [&](xlnet::data::Sampler& s, size_t hold) {
    std::vector<xlnet::data::PlmBatch> held(hold);
    for (size_t i = 0; i < hold + 1; ++i) {  // warm-up fills the pool
      xlnet::data::PlmBatch b = s.Next();
      if (hold) held[i % hold] = std::move(b);
    }
    const auto start = Clock::now();
    for (int64_t i = 0; i < batches; ++i) {
      xlnet::data::PlmBatch b = s.Next();
      if (hold) held[i % hold] = std::move(b);
    }
    return batches / Seconds(start);
  };
  const double tokens_per_batch = so.batch_size * so.data.seq_len;
  const double hot = time_batches(*sampler, 0);
  std::cout << absl::StrFormat(
      "sampler, calling thread, batch dropped at once: %.1f batches/s "
      "(%.0f tokens/s)\n",
      hot, hot * tokens_per_batch);
  const double cold = time_batches(*sampler, 8);
  std::cout << absl::StrFormat(
      "sampler, calling thread, consumer holds 8 batches: %.1f batches/s "
      "(%.0f tokens/s)\n",
      cold, cold * tokens_per_batch);

  so.data.prefetch_batches = 4;
  so.data.loader_threads = loader_threads;
  XLNET_ASSIGN_OR_RETURN(auto prefetching,
                         xlnet::data::Sampler::Create(dir, so));
  const double many_hot = time_batches(*prefetching, 0);
  std::cout << absl::StrFormat(
      "sampler, Next() with %d loader threads (prefetch 4), batch dropped at "
      "once: %.1f batches/s (%.0f tokens/s)\n",
      loader_threads, many_hot, many_hot * tokens_per_batch);
  const double many = time_batches(*prefetching, 8);
  std::cout << absl::StrFormat(
      "sampler, Next() with %d loader threads (prefetch 4), consumer holds 8: "
      "%.1f batches/s (%.0f tokens/s, %.2fx the calling thread)\n",
      loader_threads, many, many * tokens_per_batch, many / cold);

  // 3. What a step copies to the device: the fields PlmUnit copies (every
  //    one but is_masked), plain and compact.
  const auto device_bytes = [](const xlnet::data::PlmBatch& b) {
    int64_t n = 0;
    for (const auto& [name, t] : b.Named()) {
      if (name != "is_masked") n += t.numel() * t.element_size();
    }
    return n;
  };
  so.data.prefetch_batches = 0;
  so.compact_masks = true;
  XLNET_ASSIGN_OR_RETURN(auto compact, xlnet::data::Sampler::Create(dir, so));
  const int64_t plain_bytes = device_bytes(sampler->Next());
  const int64_t compact_bytes = device_bytes(compact->Next());
  const double compact_cold = time_batches(*compact, 8);
  std::cout << absl::StrFormat(
      "copied to the device a step: %.1f MB plain, %.1f MB compact (%.2fx); "
      "compact batches on the calling thread, consumer holds 8: %.1f "
      "batches/s (%.2fx plain)\n",
      plain_bytes / 1e6, compact_bytes / 1e6,
      static_cast<double>(plain_bytes) / compact_bytes, compact_cold,
      compact_cold / cold);
  if (remove_work_dir) XLNET_RETURN_IF_ERROR(xlnet::RemoveAll(work_dir));
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-bench-data", argc, argv, &Run);
}
