// Data parallel over c10d, the engine under torch.distributed: Gloo for CPU
// tensors (and CUDA tensors, staged through the host, when several ranks
// share one GPU), NCCL for CUDA tensors (when LibTorch was built with it).
//
// The launch environment (torchrun, SLURM, --nproc_per_node) is read by
// train/launch_env.h. Every collective has a timeout, so a dead or stuck rank
// ends the others with an error instead of a hang.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "train/launch_env.h"
#include "train/optimizer.h"

namespace xlnet {

// The class c10d's Gloo/NCCL implementations derive from: ProcessGroup in
// LibTorch 1.x, Backend in 2.x (same collective signatures).
#if TORCH_VERSION_MAJOR >= 2
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

class ProcessGroup {
 public:
  // Connects to the TCPStore at MASTER_ADDR:MASTER_PORT (served by rank 0,
  // or by torchrun's agent when env.use_agent_store, then used under
  // AgentStorePrefix) and creates `backend` ("gloo" or "nccl") for `device`.
  // `timeout` is the backend's and the collectives' (SetTimeout);
  // `rendezvous_timeout`, when given, bounds the wait for every rank to
  // reach the store instead.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> Init(
      const DistEnv& env, const torch::Device& device,
      const std::string& backend, std::chrono::milliseconds timeout,
      std::optional<std::chrono::milliseconds> rendezvous_timeout =
          std::nullopt);
  // Over an existing store (tests run ranks as threads over a HashStore).
  // Gloo takes cpu or cuda devices (CUDA tensors are staged through the
  // host by c10d); NCCL takes cuda only. Gloo binds to and advertises the
  // addresses of `gloo_interfaces` (env.gloo_interfaces, GLOO_SOCKET_IFNAME),
  // else c10d's default address; each rank logs its Gloo devices.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> FromStore(
      c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
      const torch::Device& device, const std::string& backend,
      std::chrono::milliseconds timeout,
      const std::vector<std::string>& gloo_interfaces = {});

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // How long a collective waits for the other ranks, and the setting that
  // says so (named in the timeout's error). The backend's own timeout (the
  // one given at creation) must be at least as long, or it fires first.
  void SetTimeout(std::chrono::milliseconds limit, std::string setting) {
    timeout_ = limit;
    timeout_setting_ = std::move(setting);
  }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& timeout_setting() const { return timeout_setting_; }
  // Waits for an asynchronous collective within timeout(); throws as the
  // collectives do.
  void Wait(c10d::Work& work) const;
  const std::string& backend() const { return backend_; }
  // Where the collectives run: this rank's cuda:N (NCCL, or Gloo over CUDA
  // tensors) or cpu.
  const torch::Device& device() const { return device_; }

  // Collectives; they throw (c10::Error / std::runtime_error) on failure or
  // timeout, which the trainer turns into a status at its boundary. The
  // blocking ones take tensors on any device (host tensors go through the
  // group's device: NCCL reduces CUDA tensors only); the asynchronous
  // all-reduce needs them on device().
  void AllReduceSum(std::vector<torch::Tensor>& tensors);
  c10::intrusive_ptr<c10d::Work> AllReduceSumAsync(
      std::vector<torch::Tensor>& tensors);
  void Broadcast(std::vector<torch::Tensor>& tensors, int root);
  void Barrier();
  // Errors unless every rank passes the same `value` (e.g. the resolved
  // config), naming `what` and the first rank that differs.
  absl::Status CheckSameOnAllRanks(const std::string& what,
                                   const std::string& value);
  // Whether this backend all-reduces `dtype` (Gloo in LibTorch 1.13 has no
  // bf16; NCCL has): one all-reduce of one element, a collective. An
  // unsupported dtype is FailedPrecondition naming `setting` and the
  // backend.
  absl::Status CheckAllReduceDtype(torch::ScalarType dtype,
                                   const std::string& setting);
  // Rank `root`'s `text` (at most kMaxAgreedBytes) into `text` on every
  // rank. Throws as the collectives do.
  void BroadcastText(std::string* text, int root);
  // Every rank's `value` against rank 0's, with `description` saying what a
  // person should compare (a path, a host, a fingerprint). Rank 0's value
  // and description go to every rank and the outcome back to all, so that
  // all ranks stop together. A rank that differs gets FailedPrecondition
  // "WHAT differs between ranks: rank R has DESC_R, but rank 0 has DESC_0;
  // FIX"; the others "WHAT differs between ranks: rank(s) R, ... differ
  // from rank 0's DESC_0 (their errors say how)". Values and descriptions
  // longer than kMaxAgreedBytes are compared and shown cut to that length.
  absl::Status AgreeWithRank0(const std::string& what, const std::string& value,
                              const std::string& description,
                              const std::string& fix);
  static constexpr size_t kMaxAgreedBytes = 4096;

 private:
  ProcessGroup() = default;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<C10dBackend> pg_;
  std::string backend_;
  torch::Device device_ = torch::kCPU;
  int rank_ = 0;
  int world_size_ = 1;
  std::chrono::milliseconds timeout_{0};
  std::string timeout_setting_ = "train.dist_timeout_s";
};

