// The fibers behind emulation.h: each block's threads run as ucontext
// fibers, round robin, in the calling OS thread; a fiber gives the CPU up
// only where it waits for others (a barrier or a warp-wide operation), so
// between those points its code runs exactly as written.
#include "model/cuda/emulation.h"

#include <ucontext.h>

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define XLNET_EMULATION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XLNET_EMULATION_ASAN 1
#endif
#endif

#ifdef XLNET_EMULATION_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_emulation {
namespace {

constexpr int kWarpSize = 32;
// Per fiber; the kernels' frames are a few KiB.
#ifdef XLNET_EMULATION_ASAN
constexpr size_t kStackBytes = 1 << 20;
#else
constexpr size_t kStackBytes = 256 << 10;
#endif
constexpr int kMaxWords = 8;  // per lane and warp-wide operation

struct PendingCopy {
  void* dst;
  const void* src;
  int size, valid;
};

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  uint3 index;
  bool done = false;
  // The block barrier generation this fiber waits to pass, or -1.
  int64_t waits_for_block = -1;
  // Warp-wide operations this lane has done: picks the slot buffer.
  uint64_t warp_ops = 0;
  std::vector<PendingCopy> copies;  // cp.async not yet waited for
};

// One buffer of a warp's exchange: what each lane gave.
struct Slots {
  const char* op = nullptr;
  int words = 0;
  uint32_t w[kWarpSize][kMaxWords];
};

struct Warp {
  int arrived = 0;
  uint64_t generation = 0;
  Slots slots[2];  // operation n uses slots[n % 2]
};

struct Block {
  uint3 index;
  int live = 0;  // threads that have not returned
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<Warp> warps;
};

struct Runtime {
  dim3 grid, block;
  std::vector<unsigned char> shared;
  Block current;
  std::vector<Fiber> fibers;
  Fiber* running = nullptr;
  ucontext_t scheduler;
  const std::function<void()>* body = nullptr;
  bool progress = false;
  bool failed = false;
  std::string message;
  cudaError_t last_error = cudaSuccess;
  CopyTiming timing = CopyTiming::kAtWait;
  Schedule schedule = Schedule::kLockstep;
#ifdef XLNET_EMULATION_ASAN
  void* fake_stack = nullptr;
  const void* main_bottom = nullptr;
  size_t main_size = 0;
#endif
};

thread_local Runtime rt;
// The error of the last launch (cudaGetLastError reads and clears it).
thread_local std::string last_message;
// Each kernel's cudaFuncAttributeMaxDynamicSharedMemorySize, by KernelKey
// (as on the GPU, it stays set for later launches).
thread_local std::unordered_map<uintptr_t, size_t> max_dynamic_shared;

Fiber& Running() { return *rt.running; }

// Fiber -> scheduler.
void SwitchToScheduler() {
  Fiber& f = Running();
#ifdef XLNET_EMULATION_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(f.done ? nullptr : &fake, rt.main_bottom,
                                 rt.main_size);
  swapcontext(&f.context, &rt.scheduler);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  swapcontext(&f.context, &rt.scheduler);
#endif
}

// Scheduler -> fiber.
void SwitchTo(Fiber& f) {
  rt.running = &f;
#ifdef XLNET_EMULATION_ASAN
  __sanitizer_start_switch_fiber(&rt.fake_stack, f.stack.get(), kStackBytes);
  swapcontext(&rt.scheduler, &f.context);
  __sanitizer_finish_switch_fiber(rt.fake_stack, &rt.main_bottom,
                                  &rt.main_size);
#else
  swapcontext(&rt.scheduler, &f.context);
#endif
}

// Ends the launch from inside a fiber: the scheduler resumes no fiber
// after this one gives the CPU back. printf-style, formatted on the stack:
// the fiber never returns, so nothing it allocated would be freed.
[[noreturn]] __attribute__((format(printf, 1, 2))) void Fail(const char* format,
                                                             ...) {
  if (!rt.failed) {
    rt.failed = true;
    char why[256];
    va_list args;
    va_start(args, format);
    std::vsnprintf(why, sizeof(why), format, args);
    va_end(args);
    const uint3& t = Running().index;
    char where[96];
    std::snprintf(where, sizeof(where),
                  "block (%u, %u) thread %u: ", rt.current.index.x,
                  rt.current.index.y, t.x);
    rt.message = std::string(where) + why;
  }
  for (;;) SwitchToScheduler();
}

