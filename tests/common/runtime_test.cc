// Thread counts (common/runtime.h): never more than the machine's cores.
#include "common/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace xlnet {
namespace {

// `xlnet-run --threads 100000` once asked LibTorch for 100000 threads, which
// it started until the process was killed.
TEST(RuntimeTest, ThreadsAreCappedAtTheCores) {
  const int before = torch::get_num_threads();
  const int64_t cores =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  EXPECT_EQ(CapThreads(100000, "--threads"), cores);
  EXPECT_EQ(CapThreads(1, "--threads"), 1);
  EXPECT_EQ(ConfigureThreads(100000), cores);
  EXPECT_EQ(ConfigureThreads(0), cores);
  EXPECT_EQ(ConfigureThreads(1), 1);
  ConfigureThreads(before);
}

}  // namespace
}  // namespace xlnet
