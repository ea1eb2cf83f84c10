#include "train/launch_env.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace xlnet {
namespace {

// An integer variable; nullopt when unset.
absl::StatusOr<std::optional<int64_t>> IntVar(const EnvLookup& lookup,
                                              const char* name) {
  const std::optional<std::string> value = lookup(name);
  if (!value) return std::optional<int64_t>();
  int64_t out = 0;
  if (!absl::SimpleAtoi(*value, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", name, "='", *value, "' is not an integer"));
  }
  return std::optional<int64_t>(out);
}

bool AllDigits(absl::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// "01-04,07" -> 01 02 03 04 07 (the width of each range's low bound kept).
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view ranges,
                                                      size_t max_hosts) {
  std::vector<std::string> out;
  for (absl::string_view range : absl::StrSplit(ranges, ',')) {
    const std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
    if (ends.size() > 2 || !AllDigits(ends[0]) ||
        (ends.size() == 2 && !AllDigits(ends[1]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", range, "' is not a number or a range N-M"));
    }
    int64_t lo = 0, hi = 0;
    (void)absl::SimpleAtoi(ends[0], &lo);
    hi = lo;
    if (ends.size() == 2) (void)absl::SimpleAtoi(ends[1], &hi);
    if (hi < lo) {
      return absl::InvalidArgumentError(
          absl::StrCat("range '", range, "' runs backwards"));
    }
    if (static_cast<uint64_t>(hi - lo) >= max_hosts - out.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("more than ", max_hosts, " hosts"));
    }
    for (int64_t n = lo; n <= hi; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < ends[0].size()) {
        digits.insert(0, ends[0].size() - digits.size(), '0');
      }
      out.push_back(std::move(digits));
    }
  }
  return out;
}

bool IsHostChar(char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
}

// The hosts of one comma-free item: literal text and [ranges] in turn, the
// last bracket varying fastest.
absl::Status ExpandItem(const std::string& item, size_t max_hosts,
                        std::vector<std::string>* hosts) {
  std::vector<std::vector<std::string>> parts;
  size_t combos = 1;
  for (size_t pos = 0; pos < item.size();) {
    if (item[pos] == '[') {
      const size_t close = item.find(']', pos);
      XLNET_ASSIGN_OR_RETURN(
          std::vector<std::string> alternatives,
          ExpandRanges(absl::string_view(item).substr(pos + 1, close - pos - 1),
                       max_hosts));
      parts.push_back(std::move(alternatives));
      pos = close + 1;
    } else {
      const size_t open = std::min(item.find('[', pos), item.size());
      const std::string text = item.substr(pos, open - pos);
      for (char c : text) {
        if (!IsHostChar(c)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "'", std::string(1, c), "' in host name '", item, "'"));
        }
      }
      parts.push_back({text});
      pos = open;
    }
    combos *= parts.back().size();
    if (combos > max_hosts - hosts->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("more than ", max_hosts, " hosts"));
    }
  }
  std::vector<size_t> index(parts.size(), 0);
  while (true) {
    std::string host;
    for (size_t i = 0; i < parts.size(); ++i) host += parts[i][index[i]];
    hosts->push_back(std::move(host));
    size_t i = parts.size();
    while (i > 0 && ++index[i - 1] == parts[i - 1].size()) index[--i] = 0;
    if (i == 0) break;
  }
  return absl::OkStatus();
}

// SLURM's node list variable for a task: srun's step list, else the job's.
std::optional<std::string> NodeListVar(const EnvLookup& lookup,
                                       const char** name) {
  for (const char* candidate : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
    if (auto value = lookup(candidate)) {
      *name = candidate;
      return value;
    }
  }
  *name = "SLURM_JOB_NODELIST";
  return std::nullopt;
}

