// Saving a checkpoint while training goes on (train.background_save).
//
// The training thread takes a StateSnapshot of what the save writes: CPU
// tensors are cloned there (a memory copy); CUDA tensors are cloned on the
// device in stream order (a device-to-device copy, so the next steps'
// in-place updates cannot reach them) and copied into one page-locked host
// buffer later by the writer thread, on a side stream that first waits for
// those clones (LibTorch >= 2; with older LibTorch the training thread
// copies them to the host itself). A BackgroundJob then writes the files on its
// own thread; the trainer learns that it finished through the all-reduce every
// step already makes (train/trainer.cc), so the writer thread runs no
// collective.
//
// Why our own: LibTorch's C++ API has no asynchronous checkpointing
// (PyTorch's torch.distributed.checkpoint.async_save is Python only), and
// the checkpoint layout and its commit protocol are ours (model_io/).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/safetensors.h"

namespace xlnet {

// Copies of tensors taken off the live ones, by file name.
class StateSnapshot {
 public:
  using Files = std::map<std::string, NamedTensors>;

  // Copies `files`' tensors on the calling thread (CPU: clones; CUDA:
  // device clones in stream order, see the file comment). Copies of CUDA
  // tensors hold device memory until Host() has moved them to the host.
  static std::unique_ptr<StateSnapshot> Take(const Files& files);

  // The host copies, every tensor contiguous on the CPU. The first call
  // copies the device clones to the host (blocking the calling thread, not
  // the device's main stream) and frees them. One thread at a time.
  Files& Host();

  // Bytes of the copies.
  int64_t bytes() const { return bytes_; }

  // Bytes of the page-locked host buffer that Host() copies `files`' device
  // tensors into (each tensor's bytes rounded up to 64; CPU tensors take
  // none).
  static int64_t HostBufferBytes(const Files& files);

  // Allocates and frees a page-locked buffer of HostBufferBytes(files), so
  // that LibTorch's caching host allocator already holds one when the first
  // Host() of a snapshot of the same tensors asks for it. Page-locking
  // holds up every CUDA call of the process while it runs (about 1 s for
  // 1.6 GB on an H100), so a trainer calls this once where a stall costs
  // nothing, instead of inside its first background save. Returns the
  // bytes reserved: 0 without device tensors, or with LibTorch < 2 (whose
  // saves copy on the training thread).
  static int64_t ReserveHostBuffer(const Files& files);

 private:
  StateSnapshot() = default;

  Files files_;
  int64_t bytes_ = 0;
  // While device clones wait to be copied to the host: their device, and
  // the event recorded on its main stream after them, which the side stream
  // waits for (an opaque c10::Event, LibTorch >= 2); null otherwise.
  std::optional<torch::Device> device_;
  std::shared_ptr<void> clones_done_;
};

// One function run on its own thread (or, with RunNow, on the caller's);
// its status is read once it is done.
class BackgroundJob {
 public:
  // Starts `fn` on a new thread.
  static std::unique_ptr<BackgroundJob> Start(std::function<absl::Status()> fn);
  // Runs `fn` on the calling thread: done() is true on return.
  static std::unique_ptr<BackgroundJob> RunNow(
      const std::function<absl::Status()>& fn);
  // Joins the thread.
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Whether `fn` has returned (never blocks).
  bool done() const { return done_.load(std::memory_order_acquire); }
  // `fn`'s status once done(): an exception it threw becomes an Internal
  // error with its message.
  const absl::Status& status() const { return status_; }
  // Blocks until `fn` has returned; its status.
  const absl::Status& Wait();

 private:
  BackgroundJob() = default;
  void Run(const std::function<absl::Status()>& fn);

  std::thread thread_;
  absl::Status status_;
  std::atomic<bool> done_{false};
};

}  // namespace xlnet
