#include "train/distributed.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/version.h>

#if defined(XLNET_WITH_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "model/precision.h"

namespace xlnet {

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Init(
    const DistEnv& env, const torch::Device& device, const std::string& backend,
    std::chrono::milliseconds timeout,
    std::optional<std::chrono::milliseconds> rendezvous_timeout) {
  c10::intrusive_ptr<c10d::Store> store;
  XLNET_RETURN_IF_ERROR(CatchExceptions(
      absl::StrCat("rendezvous at ", env.master_addr, ":", env.master_port,
                   env.use_agent_store ? " (torchrun's agent store)" : ""),
      [&]() -> absl::Status {
        // As torch.distributed's env:// rendezvous does
        // (rendezvous.py, _create_c10d_store).
        c10d::TCPStoreOptions options;
        options.port = static_cast<uint16_t>(env.master_port);
        options.isServer = !env.use_agent_store && env.rank == 0;
        options.numWorkers = env.world_size;
        options.waitWorkers = true;
        options.timeout = rendezvous_timeout.value_or(timeout);
        store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
        if (env.use_agent_store) {
          store = c10::make_intrusive<c10d::PrefixStore>(
              AgentStorePrefix(env.restart_count), store);
        }
        return absl::OkStatus();
      }));
  if (env.use_agent_store && env.rank == 0) {
    XLOG(INFO) << "using torchrun's store at " << env.master_addr << ":"
               << env.master_port << " under "
               << AgentStorePrefix(env.restart_count);
  }
  return FromStore(store, env.rank, env.world_size, device, backend, timeout,
                   env.gloo_interfaces);
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::FromStore(
    c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
    const torch::Device& device, const std::string& backend,
    std::chrono::milliseconds timeout,
    const std::vector<std::string>& gloo_interfaces) {
  if (backend != "gloo" && backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown c10d backend '", backend, "' (gloo, nccl)"));
  }
  if (backend == "nccl" && !device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend nccl needs a cuda device, not ", device.str()));
  }
  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  group->store_ = store;
  group->rank_ = rank;
  group->world_size_ = world_size;
  group->timeout_ = timeout;
  group->device_ = device.is_cuda() ? device : torch::Device(torch::kCPU);
  XLNET_RETURN_IF_ERROR(CatchExceptions(
      absl::StrCat("creating the ", backend, " process group (rank ", rank,
                   " of ", world_size, ")"),
      [&]() -> absl::Status {
        if (backend == "nccl") {
#if defined(USE_C10D_NCCL)
          auto options = c10d::ProcessGroupNCCL::Options::create();
          options->timeout = timeout;
          group->pg_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(
              store, rank, world_size, options);
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
          // The device hint (Python's init_process_group(device_id=)): the
          // communicator is created now on this rank's GPU, and barriers
          // use it instead of guessing a device from the rank.
          group->pg_->setBoundDeviceId(device);
          group->pg_->eagerConnectSingleDevice(device);
#endif
          group->backend_ = "nccl";
          return absl::OkStatus();
#else
          return absl::FailedPreconditionError(
              "backend nccl needs a LibTorch built with NCCL (USE_C10D_NCCL; "
              "see XLNET_NCCL_ROOT in docs/building.md)");
#endif
        }
#if defined(XLNET_WITH_GLOO)
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        // As torch.distributed's ProcessGroupGloo does (c10d/init.cpp).
        for (const std::string& name : gloo_interfaces) {
          XLNET_RETURN_IF_ERROR(CatchExceptions(
              absl::StrCat("GLOO_SOCKET_IFNAME: interface '", name,
                           "' (name one that `ip -br addr` lists with an "
                           "address the other hosts reach)"),
              [&]() -> absl::Status {
                options->devices.push_back(
                    c10d::ProcessGroupGloo::createDeviceForInterface(name));
                return absl::OkStatus();
              }));
        }
        if (gloo_interfaces.empty()) {
          options->devices.push_back(
              c10d::ProcessGroupGloo::createDefaultDevice());
        }
        // "tcp, pci=..., iface=..., speed=..., addr=[ADDRESS]": where the
        // other ranks connect to this one.
        for (const auto& gloo_device : options->devices) {
          XLOG(INFO) << "gloo device: " << gloo_device->str();
        }
        group->pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
            store, rank, world_size, options);
        group->backend_ = "gloo";
        return absl::OkStatus();
#else
        return absl::FailedPreconditionError(
            "backend gloo (CPU data parallel, or ranks sharing a GPU) needs "
            "gloo headers, and this build found none in its LibTorch (see "
            "CMakeLists.txt); run one process or build against a LibTorch "
            "that ships them");
#endif
      }));
  return group;
}

namespace {

// Runs `collective` on copies of `tensors` placed on `device` where they live
// elsewhere (NCCL takes CUDA tensors only; the trainer's control messages --
// config hashes, step totals, barriers -- are host tensors), then copies the
// results back.
template <typename Collective>
void OnDevice(std::vector<torch::Tensor>& tensors, const torch::Device& device,
              Collective&& collective) {
  std::vector<torch::Tensor> staged;
  bool moved = false;
  for (const torch::Tensor& t : tensors) {
    moved = moved || t.device() != device;
    staged.push_back(t.device() == device ? t : t.to(device));
  }
  if (!moved) {
    collective(tensors);
    return;
  }
  collective(staged);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].device() != device) tensors[i].copy_(staged[i]);
  }
}

}  // namespace