// The rank, world and rendezvous of an srun task (RANK unset).
absl::StatusOr<DistEnv> FromSlurm(const EnvLookup& lookup, int64_t procid) {
  XLNET_ASSIGN_OR_RETURN(auto ntasks, IntVar(lookup, "SLURM_NTASKS"));
  XLNET_ASSIGN_OR_RETURN(auto localid, IntVar(lookup, "SLURM_LOCALID"));
  const char* nodelist_name = nullptr;
  const std::optional<std::string> nodelist =
      NodeListVar(lookup, &nodelist_name);
  for (const auto& [name, present] :
       {std::pair<const char*, bool>{"SLURM_NTASKS", ntasks.has_value()},
        {"SLURM_LOCALID", localid.has_value()},
        {"SLURM_JOB_NODELIST", nodelist.has_value()}}) {
    if (!present) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SLURM_PROCID is set but ", name,
          " is not (srun sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and "
          "SLURM_JOB_NODELIST; outside srun set RANK and WORLD_SIZE)"));
    }
  }
  if (*ntasks < 1 || *ntasks > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_NTASKS=", *ntasks, " is not a task count"));
  }
  if (procid < 0 || procid >= *ntasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_PROCID=", procid,
                     " is outside [0, SLURM_NTASKS=", *ntasks, ")"));
  }
  if (*localid < 0 || *localid > procid) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_LOCALID=", *localid, " is outside [0, ",
                     "SLURM_PROCID=", procid, "]"));
  }
  // Variables of the torchrun set that are present must agree.
  XLNET_ASSIGN_OR_RETURN(auto world, IntVar(lookup, "WORLD_SIZE"));
  if (world && *world != *ntasks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WORLD_SIZE=", *world, " conflicts with SLURM_NTASKS=", *ntasks,
        " (RANK is unset, so rank and world size come from SLURM_PROCID and "
        "SLURM_NTASKS: unset WORLD_SIZE, or set RANK too)"));
  }
  XLNET_ASSIGN_OR_RETURN(auto local_rank, IntVar(lookup, "LOCAL_RANK"));
  if (local_rank && *local_rank != *localid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LOCAL_RANK=", *local_rank, " conflicts with SLURM_LOCALID=", *localid,
        " (unset LOCAL_RANK, or set RANK and WORLD_SIZE too)"));
  }
  DistEnv env;
  env.source = "slurm";
  if (*ntasks == 1) return env;
  env.rank = static_cast<int>(procid);
  env.world_size = static_cast<int>(*ntasks);
  env.local_rank = static_cast<int>(*localid);

  // Tasks on this node: LOCAL_WORLD_SIZE, else srun's tasks-per-node list
  // at SLURM_NODEID, else unknown (1: each task may use every core).
  XLNET_ASSIGN_OR_RETURN(auto local_world, IntVar(lookup, "LOCAL_WORLD_SIZE"));
  const char* per_node_name = "SLURM_STEP_TASKS_PER_NODE";
  std::optional<std::string> per_node = lookup(per_node_name);
  if (!per_node) per_node = lookup(per_node_name = "SLURM_TASKS_PER_NODE");
  XLNET_ASSIGN_OR_RETURN(auto node_id, IntVar(lookup, "SLURM_NODEID"));
  if (local_world) {
    env.local_world_size = static_cast<int>(*local_world);
  } else if (per_node && node_id) {
    auto counts_or = ExpandSlurmTasksPerNode(*per_node);
    if (!counts_or.ok()) return Annotate(counts_or.status(), per_node_name);
    const std::vector<int>& counts = *counts_or;
    if (*node_id < 0 || static_cast<size_t>(*node_id) >= counts.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SLURM_NODEID=", *node_id, " is outside the ", counts.size(),
          " nodes of ", per_node_name, "='", *per_node, "'"));
    }
    env.local_world_size = counts[*node_id];
  }
  const bool known = local_world || (per_node && node_id);
  if (known &&
      (env.local_world_size < 1 || env.local_rank >= env.local_world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_LOCALID=", env.local_rank, " but this node runs ",
                     env.local_world_size, " task(s) (",
                     local_world ? "LOCAL_WORLD_SIZE" : per_node_name, ")"));
  }

  if (auto addr = lookup("MASTER_ADDR")) {
    env.master_addr = *addr;
  } else {
    auto hosts = ExpandSlurmNodeList(*nodelist);
    if (!hosts.ok()) return Annotate(hosts.status(), nodelist_name);
    env.master_addr = hosts->front();
  }
  XLNET_ASSIGN_OR_RETURN(auto port, IntVar(lookup, "MASTER_PORT"));
  XLNET_ASSIGN_OR_RETURN(auto job_id, IntVar(lookup, "SLURM_JOB_ID"));
  if (port) {
    env.master_port = static_cast<int>(*port);
  } else if (job_id && *job_id >= 0) {
    env.master_port = SlurmJobPort(*job_id);
  } else {
    return absl::InvalidArgumentError(
        "SLURM_NTASKS > 1 but neither MASTER_PORT nor SLURM_JOB_ID is set "
        "(the rendezvous port)");
  }
  if (env.master_port <= 0 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is not a port"));
  }
  return env;
}

