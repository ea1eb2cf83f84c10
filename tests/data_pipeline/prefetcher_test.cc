// BatchPrefetcher: step order, restart, errors at their step, shutdown.
#include "data_pipeline/prefetcher.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace xlnet::data::testing {
namespace {

using std::chrono::milliseconds;

// A one-element batch that says which step it was built for.
PlmBatch BatchOf(int64_t step) {
  PlmBatch b;
  b.input_ids = torch::full({1, 1}, step, torch::kInt64);
  return b;
}

int64_t StepOf(const PlmBatch& b) { return b.input_ids.item<int64_t>(); }

// Records which steps were built, and on which threads.
class BuildLog {
 public:
  void Add(int64_t step) {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_TRUE(steps_.insert(step).second) << "step " << step << " twice";
    threads_.insert(std::this_thread::get_id());
  }
  std::set<int64_t> steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }

 private:
  mutable std::mutex mu_;
  std::set<int64_t> steps_;
  std::set<std::thread::id> threads_;
};

TEST(BatchPrefetcherTest, StepsComeInOrderFromSeveralThreads) {
  BuildLog log;
  // Uneven build times make later steps finish before earlier ones.
  BatchPrefetcher prefetcher(
      [&log](int64_t step) {
        std::this_thread::sleep_for(milliseconds((step * 7) % 5));
        log.Add(step);
        return BatchOf(step);
      },
      /*threads=*/3, /*window=*/4, /*first_step=*/10);
  EXPECT_TRUE(prefetcher.prefetching());
  for (int64_t step = 10; step < 40; ++step) {
    EXPECT_EQ(prefetcher.next_step(), step);
    EXPECT_EQ(StepOf(prefetcher.Next()), step);
  }
  EXPECT_EQ(prefetcher.next_step(), 40);
  // Never more than the window ahead of what was handed out.
  const std::set<int64_t> built = log.steps();
  EXPECT_EQ(*built.begin(), 10);
  EXPECT_LT(*built.rbegin(), 40 + 4);
  EXPECT_EQ(log.threads().count(std::this_thread::get_id()), 0u);
}

TEST(BatchPrefetcherTest, NoThreadsOrNoWindowBuildsInsideNext) {
  for (const auto& [threads, window] : {std::pair{0, 4}, std::pair{2, 0}}) {
    BuildLog log;
    BatchPrefetcher prefetcher(
        [&log](int64_t step) {
          log.Add(step);
          return BatchOf(step);
        },
        threads, window);
    EXPECT_FALSE(prefetcher.prefetching());
    std::this_thread::sleep_for(milliseconds(20));
    EXPECT_TRUE(log.steps().empty());  // nothing built ahead
    for (int64_t step = 0; step < 5; ++step) {
      EXPECT_EQ(StepOf(prefetcher.Next()), step);
    }
    EXPECT_EQ(log.threads(),
              std::set<std::thread::id>{std::this_thread::get_id()});
  }
}

TEST(BatchPrefetcherTest, RestartDropsWhatWasBuiltAheadAndContinues) {
  for (int threads : {0, 2}) {
    BatchPrefetcher prefetcher(
        [](int64_t step) {
          std::this_thread::sleep_for(milliseconds(step % 3));
          return BatchOf(step);
        },
        threads, /*window=*/5);
    for (int64_t step = 0; step < 6; ++step) {
      EXPECT_EQ(StepOf(prefetcher.Next()), step);
    }
    // Backwards: steps 2.. again, not the ones already built ahead.
    prefetcher.Restart(2);
    EXPECT_EQ(prefetcher.next_step(), 2);
    for (int64_t step = 2; step < 5; ++step) {
      EXPECT_EQ(StepOf(prefetcher.Next()), step);
    }
    // Forwards, past the window.
    prefetcher.Restart(100);
    EXPECT_EQ(prefetcher.next_step(), 100);
    EXPECT_EQ(StepOf(prefetcher.Next()), 100);
    EXPECT_EQ(StepOf(prefetcher.Next()), 101);
  }
}

TEST(BatchPrefetcherTest, AnErrorSurfacesAtItsStepAndNotBefore) {
  constexpr int64_t kBad = 5;
  for (int threads : {0, 3}) {
    BatchPrefetcher prefetcher(
        [](int64_t step) {
          // Step kBad fails at once while step kBad - 1 is still being
          // built: the failure must not overtake it.
          if (step == kBad) throw std::runtime_error("step 5 failed");
          if (step == kBad - 1) std::this_thread::sleep_for(milliseconds(50));
          return BatchOf(step);
        },
        threads, /*window=*/4);
    for (int64_t step = 0; step < kBad; ++step) {
      EXPECT_EQ(StepOf(prefetcher.Next()), step) << threads << " threads";
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        prefetcher.Next();
        ADD_FAILURE() << "no exception at step " << kBad;
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "step 5 failed");
      }
      // The failed step is not consumed.
      EXPECT_EQ(prefetcher.next_step(), kBad);
    }
    prefetcher.Restart(kBad + 1);
    EXPECT_EQ(StepOf(prefetcher.Next()), kBad + 1);
    EXPECT_EQ(StepOf(prefetcher.Next()), kBad + 2);
  }
}

TEST(BatchPrefetcherTest, DestructionWhileWorkersWaitOrBuildDoesNotHang) {
  // Workers idle on a full window.
  {
    BatchPrefetcher prefetcher(BatchOf, /*threads=*/4, /*window=*/2);
    EXPECT_EQ(StepOf(prefetcher.Next()), 0);
    std::this_thread::sleep_for(milliseconds(20));
  }
  // Never read.
  { BatchPrefetcher prefetcher(BatchOf, /*threads=*/2, /*window=*/3); }
  // Builds in progress: they finish, then the workers stop.
  {
    BatchPrefetcher prefetcher(
        [](int64_t step) {
          std::this_thread::sleep_for(milliseconds(30));
          return BatchOf(step);
        },
        /*threads=*/2, /*window=*/4);
    std::this_thread::sleep_for(milliseconds(5));
  }
  // Workers stopped after a failure.
  {
    BatchPrefetcher prefetcher(
        [](int64_t) -> PlmBatch { throw std::runtime_error("no data"); },
        /*threads=*/2, /*window=*/2);
    EXPECT_THROW(prefetcher.Next(), std::runtime_error);
  }
}

}  // namespace
}  // namespace xlnet::data::testing
