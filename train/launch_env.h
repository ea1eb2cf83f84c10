// The launch environment of one rank: who it is (rank, world size, local
// rank) and where the rendezvous store is, read from the variables a
// launcher sets.
//
// - torchrun (PyTorch 1.13 and 2.x) and our --nproc_per_node: RANK,
//   WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Under
//   torchrun's static rendezvous (the default) its agent already serves the
//   TCPStore on MASTER_PORT and says so with TORCHELASTIC_USE_AGENT_STORE=True;
//   every rank then connects as a client and works under the prefix
//   torchrun's own Python workers use, /worker/attempt_<N> with
//   N = TORCHELASTIC_RESTART_COUNT (torch/distributed/rendezvous.py,
//   _create_c10d_store), so a restarted attempt never sees the keys of the
//   one before. Otherwise rank 0 serves the store.
// - srun (one task per GPU), when RANK is absent: SLURM_PROCID,
//   SLURM_NTASKS, SLURM_LOCALID and SLURM_JOB_NODELIST (SLURM_STEP_NODELIST
//   when srun sets it) give rank, world size, local rank and the master host
//   (the first host of the node list, where task 0 runs); MASTER_PORT, else
//   a port derived from SLURM_JOB_ID. MASTER_ADDR, if set, wins over the node
//   list.
// - Either way, GLOO_SOCKET_IFNAME (torch.distributed's variable, a comma-
//   separated list of interfaces) names the interfaces Gloo binds to and
//   advertises to the other ranks: on hosts whose name resolves to a
//   loopback address (Debian's 127.0.1.1 line), c10d's default advertises
//   that address, which no other host reaches.
//
// Partial or conflicting settings are errors naming the variables.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xlnet {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // Ranks on this node (shares the CPU cores between them).
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // torchrun's agent serves the store; all ranks are clients under
  // /worker/attempt_<restart_count>.
  bool use_agent_store = false;
  // TORCHELASTIC_RESTART_COUNT: restarts of the workers so far (torchrun).
  int restart_count = 0;
  // Where the values came from: "single", "torchrun" (RANK/WORLD_SIZE) or
  // "slurm".
  std::string source = "single";
  // GLOO_SOCKET_IFNAME split at its commas: the interfaces of Gloo's
  // devices; empty = c10d's default (the address this host's name resolves
  // to if it can bind there, else loopback).
  std::vector<std::string> gloo_interfaces;
};

// Looks up an environment variable; nullopt when unset or empty.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The launch environment from `lookup` (tests pass a map); without WORLD_SIZE
// and SLURM_PROCID the run is one process.
absl::StatusOr<DistEnv> DistEnvFromVariables(const EnvLookup& lookup);
// The same from this process's environment.
absl::StatusOr<DistEnv> DistEnvFromEnvironment();

// The store prefix of ranks that use torchrun's agent store.
std::string AgentStorePrefix(int restart_count);

// Expands a SLURM host list: "gpu[01-04,07]" -> gpu01 gpu02 gpu03 gpu04
// gpu07 (zero padding kept), "a1,b[2-3]" -> a1 b2 b3, "r[1-2]-n[1-2]" ->
// r1-n1 r1-n2 r2-n1 r2-n2. Malformed lists and more than `max_hosts` hosts
// are errors.
absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(
    const std::string& list, size_t max_hosts = 1 << 16);

// Tasks per node from SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
// ("2(x3),1" -> 2 2 2 1).
absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(
    const std::string& spec, size_t max_nodes = 1 << 16);

// The rendezvous port of a SLURM job without MASTER_PORT: 15000 +
// job_id % 15000, below Linux's ephemeral range (32768+), so two jobs
// sharing a node rarely collide.
int SlurmJobPort(int64_t job_id);

}  // namespace xlnet
