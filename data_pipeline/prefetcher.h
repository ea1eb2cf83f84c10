// Builds pretraining batches ahead of the consumer on background threads.
// One template for every batch type (PlmBatch, LmBatch); BatchPrefetcher is
// the permutation-LM one.
//
//   BatchPrefetcher prefetcher(
//       [this](int64_t step) { return BuildBatch(step, local_rows_); },
//       /*threads=*/2, /*window=*/4);
//   PlmBatch batch = prefetcher.Next();  // step 0, then 1, 2, ...
//   prefetcher.Restart(state.step);      // resume: drop what was built ahead
//
// A sampler's batch is a pure function of its step, so the batches of steps
// next_step() .. next_step() + window - 1 can be built concurrently by
// `threads` workers while the trainer runs the current step; Next() hands
// them out strictly in step order. The result is identical to building each
// batch inside Next(), for any thread count and window; with 0 threads or a
// 0 window that is what happens (no threads are started).
//
// Errors: an exception thrown by the build function for step k is rethrown
// by Next() when it reaches step k, never earlier (steps before k are still
// handed out). A failed step is not consumed: next_step() stays k. With
// workers, Next() then rethrows the same exception until Restart(); inline,
// it calls the build function again.
//
// The build function must be thread-safe, and everything it uses must
// outlive the prefetcher: its owner declares it after (or destroys it
// before) that state. The destructor stops and joins the workers; a build
// in progress finishes first.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "data_pipeline/plm_batch.h"

namespace xlnet::data {

// Instantiated for PlmBatch and LmBatch (prefetcher.cc).
template <typename Batch>
class Prefetcher {
 public:
  using BuildFn = std::function<Batch(int64_t step)>;

  // Starts `threads` workers building up to `window` batches ahead of
  // `first_step` (none when either is <= 0: Next() builds the batch).
  Prefetcher(BuildFn build, int64_t threads, int64_t window,
             int64_t first_step = 0);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The batch of next_step(), then advances it. Thread-safe.
  Batch Next();
  // The step the next Next() returns.
  int64_t next_step() const;
  // Drops every batch built ahead (and a pending error) and continues from
  // `step`. Waits for builds in progress to finish.
  void Restart(int64_t step);
  // Whether batches are built on worker threads.
  bool prefetching() const { return threads_ > 0; }

 private:
  void StartWorkers();
  void StopWorkers();
  void WorkerLoop();

  const BuildFn build_;
  const int64_t threads_;
  const int64_t window_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> ready_;     // built, not yet handed out
  int64_t next_step_ = 0;              // what Next() returns
  int64_t next_to_build_ = 0;          // what a worker builds next
  bool stop_ = false;
  // The first failed step and its exception; workers claim nothing more
  // once a step failed (every step before it is already claimed).
  int64_t error_step_ = -1;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

using BatchPrefetcher = Prefetcher<PlmBatch>;

}  // namespace xlnet::data
