#include "train/background_save.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"

#if TORCH_VERSION_MAJOR >= 2
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

namespace xlnet {
namespace {

// Each tensor's place in the host buffer starts at a multiple of 64 bytes.
int64_t AlignedHostBytes(int64_t bytes) {
  constexpr int64_t kAlign = 64;
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

int64_t StateSnapshot::HostBufferBytes(const Files& files) {
  int64_t total = 0;
  for (const auto& [file, tensors] : files) {
    for (const auto& [name, tensor] : tensors) {
      if (!tensor.is_cpu()) {
        total += AlignedHostBytes(tensor.numel() * tensor.element_size());
      }
    }
  }
  return total;
}

int64_t StateSnapshot::ReserveHostBuffer(const Files& files) {
#if TORCH_VERSION_MAJOR >= 2
  const int64_t total = HostBufferBytes(files);
  if (total == 0) return 0;
  // Freed at once: the caching host allocator keeps the block for the
  // next request of its size class, which Host() makes.
  torch::empty({total},
               torch::TensorOptions(torch::kUInt8).pinned_memory(true));
  return total;
#else
  (void)files;
  return 0;
#endif
}

std::unique_ptr<StateSnapshot> StateSnapshot::Take(const Files& files) {
  std::unique_ptr<StateSnapshot> snapshot(new StateSnapshot());
  torch::NoGradGuard no_grad;
  std::optional<torch::Device> device;
  for (const auto& [file, tensors] : files) {
    NamedTensors& copies = snapshot->files_[file];
    for (const auto& [name, tensor] : tensors) {
      torch::Tensor copy;
      if (tensor.is_cpu()) {
        copy = tensor.clone(at::MemoryFormat::Contiguous);
      } else {
#if TORCH_VERSION_MAJOR >= 2
        // Stream-ordered: later kernels that update `tensor` in place run
        // after this copy on the same stream.
        copy = tensor.clone(at::MemoryFormat::Contiguous);
        TORCH_CHECK(!device || *device == tensor.device(),
                    "a snapshot's tensors are on one device: ", *device,
                    " and ", tensor.device());
        device = tensor.device();
#else
        copy = tensor.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true)
                   .contiguous();
#endif
      }
      snapshot->bytes_ += copy.numel() * copy.element_size();
      copies.emplace_back(name, copy);
    }
  }
#if TORCH_VERSION_MAJOR >= 2
  if (device) {
    c10::impl::VirtualGuardImpl impl(device->type());
    auto event = std::make_shared<c10::Event>(device->type());
    event->record(impl.getStream(*device));
    snapshot->clones_done_ = event;
    snapshot->device_ = device;
  }
#endif
  return snapshot;
}

StateSnapshot::Files& StateSnapshot::Host() {
  if (!clones_done_) return files_;
#if TORCH_VERSION_MAJOR >= 2
  torch::NoGradGuard no_grad;
  const auto* event = static_cast<const c10::Event*>(clones_done_.get());
  const torch::Device device = *device_;
  // A side stream, so that the copies overlap the training thread's kernels
  // instead of queueing behind them; it starts after the clones. The
  // copies go into one page-locked buffer, which LibTorch's host allocator
  // caches for the next save: DMA at full speed, and none of the driver's
  // staging of pageable copies, which the training thread's reads queue
  // behind (measured on an H100 at the base preset: the longest step
  // during a save 7-8x normal with pageable copies, 1.1-1.2x with this
  // buffer once cached). Page-locking holds up the training thread's CUDA
  // calls while it runs, so the first save of a run still costs one step
  // about 1 s (one buffer for all tensors: 0.85-1.1 s for 1.6 GB; one per
  // tensor was slower, 2.3 s).
  c10::impl::VirtualGuardImpl impl(device.type());
  const c10::Stream side = impl.getStreamFromGlobalPool(device);
  c10::StreamGuard guard(side);
  event->block(side);
  const torch::Tensor buffer =
      torch::empty({HostBufferBytes(files_)},
                   torch::TensorOptions(torch::kUInt8).pinned_memory(true));
  std::vector<torch::Tensor> clones;
  int64_t offset = 0;
  for (auto& [file, tensors] : files_) {
    for (auto& [name, tensor] : tensors) {
      if (tensor.is_cpu()) continue;
      const int64_t bytes = tensor.numel() * tensor.element_size();
      // [bytes] uint8 -> [numel] of the tensor's dtype -> its shape.
      torch::Tensor host = buffer.narrow(0, offset, bytes)
                               .view(tensor.scalar_type())
                               .view(tensor.sizes());
      host.copy_(tensor, /*non_blocking=*/true);
      clones.push_back(tensor);
      tensor = host;
      offset += AlignedHostBytes(bytes);
    }
  }
  side.synchronize();
  // The clones are freed only now that their copies are done, so the
  // allocator cannot hand their memory out while the side stream reads it.
  clones.clear();
  clones_done_.reset();
  device_.reset();
#endif
  return files_;
}

std::unique_ptr<BackgroundJob> BackgroundJob::Start(
    std::function<absl::Status()> fn) {
  std::unique_ptr<BackgroundJob> job(new BackgroundJob());
  BackgroundJob* raw = job.get();
  job->thread_ = std::thread([raw, fn = std::move(fn)]() { raw->Run(fn); });
  return job;
}

std::unique_ptr<BackgroundJob> BackgroundJob::RunNow(
    const std::function<absl::Status()>& fn) {
  std::unique_ptr<BackgroundJob> job(new BackgroundJob());
  job->Run(fn);
  return job;
}

BackgroundJob::~BackgroundJob() {
  if (thread_.joinable()) thread_.join();
}

const absl::Status& BackgroundJob::Wait() {
  if (thread_.joinable()) thread_.join();
  return status_;
}

void BackgroundJob::Run(const std::function<absl::Status()>& fn) {
  try {
    status_ = fn();
  } catch (const std::exception& e) {
    status_ = absl::InternalError(e.what());
  } catch (...) {
    status_ = absl::InternalError("unknown exception");
  }
  done_.store(true, std::memory_order_release);
}

}  // namespace xlnet