// A lost peer or a timeout is rethrown with what it means for the run and
// what to do: the raw transport error ("Connection closed by peer
// [127.0.0.1]:44702", "Operation timed out!") names neither the dead rank
// nor the fix.
void ProcessGroup::Wait(c10d::Work& work) const {
  std::string what;
  try {
    work.wait(timeout_);
    return;
  } catch (const c10::Error& e) {
    what = e.what_without_backtrace();
  } catch (const std::exception& e) {
    what = e.what();
  }
  auto has = [&](const char* text) {
    return what.find(text) != std::string::npos;
  };
  if (has("closed by peer") || has("reset by peer") || has("Broken pipe") ||
      has("remote process exited")) {
    absl::StrAppend(&what,
                    " (another rank exited or lost its connection; its own "
                    "log says why. Stop every rank and start them all again "
                    "with --resume latest: the newest valid checkpoint "
                    "continues exactly)");
  } else if (has("Timed out") || has("timed out") || has("timeout")) {
    absl::StrAppend(&what, " (a rank did not join this collective within ",
                    timeout_setting_, " (", timeout_.count() / 1000.0,
                    " s): it is stuck, far slower than the others, or gone; "
                    "its own log says which. Restart every rank with "
                    "--resume latest)");
  }
  throw std::runtime_error(what);
}