// Sets a group's timeout (ProcessGroup::SetTimeout) for a scope, e.g.
// train.io_timeout_s around a checkpoint save; no-op for a null group.
class ScopedTimeout {
 public:
  ScopedTimeout(ProcessGroup* group, std::chrono::milliseconds limit,
                std::string setting)
      : group_(group) {
    if (group_ == nullptr) return;
    saved_limit_ = group_->timeout();
    saved_setting_ = group_->timeout_setting();
    group_->SetTimeout(limit, std::move(setting));
  }
  ~ScopedTimeout() {
    if (group_ != nullptr) group_->SetTimeout(saved_limit_, saved_setting_);
  }
  ScopedTimeout(const ScopedTimeout&) = delete;
  ScopedTimeout& operator=(const ScopedTimeout&) = delete;

 private:
  ProcessGroup* group_;
  std::chrono::milliseconds saved_limit_{0};
  std::string saved_setting_;
};

// How GradientReducer buckets and sends gradients (train.grad_bucket_mb,
// train.first_grad_bucket_mb, train.grad_reduce_dtype).
struct GradReduceOptions {
  // Gradient bytes per bucket.
  int64_t bucket_bytes = 25 << 20;
  // Bytes of the first bucket, the gradients backward produces first.
  int64_t first_bucket_bytes = 1 << 20;
  // The all-reduce's dtype; nullopt or the parameters' own: in place.
  std::optional<torch::ScalarType> reduce_dtype;
};

// The options train.grad_bucket_mb, train.first_grad_bucket_mb and
// train.grad_reduce_dtype set.
GradReduceOptions GradReduceOptionsOf(const TrainConfig& train);

// Averages gradients over ranks in buckets, launched from autograd hooks as
// backward produces them (overlapping communication with the rest of
// backward), in the same bucket order on every rank. On accumulation
// micro-steps call Prepare(false): no communication at all.
//
// Each parameter's .grad shares storage with its bucket (like DDP's
// gradient_as_bucket_view): backward accumulates straight into the bucket,
// which is all-reduced and scaled in place, so no gradient is copied. A
// .grad that something replaced is copied back into its bucket at the next
// Prepare. With a reduce dtype other than the parameters' the bucket is
// cast into a buffer of that dtype for the all-reduce and back.
//
//   reducer.Prepare(/*sync=*/last_micro_step);
//   loss.backward();
//   reducer.Finish();   // grads now hold the mean over ranks
class GradientReducer {
 public:
  GradientReducer(ProcessGroup* group, NamedTensors params,
                  GradReduceOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void Prepare(bool sync);
  // Launches what is left (parameters that got no gradient count as zero),
  // waits for every bucket and writes the averaged gradients back.
  void Finish();
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Elements of bucket `i` (buckets in the order backward fills them).
  int64_t bucket_numel(int i) const { return buckets_[i].numel; }
  // Whether parameter `k`'s .grad is (still) its slice of its bucket.
  bool GradIsBucketView(size_t k) const;

 private:
  struct Bucket {
    std::vector<size_t> params;
    // Element offset of each of `params` in `flat`.
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    int pending = 0;
    bool launched = false;
    // [numel] in the parameters' dtype; the .grads share its storage.
    torch::Tensor flat;
    // [numel] in the reduce dtype when it differs from flat's; else empty.
    torch::Tensor wire;
    c10::intrusive_ptr<c10d::Work> work;
  };
  // Points every .grad at its bucket slice (copying a replaced one in).
  void BindGrads();
  void OnGradReady(size_t param_index);
  void Launch(size_t bucket_index);
  void LaunchReadyInOrder();

  ProcessGroup* group_;
  NamedTensors params_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::mutex mu_;
  bool sync_ = false;
  size_t next_launch_ = 0;
};

}  // namespace xlnet