void FiberMain() {
#ifdef XLNET_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &rt.main_bottom, &rt.main_size);
#endif
  (*rt.body)();
  Fiber& f = Running();
  if (!f.copies.empty()) Fail("returned with cp.async copies not waited for");
  f.done = true;
  rt.progress = true;
  Block& b = rt.current;
  --b.live;
  // Threads that returned no longer count at __syncthreads.
  if (b.arrived > 0 && b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
  }
  SwitchToScheduler();
}

// A fresh context that starts FiberMain on f's stack. Its own function:
// getcontext returns twice, which would make the caller's locals suspect.
__attribute__((noinline)) void MakeFiberContext(Fiber& f) {
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack.get();
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = nullptr;
  makecontext(&f.context, FiberMain, 0);
}

void RunBlock(uint3 index, int threads) {
  Block& b = rt.current;
  b = Block();
  b.index = index;
  b.live = threads;
  b.warps.assign(static_cast<size_t>((threads + kWarpSize - 1) / kWarpSize),
                 Warp());
  std::fill(rt.shared.begin(), rt.shared.end(), 0xff);
  for (int t = 0; t < threads; ++t) {
    Fiber& f = rt.fibers[static_cast<size_t>(t)];
    f.index = uint3{static_cast<unsigned>(t % rt.block.x),
                    static_cast<unsigned>(t / rt.block.x % rt.block.y),
                    static_cast<unsigned>(t / (rt.block.x * rt.block.y))};
    f.done = false;
    f.waits_for_block = -1;
    f.warp_ops = 0;
    f.copies.clear();
    MakeFiberContext(f);
  }
  // Whether fiber t runs in a pass that began at block barrier generation
  // `opened`: not returned, and not at a barrier that opened after that
  // (so that no warp passes a barrier before the others' turn).
  auto runnable = [&](int t, uint64_t opened) {
    const Fiber& f = rt.fibers[static_cast<size_t>(t)];
    return !f.done && f.waits_for_block < static_cast<int64_t>(opened);
  };
  const int warps = static_cast<int>(b.warps.size());
  for (;;) {
    bool any = false, progress = false;
    if (rt.schedule == Schedule::kLockstep) {
      rt.progress = false;
      for (int t = 0; t < threads && !rt.failed; ++t) {
        if (rt.fibers[static_cast<size_t>(t)].done) continue;
        any = true;
        SwitchTo(rt.fibers[static_cast<size_t>(t)]);
      }
      progress = rt.progress;
    } else {
      // One warp at a time, as far as it goes before a block barrier.
      const uint64_t opened = b.generation;
      for (int i = 0; i < warps && !rt.failed; ++i) {
        const int w =
            rt.schedule == Schedule::kWarpsInOrder ? i : warps - 1 - i;
        const int end = std::min(threads, (w + 1) * kWarpSize);
        for (;;) {
          rt.progress = false;
          for (int t = w * kWarpSize; t < end && !rt.failed; ++t) {
            if (rt.fibers[static_cast<size_t>(t)].done) continue;
            any = true;
            if (runnable(t, opened)) {
              SwitchTo(rt.fibers[static_cast<size_t>(t)]);
            }
          }
          if (!rt.progress || rt.failed) break;
          progress = true;
        }
      }
    }
    if (rt.failed || !any) return;
    if (!progress) {
      rt.failed = true;
      rt.message = "block (" + std::to_string(index.x) + ", " +
                   std::to_string(index.y) +
                   "): threads wait for each other forever (a barrier or "
                   "warp-wide operation not reached by all)";
      return;
    }
  }
}

// Waits until `generation` moves on (the fiber gave its arrival already).
void WaitFor(const uint64_t& generation, uint64_t seen) {
  while (generation == seen) SwitchToScheduler();
}

}  // namespace

