#include "train/background_save.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <exception>

#include "absl/strings/str_cat.h"

#if TORCH_VERSION_MAJOR >= 2
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

namespace xlnet {

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
    snapshot->on_device_ = true;
  }
#endif
  return snapshot;
}

StateSnapshot::Files& StateSnapshot::Host() {
  if (!on_device_) return files_;
#if TORCH_VERSION_MAJOR >= 2
  torch::NoGradGuard no_grad;
  const auto* event = static_cast<const c10::Event*>(clones_done_.get());
  std::optional<torch::Device> device;
  for (const auto& [file, tensors] : files_) {
    for (const auto& [name, tensor] : tensors) {
      if (!tensor.is_cpu()) device = tensor.device();
    }
  }
  TORCH_CHECK(device.has_value(), "a snapshot on the device has no tensor");
  // A side stream, so that the copies overlap the training thread's kernels
  // instead of queueing behind them; it starts after the clones.
  c10::impl::VirtualGuardImpl impl(device->type());
  const c10::Stream side = impl.getStreamFromGlobalPool(*device);
  c10::StreamGuard guard(side);
  event->block(side);
  for (auto& [file, tensors] : files_) {
    for (auto& [name, tensor] : tensors) {
      if (tensor.is_cpu()) continue;
      // A blocking copy on the current (side) stream; the clone is freed
      // once its copy is done, so the allocator can reuse it safely.
      tensor = tensor.to(torch::kCPU);
    }
  }
  clones_done_.reset();
#endif
  on_device_ = false;
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