// Rank, world and rendezvous from torchrun's variables, else srun's.
absl::StatusOr<DistEnv> RankAndRendezvous(const EnvLookup& lookup) {
  XLNET_ASSIGN_OR_RETURN(auto world, IntVar(lookup, "WORLD_SIZE"));
  XLNET_ASSIGN_OR_RETURN(auto rank, IntVar(lookup, "RANK"));
  XLNET_ASSIGN_OR_RETURN(auto slurm_procid, IntVar(lookup, "SLURM_PROCID"));
  if (!rank && slurm_procid) return FromSlurm(lookup, *slurm_procid);
  XLNET_ASSIGN_OR_RETURN(auto local_rank, IntVar(lookup, "LOCAL_RANK"));
  XLNET_ASSIGN_OR_RETURN(auto local_world, IntVar(lookup, "LOCAL_WORLD_SIZE"));
  XLNET_ASSIGN_OR_RETURN(auto port, IntVar(lookup, "MASTER_PORT"));
  if (!world) {
    if (rank && *rank != 0) {
      return absl::InvalidArgumentError(
          "RANK is set but WORLD_SIZE is not (set both, as torchrun does)");
    }
    return DistEnv{};
  }
  if (*world < 1 || *world > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("WORLD_SIZE=", *world, " must be >= 1"));
  }
  if (*world > 1 && !rank) {
    return absl::InvalidArgumentError("WORLD_SIZE > 1 but RANK is not set");
  }
  DistEnv env;
  env.source = "torchrun";
  env.world_size = static_cast<int>(*world);
  env.rank = static_cast<int>(rank.value_or(0));
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RANK=", env.rank, " is outside [0, WORLD_SIZE=", env.world_size, ")"));
  }
  env.local_rank = static_cast<int>(local_rank.value_or(env.rank));
  env.local_world_size = static_cast<int>(local_world.value_or(1));
  if (local_world && (*local_world < 1 || env.local_rank < 0 ||
                      env.local_rank >= *local_world)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_RANK=", env.local_rank,
                     " is outside [0, LOCAL_WORLD_SIZE=", *local_world, ")"));
  }
  if (*world > 1 && !port) {
    return absl::InvalidArgumentError(
        "WORLD_SIZE > 1 but MASTER_PORT is not set");
  }
  env.master_port = static_cast<int>(port.value_or(env.master_port));
  if (env.master_port <= 0 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is not a port"));
  }
  if (auto addr = lookup("MASTER_ADDR")) env.master_addr = *addr;
  // torch/distributed/rendezvous.py compares with str(True).
  env.use_agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE") == "True";
  if (env.use_agent_store) {
    XLNET_ASSIGN_OR_RETURN(auto restarts,
                           IntVar(lookup, "TORCHELASTIC_RESTART_COUNT"));
    if (!restarts || *restarts < 0) {
      return absl::InvalidArgumentError(
          "TORCHELASTIC_USE_AGENT_STORE=True but TORCHELASTIC_RESTART_COUNT "
          "is not a count (torchrun sets both)");
    }
    env.restart_count = static_cast<int>(*restarts);
  }
  return env;
}

