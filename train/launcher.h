// Starts N local ranks of the running program, as `torchrun --nproc_per_node
// N` would: each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1 and MASTER_PORT. SIGTERM/SIGINT are forwarded; if a
// rank fails, the others are stopped (SIGTERM, then SIGKILL after a grace
// period) and the failure is reported.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xlnet {

// `args` are the child's arguments (argv[1..] without --nproc_per_node).
// `port` 0 picks a free port.
absl::Status LaunchLocalRanks(int nproc, const std::vector<std::string>& args,
                              int port);

// A TCP port on 127.0.0.1 that was free a moment ago (29500 if none could be
// found); for rendezvous of local ranks.
int FreeLocalPort();

}  // namespace xlnet