cudaError_t SetMaxDynamicShared(uintptr_t kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxDynamicShared) {
    return cudaErrorInvalidValue;
  }
  max_dynamic_shared[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

cudaError_t Launch(uintptr_t kernel, dim3 grid, dim3 block, size_t shared_bytes,
                   const std::function<void()>& body) {
  const size_t threads = size_t{block.x} * block.y * block.z;
  rt.failed = false;
  rt.message.clear();
  if (threads == 0 || threads > 1024 || threads % kWarpSize != 0) {
    rt.message = "block of " + std::to_string(threads) +
                 " threads (the emulation takes whole warps, up to 1024)";
    rt.failed = true;
  }
  if (shared_bytes > kDefaultDynamicShared) {
    const auto opted = max_dynamic_shared.find(kernel);
    const size_t allowed = opted == max_dynamic_shared.end()
                               ? kDefaultDynamicShared
                               : opted->second;
    if (shared_bytes > allowed) {
      rt.message = std::to_string(shared_bytes) +
                   " bytes of dynamic shared memory a block, above the " +
                   std::to_string(allowed) +
                   " the kernel may ask for (48 KiB unless it opts in with "
                   "cudaFuncSetAttribute(MaxDynamicSharedMemorySize), at "
                   "most 227 KiB)";
      rt.failed = true;
    }
  }
  if (!rt.failed) {
    rt.grid = grid;
    rt.block = block;
    rt.body = &body;
    rt.shared.assign(shared_bytes, 0xff);
    if (rt.fibers.size() < threads) rt.fibers.resize(threads);
    for (auto& f : rt.fibers) {
      if (!f.stack) f.stack.reset(new char[kStackBytes]);
    }
    for (unsigned z = 0; z < grid.z && !rt.failed; ++z) {
      for (unsigned y = 0; y < grid.y && !rt.failed; ++y) {
        for (unsigned x = 0; x < grid.x && !rt.failed; ++x) {
          RunBlock(uint3{x, y, z}, static_cast<int>(threads));
        }
      }
    }
    rt.body = nullptr;
  }
  rt.last_error = rt.failed ? cudaErrorLaunchFailure : cudaSuccess;
  last_message = rt.message;
  return rt.last_error;
}

const std::string& LastLaunchMessage() { return last_message; }

void SetCopyTiming(CopyTiming timing) { rt.timing = timing; }

void SetSchedule(Schedule schedule) { rt.schedule = schedule; }

const uint3& ThreadIndex() { return Running().index; }
const uint3& BlockIndex() { return rt.current.index; }
const dim3& BlockDim() { return rt.block; }
const dim3& GridDim() { return rt.grid; }
unsigned char* DynamicShared() { return rt.shared.data(); }

void SyncThreads() {
  Block& b = rt.current;
  rt.progress = true;
  const uint64_t seen = b.generation;
  Fiber& f = Running();
  f.waits_for_block = static_cast<int64_t>(seen);
  if (++b.arrived == b.live) {
    // The last to arrive opens the barrier and waits for its turn too.
    b.arrived = 0;
    ++b.generation;
    SwitchToScheduler();
  } else {
    WaitFor(b.generation, seen);
  }
  f.waits_for_block = -1;
}

void WarpExchange(const char* op, const uint32_t* mine, int words,
                  uint32_t* all) {
  if (words > kMaxWords) Fail("warp exchange of too many words");
  Fiber& f = Running();
  const unsigned flat =
      f.index.x + rt.block.x * (f.index.y + rt.block.y * f.index.z);
  Warp& w = rt.current.warps[flat / kWarpSize];
  const unsigned lane = flat % kWarpSize;
  Slots& s = w.slots[f.warp_ops % 2];
  ++f.warp_ops;
  if (words > 0) {
    std::memcpy(s.w[lane], mine, sizeof(uint32_t) * static_cast<size_t>(words));
  }
  if (w.arrived == 0) {
    s.op = op;
    s.words = words;
  } else if (std::strcmp(s.op, op) != 0 || s.words != words) {
    Fail("lanes of one warp at different operations: %s and %s", s.op, op);
  }
  rt.progress = true;
  const uint64_t seen = w.generation;
  if (++w.arrived == kWarpSize) {
    w.arrived = 0;
    ++w.generation;
  } else {
    // A lane that returned never arrives: the scheduler reports it.
    WaitFor(w.generation, seen);
  }
  for (int l = 0; l < kWarpSize && words > 0; ++l) {
    std::memcpy(all + l * words, s.w[l],
                sizeof(uint32_t) * static_cast<size_t>(words));
  }
}

void RequireFullMask(unsigned mask) {
  if (mask != 0xffffffffu) Fail("a shuffle with a partial lane mask");
}

namespace {

// Element i (0 or 1) of a register of two 16-bit values, as float.
float Half16(bool half, uint32_t reg, int i) {
  const auto bits = static_cast<uint16_t>(i == 0 ? reg & 0xffff : reg >> 16);
  return half ? __half2float(__half{bits})
              : __bfloat162float(__nv_bfloat16{bits});
}

}  // namespace

void EmulatedMma(bool half, float c[4], const uint32_t a[4], uint32_t b0,
                 uint32_t b1) {
  const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
  uint32_t all[kWarpSize * 6];
  WarpExchange("mma", mine, 6, all);
  const int lane = static_cast<int>(ThreadIndex().x % kWarpSize);
  const int g = lane / 4, t = lane % 4;
  // A (16 x 16, row major): register a[2 (k >= 8) + (row >= 8)] of lane
  // 4 (row % 8) + (k % 8) / 2, half k % 2.
  auto a_at = [&](int row, int k) {
    const int src = 4 * (row % 8) + (k % 8) / 2;
    const int reg = 2 * (k >= 8) + (row >= 8);
    return Half16(half, all[src * 6 + reg], k % 2);
  };
  // B (16 x 8, column major): b[k >= 8] of lane 4 col + (k % 8) / 2.
  auto b_at = [&](int k, int col) {
    const int src = 4 * col + (k % 8) / 2;
    return Half16(half, all[src * 6 + 4 + (k >= 8)], k % 2);
  };
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float acc = c[e];
    for (int k = 0; k < 16; ++k) acc += a_at(row, k) * b_at(k, col);
    c[e] = acc;
  }
}