void ProcessGroup::AllReduceSum(std::vector<torch::Tensor>& tensors) {
  OnDevice(tensors, device_, [this](std::vector<torch::Tensor>& t) {
    Wait(*AllReduceSumAsync(t));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::AllReduceSumAsync(
    std::vector<torch::Tensor>& tensors) {
  for (const torch::Tensor& t : tensors) {
    TORCH_CHECK(t.device() == device_,
                "asynchronous all-reduce of a tensor on ", t.device(),
                " in a process group on ", device_);
  }
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  return pg_->allreduce(tensors, options);
}

void ProcessGroup::Broadcast(std::vector<torch::Tensor>& tensors, int root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  OnDevice(tensors, device_, [&](std::vector<torch::Tensor>& t) {
    Wait(*pg_->broadcast(t, options));
  });
}

void ProcessGroup::Barrier() {
  // An all-reduce of one element doubles as a barrier on every backend.
  std::vector<torch::Tensor> one = {torch::ones({1})};
  AllReduceSum(one);
}

absl::Status ProcessGroup::CheckSameOnAllRanks(const std::string& what,
                                               const std::string& value) {
  // Each rank contributes its hash in its own slot; a sum gathers them all.
  const uint64_t hash = std::hash<std::string>{}(value);
  torch::Tensor slots = torch::zeros({world_size_}, torch::kInt64);
  slots[rank_] = static_cast<int64_t>(hash & 0x7fffffffffffffffull);
  std::vector<torch::Tensor> tensors = {slots};
  return CatchExceptions("checking " + what + " across ranks", [&]() {
    AllReduceSum(tensors);
    for (int r = 0; r < world_size_; ++r) {
      if (tensors[0][r].item<int64_t>() != tensors[0][0].item<int64_t>()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", r, " runs with a different ", what, " than rank 0"));
      }
    }
    return absl::OkStatus();
  });
}

absl::Status ProcessGroup::CheckAllReduceDtype(torch::ScalarType dtype,
                                               const std::string& setting) {
  try {
    std::vector<torch::Tensor> one = {
        torch::ones({1}, torch::TensorOptions(dtype).device(device_))};
    Wait(*pg_->allreduce(one));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    std::string what = e.what();
    what.resize(std::min(what.find('\n'), what.size()));
    return absl::FailedPreconditionError(absl::StrCat(
        setting, ": the ", backend_, " backend of this LibTorch cannot ",
        "all-reduce ", c10::toString(dtype), " tensors (", what,
        "); set it to fp32"));
  }
}

void ProcessGroup::BroadcastText(std::string* text, int root) {
  if (text->size() > kMaxAgreedBytes) text->resize(kMaxAgreedBytes);
  std::vector<torch::Tensor> size = {
      torch::tensor({static_cast<int64_t>(text->size())}, torch::kInt64)};
  Broadcast(size, root);
  const int64_t n = size[0][0].item<int64_t>();
  TORCH_CHECK(n >= 0 && n <= static_cast<int64_t>(kMaxAgreedBytes),
              "broadcast text of ", n, " bytes");
  // One int64 per byte: every backend broadcasts int64.
  torch::Tensor bytes = torch::zeros({n}, torch::kInt64);
  if (rank_ == root) {
    for (int64_t i = 0; i < n; ++i) {
      bytes[i] = static_cast<int64_t>(static_cast<unsigned char>((*text)[i]));
    }
  }
  std::vector<torch::Tensor> t = {bytes};
  if (n > 0) Broadcast(t, root);
  const torch::Tensor got = t[0].contiguous();
  const int64_t* data = got.data_ptr<int64_t>();
  text->assign(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) (*text)[i] = static_cast<char>(data[i]);
}

absl::Status ProcessGroup::AgreeWithRank0(const std::string& what,
                                          const std::string& value,
                                          const std::string& description,
                                          const std::string& fix) {
  return CatchExceptions("checking " + what + " across ranks", [&]() {
    std::string rank0_value = value;
    std::string rank0_description = description;
    BroadcastText(&rank0_value, 0);
    BroadcastText(&rank0_description, 0);
    const bool differs =
        rank0_value != value.substr(0, std::min(value.size(), kMaxAgreedBytes));
    torch::Tensor flags = torch::zeros({world_size_}, torch::kInt64);
    flags[rank_] = differs ? 1 : 0;
    std::vector<torch::Tensor> t = {flags};
    AllReduceSum(t);
    const torch::Tensor all = t[0].contiguous();
    std::vector<std::string> ranks;
    for (int r = 0; r < world_size_; ++r) {
      if (all[r].item<int64_t>() != 0) ranks.push_back(absl::StrCat(r));
    }
    if (differs) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " differs between ranks: rank ", rank_, " has ",
                       description.substr(0, kMaxAgreedBytes),
                       ", but rank 0 has ", rank0_description, "; ", fix));
    }
    if (!ranks.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " differs between ranks: rank(s) ",
                       absl::StrJoin(ranks, ", "), " differ from rank 0's ",
                       rank0_description, " (their errors say how)"));
    }
    return absl::OkStatus();
  });
}

GradReduceOptions GradReduceOptionsOf(const TrainConfig& train) {
  GradReduceOptions options;
  options.bucket_bytes =
      std::max<int64_t>(1, std::llround(train.grad_bucket_mb * (1 << 20)));
  options.first_bucket_bytes = std::max<int64_t>(
      1, std::llround(train.first_grad_bucket_mb * (1 << 20)));
  options.reduce_dtype = ScalarTypeOf(train.grad_reduce_dtype);
  return options;
}

