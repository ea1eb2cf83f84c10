// What every training command does before building its unit: start local
// ranks for --nproc_per_node (the parent then only waits), read the
// torchrun-style environment, size the CPU thread pool, pick the device
// (cuda -> cuda:LOCAL_RANK) and join the process group.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "pretrain/distributed.h"

namespace xlnet {

struct RunSetup {
  DistEnv env;
  // Null for a single process.
  std::unique_ptr<ProcessGroup> group;
};

// `nproc`/`master_port` are the command's --nproc_per_node/--master_port.
// Returns nullopt in a launcher parent whose children all finished well (the
// command is then done). Updates config->train.device to the rank's device.
absl::StatusOr<std::optional<RunSetup>> SetUpRun(int argc, char** argv,
                                                 int64_t nproc,
                                                 int64_t master_port,
                                                 Config* config);

}  // namespace xlnet