size_t SharedAddressOf(const void* p) {
  const auto* q = static_cast<const unsigned char*>(p);
  if (q < rt.shared.data() || q >= rt.shared.data() + rt.shared.size()) {
    Fail("a shared-memory address outside the block's shared memory");
  }
  return static_cast<size_t>(q - rt.shared.data());
}

void EmulatedLoadMatrices(bool trans, uint32_t r[4], unsigned row) {
  if (row % 16 != 0 || size_t{row} + 16 > rt.shared.size()) {
    Fail("ldmatrix row address %u unaligned or outside shared memory", row);
  }
  uint32_t rows[kWarpSize];
  WarpExchange("ldmatrix", &row, 1, rows);
  const int lane = static_cast<int>(ThreadIndex().x % kWarpSize);
  auto element = [&](int m, int i, int j) {  // matrix m, row i, column j
    uint16_t v;
    std::memcpy(&v, rt.shared.data() + rows[8 * m + i] + 2 * j, 2);
    return static_cast<uint32_t>(v);
  };
  for (int m = 0; m < 4; ++m) {
    const int a = lane / 4, b = 2 * (lane % 4);
    r[m] = trans ? element(m, b, a) | element(m, b + 1, a) << 16
                 : element(m, a, b) | element(m, a, b + 1) << 16;
  }
}

namespace {

void Apply(const PendingCopy& c) {
  if (c.valid > 0) std::memcpy(c.dst, c.src, static_cast<size_t>(c.valid));
  std::memset(static_cast<char*>(c.dst) + c.valid, 0,
              static_cast<size_t>(c.size - c.valid));
}

}  // namespace

void EmulatedCopyAsync(void* dst, const void* src, int size, int valid) {
  const auto* d = static_cast<const unsigned char*>(dst);
  if (valid < 0 || valid > size ||
      reinterpret_cast<uintptr_t>(dst) % static_cast<uintptr_t>(size) != 0 ||
      reinterpret_cast<uintptr_t>(src) % static_cast<uintptr_t>(size) != 0 ||
      d < rt.shared.data() || d + size > rt.shared.data() + rt.shared.size()) {
    Fail("cp.async of %d bytes unaligned or outside shared memory", size);
  }
  const PendingCopy c{dst, src, size, valid};
  if (rt.timing == CopyTiming::kAtIssue) {
    Apply(c);
  } else {
    Running().copies.push_back(c);
  }
}

void EmulatedCheckAligned(const void* p, int bytes) {
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) != 0) {
    Fail("misaligned %d-byte access at %p", bytes, p);
  }
}

void EmulatedCopyWaitAll() {
  Fiber& f = Running();
  for (const auto& c : f.copies) Apply(c);
  f.copies.clear();
}

}  // namespace cuda_emulation

cudaError_t cudaGetLastError() {
  const cudaError_t e = cuda_emulation::rt.last_error;
  cuda_emulation::rt.last_error = cudaSuccess;
  return e;
}