GradientReducer::GradientReducer(ProcessGroup* group, NamedTensors params,
                                 GradReduceOptions options)
    : group_(group), params_(std::move(params)) {
  TORCH_CHECK(options.bucket_bytes > 0 && options.first_bucket_bytes > 0,
              "bucket sizes must be positive, got ", options.bucket_bytes,
              " and ", options.first_bucket_bytes);
  bucket_of_.resize(params_.size());
  // Gradients arrive roughly in reverse registration order: bucket from the
  // end so early buckets fill first.
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k].second;
    if (!p.requires_grad()) continue;
    const int64_t bytes = p.numel() * p.element_size();
    // The first bucket, filled first, is small so that its all-reduce
    // starts early in backward.
    const int64_t cap = buckets_.size() == 1 ? options.first_bucket_bytes
                                             : options.bucket_bytes;
    if (buckets_.empty() ||
        (!buckets_.back().params.empty() &&
         buckets_.back().numel * p.element_size() + bytes > cap) ||
        buckets_.back().flat.scalar_type() != p.scalar_type() ||
        buckets_.back().flat.device() != p.device()) {
      buckets_.push_back(Bucket{});
      // A placeholder carrying dtype and device; sized below.
      buckets_.back().flat = torch::empty({0}, p.options());
    }
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_) {
    b.flat = torch::zeros({b.numel}, b.flat.options());
    if (options.reduce_dtype && *options.reduce_dtype != b.flat.scalar_type()) {
      b.wire = torch::empty({b.numel},
                            b.flat.options().dtype(*options.reduce_dtype));
    }
  }
  BindGrads();
  for (size_t k = 0; k < params_.size(); ++k) {
    const torch::Tensor& p = params_[k].second;
    if (!p.requires_grad()) continue;
    auto accumulator = torch::autograd::impl::grad_accumulator(p);
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, k](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              OnGradReady(k);
              return outputs;
            })));
    accumulators_.push_back(std::move(accumulator));
  }
}

namespace {

// Whether `p`'s .grad is the slice of `flat` at element `offset`.
bool GradIsSliceAt(const torch::Tensor& p, const torch::Tensor& flat,
                   int64_t offset) {
  if (!p.grad().defined()) return false;
  const torch::Tensor& g = p.grad();
  return g.data_ptr() == static_cast<char*>(flat.data_ptr()) +
                             offset * flat.element_size() &&
         g.is_contiguous() && g.sizes() == p.sizes();
}

}  // namespace

bool GradientReducer::GradIsBucketView(size_t k) const {
  const torch::Tensor& p = params_[k].second;
  if (!p.requires_grad()) return false;
  const Bucket& b = buckets_[bucket_of_[k]];
  const size_t i = static_cast<size_t>(
      std::find(b.params.begin(), b.params.end(), k) - b.params.begin());
  return GradIsSliceAt(p, b.flat, b.offsets[i]);
}

void GradientReducer::BindGrads() {
  torch::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    for (size_t i = 0; i < b.params.size(); ++i) {
      const size_t k = b.params[i];
      // Once per micro-step: the slot is known, no search.
      if (GradIsSliceAt(params_[k].second, b.flat, b.offsets[i])) continue;
      torch::Tensor& p = params_[k].second;
      // [numel] slice of the bucket -> p's shape, sharing the storage (set_
      // rather than view(): a view's .grad could not be detached in place).
      torch::Tensor slice = torch::empty({0}, b.flat.options());
      slice.set_(b.flat.storage(), b.flat.storage_offset() + b.offsets[i],
                 p.sizes());
      if (p.grad().defined()) {
        slice.copy_(p.grad());
      } else {
        slice.zero_();
      }
      p.mutable_grad() = slice;
    }
  }
}

GradientReducer::~GradientReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
}

void GradientReducer::Prepare(bool sync) {
  BindGrads();
  std::lock_guard<std::mutex> lock(mu_);
  sync_ = sync;
  next_launch_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = false;
    b.work.reset();
  }
}

void GradientReducer::OnGradReady(size_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_) return;
  Bucket& b = buckets_[bucket_of_[k]];
  if (--b.pending == 0) LaunchReadyInOrder();
}

void GradientReducer::LaunchReadyInOrder() {
  // Collectives must be issued in the same order on every rank.
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].pending <= 0) {
    Launch(next_launch_++);
  }
}

void GradientReducer::Launch(size_t index) {
  Bucket& b = buckets_[index];
  torch::NoGradGuard no_grad;
  // The .grads are slices of b.flat: backward has already written them.
  torch::Tensor& sent = b.wire.defined() ? b.wire : b.flat;
  if (b.wire.defined()) b.wire.copy_(b.flat);
  std::vector<torch::Tensor> tensors = {sent};
  b.work = group_->AllReduceSumAsync(tensors);
  b.launched = true;
}

void GradientReducer::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sync_) return;
    for (Bucket& b : buckets_)
      b.pending = 0;  // unused parameters count as zero
    LaunchReadyInOrder();
  }
  torch::NoGradGuard no_grad;
  const double scale = 1.0 / group_->world_size();
  for (Bucket& b : buckets_) {
    group_->Wait(*b.work);
    if (b.wire.defined()) b.flat.copy_(b.wire);
    b.flat.mul_(scale);
  }
  sync_ = false;
}

}  // namespace xlnet
