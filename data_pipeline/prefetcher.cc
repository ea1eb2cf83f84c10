#include "data_pipeline/prefetcher.h"

#include <utility>

#include "data_pipeline/lm_batch.h"

namespace xlnet::data {

template <typename Batch>
Prefetcher<Batch>::Prefetcher(BuildFn build, int64_t threads, int64_t window,
                              int64_t first_step)
    : build_(std::move(build)),
      threads_(window > 0 && threads > 0 ? threads : 0),
      window_(window),
      next_step_(first_step),
      next_to_build_(first_step) {
  StartWorkers();
}

template <typename Batch>
Prefetcher<Batch>::~Prefetcher() {
  StopWorkers();
}

template <typename Batch>
void Prefetcher<Batch>::StartWorkers() {
  stop_ = false;
  for (int64_t t = 0; t < threads_; ++t) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

template <typename Batch>
void Prefetcher<Batch>::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

template <typename Batch>
void Prefetcher<Batch>::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || (next_to_build_ < next_step_ + window_ && !error_);
    });
    if (stop_) return;
    const int64_t step = next_to_build_++;
    lock.unlock();
    Batch batch;
    std::exception_ptr error;
    try {
      batch = build_(step);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      // Keep the earliest failure: Next() reaches it first.
      if (!error_ || step < error_step_) {
        error_ = error;
        error_step_ = step;
      }
    } else if (step >= next_step_) {
      ready_[step] = std::move(batch);
    }
    cv_.notify_all();
  }
}

template <typename Batch>
Batch Prefetcher<Batch>::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (threads_ == 0) {
    // Built under the lock so concurrent callers get consecutive steps;
    // the step advances only once its batch exists.
    Batch batch = build_(next_step_);
    ++next_step_;
    return batch;
  }
  // Every step before a failed one was claimed before it, so waiting for
  // the batch of next_step_ ends unless next_step_ itself failed.
  cv_.wait(lock, [&] {
    return ready_.count(next_step_) > 0 ||
           (error_ && error_step_ == next_step_);
  });
  auto it = ready_.find(next_step_);
  if (it == ready_.end()) std::rethrow_exception(error_);
  Batch batch = std::move(it->second);
  ready_.erase(it);
  ++next_step_;
  cv_.notify_all();
  return batch;
}

template <typename Batch>
int64_t Prefetcher<Batch>::next_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_step_;
}

template <typename Batch>
void Prefetcher<Batch>::Restart(int64_t step) {
  StopWorkers();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.clear();
    error_ = nullptr;
    error_step_ = -1;
    next_step_ = step;
    next_to_build_ = step;
  }
  StartWorkers();
}

template class Prefetcher<PlmBatch>;
template class Prefetcher<LmBatch>;

}  // namespace xlnet::data