// GLOO_SOCKET_IFNAME's interfaces; none when it is unset.
absl::StatusOr<std::vector<std::string>> GlooInterfaces(
    const EnvLookup& lookup) {
  const std::optional<std::string> value = lookup("GLOO_SOCKET_IFNAME");
  if (!value) return std::vector<std::string>();
  std::vector<std::string> interfaces = absl::StrSplit(*value, ',');
  for (const std::string& name : interfaces) {
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GLOO_SOCKET_IFNAME='", *value,
          "' has an empty interface name (give one interface, such as eth0, "
          "or several separated by commas, as `ip -br link` names them)"));
    }
  }
  return interfaces;
}

}  // namespace

absl::StatusOr<DistEnv> DistEnvFromVariables(const EnvLookup& lookup) {
  XLNET_ASSIGN_OR_RETURN(DistEnv env, RankAndRendezvous(lookup));
  XLNET_ASSIGN_OR_RETURN(env.gloo_interfaces, GlooInterfaces(lookup));
  return env;
}

absl::StatusOr<DistEnv> DistEnvFromEnvironment() {
  return DistEnvFromVariables(
      [](const char* name) -> std::optional<std::string> {
        const char* value = std::getenv(name);
        if (value == nullptr || *value == '\0') return std::nullopt;
        return std::string(value);
      });
}

std::string AgentStorePrefix(int restart_count) {
  return absl::StrCat("/worker/attempt_", restart_count);
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(
    const std::string& list, size_t max_hosts) {
  auto error = [&](const absl::Status& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("node list '", list, "': ", why.message()));
  };
  // Items are separated by commas outside brackets.
  std::vector<std::string> items(1);
  bool in_bracket = false;
  for (char c : list) {
    if (c == '[' || c == ']') {
      if (in_bracket == (c == '[')) {
        return error(absl::InvalidArgumentError(c == '[' ? "nested '['"
                                                         : "']' without '['"));
      }
      in_bracket = c == '[';
    }
    if (c == ',' && !in_bracket) {
      items.emplace_back();
    } else {
      items.back() += c;
    }
  }
  if (in_bracket) return error(absl::InvalidArgumentError("unclosed '['"));
  std::vector<std::string> hosts;
  for (const std::string& item : items) {
    if (item.empty()) return error(absl::InvalidArgumentError("empty host"));
    if (absl::Status s = ExpandItem(item, max_hosts, &hosts); !s.ok()) {
      return error(s);
    }
  }
  return hosts;
}

absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(
    const std::string& spec, size_t max_nodes) {
  std::vector<int> counts;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    absl::string_view count = item, repeat = "1";
    if (const size_t open = item.find("(x"); open != absl::string_view::npos) {
      count = item.substr(0, open);
      if (item.back() != ')') count = "";  // malformed: reported below
      repeat = item.substr(open + 2, item.size() - open - 3);
    }
    int64_t n = 0, times = 0;
    if (!AllDigits(count) || !AllDigits(repeat) ||
        !absl::SimpleAtoi(count, &n) || !absl::SimpleAtoi(repeat, &times) ||
        n < 1 || n > (1 << 20) || times < 1 ||
        static_cast<uint64_t>(times) > max_nodes - counts.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tasks per node '", spec, "': '", item, "' is not N or N(xM)"));
    }
    counts.insert(counts.end(), times, static_cast<int>(n));
  }
  return counts;
}

int SlurmJobPort(int64_t job_id) {
  return 15000 + static_cast<int>(job_id % 15000);
}

}  // namespace xlnet
