#include "train/background_save.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace xlnet {
namespace {

TEST(BackgroundSaveTest, HostBufferBytesCountsDeviceTensorsAt64ByteSteps) {
  // Meta tensors stand in for device tensors (not on the CPU, no storage).
  const auto meta = torch::TensorOptions().device(torch::kMeta);
  StateSnapshot::Files files;
  files["a.safetensors"] = {
      {"w", torch::empty({3}, meta.dtype(torch::kFloat32))},  // 12 -> 64
      {"cpu", torch::zeros({1000}, torch::kFloat32)},         // on the host
      {"b", torch::empty({16, 4}, meta.dtype(torch::kBFloat16))}};  // 128
  files["b.safetensors"] = {
      {"m", torch::empty({65}, meta.dtype(torch::kUInt8))}};  // 65 -> 128
  EXPECT_EQ(StateSnapshot::HostBufferBytes(files), 64 + 128 + 128);

  StateSnapshot::Files host_only;
  host_only["c.safetensors"] = {{"x", torch::zeros({7}, torch::kFloat64)}};
  EXPECT_EQ(StateSnapshot::HostBufferBytes(host_only), 0);
  // Nothing to page-lock for host tensors: no allocation, 0 reserved.
  EXPECT_EQ(StateSnapshot::ReserveHostBuffer(host_only), 0);
}

TEST(BackgroundSaveTest, HostCopiesEqualTheTensorsAtTakeTime) {
  StateSnapshot::Files files;
  torch::Tensor w = torch::arange(6, torch::kFloat32).view({2, 3});
  files["a.safetensors"] = {{"w", w}};
  auto snapshot = StateSnapshot::Take(files);
  w.add_(100);  // a later in-place update must not reach the copy
  const auto& host = snapshot->Host();
  ASSERT_EQ(host.at("a.safetensors").size(), 1u);
  const torch::Tensor& copy = host.at("a.safetensors")[0].second;
  EXPECT_TRUE(copy.is_contiguous());
  EXPECT_TRUE(
      torch::equal(copy, torch::arange(6, torch::kFloat32).view({2, 3})));
  EXPECT_EQ(snapshot->bytes(), 24);
}

}  // namespace
}  // namespace xlnet
