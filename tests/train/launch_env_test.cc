// The launch environment (train/launch_env.h): torchrun's variables and
// agent store, srun's SLURM variables, node lists, conflicts.
#include "train/launch_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace xlnet {
namespace {

using Vars = std::map<std::string, std::string>;

absl::StatusOr<DistEnv> FromVars(const Vars& vars) {
  return DistEnvFromVariables(
      [&](const char* name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
      });
}

// The error message of `vars`, or "" when they are accepted.
std::string Error(const Vars& vars) {
  auto env = FromVars(vars);
  return env.ok() ? "" : std::string(env.status().message());
}

// What torchrun 1.13 sets for a worker (local_elastic_agent.py,
// _start_workers), under the static rendezvous.
Vars TorchrunStatic(int rank, int world, int restarts) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"GROUP_RANK", "0"},
          {"ROLE_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"WORLD_SIZE", std::to_string(world)},
          {"GROUP_WORLD_SIZE", "1"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RESTART_COUNT", std::to_string(restarts)},
          {"TORCHELASTIC_MAX_RESTARTS", "3"},
          {"TORCHELASTIC_RUN_ID", "none"},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
}

// One task of `srun --ntasks 8 --ntasks-per-node 4` on gpu[01-02].
Vars Srun(int procid) {
  return {{"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", std::to_string(procid % 4)},
          {"SLURM_NODEID", std::to_string(procid / 4)},
          {"SLURM_JOB_NODELIST", "gpu[01-02]"},
          {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
          {"SLURM_JOB_ID", "123456"}};
}

TEST(DistEnvTest, WithoutVariablesOneProcess) {
  auto env = FromVars({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->source, "single");
  EXPECT_FALSE(env->use_agent_store);
}

TEST(DistEnvTest, ReadsTorchrunVariables) {
  auto env = FromVars({{"WORLD_SIZE", "4"},
                       {"RANK", "2"},
                       {"MASTER_ADDR", "10.1.2.3"},
                       {"MASTER_PORT", "29511"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_world_size, 1);
  EXPECT_EQ(env->master_addr, "10.1.2.3");
  EXPECT_EQ(env->master_port, 29511);
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_FALSE(env->use_agent_store);

  Vars vars = {{"WORLD_SIZE", "4"}, {"RANK", "4"}, {"MASTER_PORT", "1"}};
  EXPECT_NE(Error(vars).find("RANK=4 is outside [0, WORLD_SIZE=4)"),
            std::string::npos);
  vars["RANK"] = "x";
  EXPECT_EQ(Error(vars), "environment variable RANK='x' is not an integer");
  vars["RANK"] = "1";
  vars.erase("MASTER_PORT");
  EXPECT_NE(Error(vars).find("MASTER_PORT is not set"), std::string::npos);
  EXPECT_NE(Error({{"RANK", "1"}}).find("WORLD_SIZE is not"),
            std::string::npos);
  EXPECT_NE(Error({{"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}})
                .find("RANK is not set"),
            std::string::npos);
  EXPECT_NE(Error({{"WORLD_SIZE", "2"},
                   {"RANK", "1"},
                   {"LOCAL_RANK", "2"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_PORT", "1"}})
                .find("LOCAL_RANK=2 is outside [0, LOCAL_WORLD_SIZE=2)"),
            std::string::npos);
  EXPECT_NE(
      Error({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_PORT", "70000"}})
          .find("MASTER_PORT=70000 is not a port"),
      std::string::npos);
}

TEST(DistEnvTest, TorchrunAgentStore) {
  auto env = FromVars(TorchrunStatic(1, 2, 3));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->use_agent_store);
  EXPECT_EQ(env->restart_count, 3);
  EXPECT_EQ(env->local_world_size, 2);
  // The prefix torchrun's own Python workers use (rendezvous.py).
  EXPECT_EQ(AgentStorePrefix(env->restart_count), "/worker/attempt_3");

  // c10d rendezvous (and our launcher): rank 0 serves the store.
  Vars c10d = TorchrunStatic(1, 2, 0);
  c10d["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  env = FromVars(c10d);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->use_agent_store);

  Vars broken = TorchrunStatic(0, 2, 0);
  broken.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_NE(Error(broken).find("TORCHELASTIC_RESTART_COUNT"),
            std::string::npos);
}

// GLOO_SOCKET_IFNAME, under torchrun and srun alike: the interfaces Gloo
// binds to, in order; an empty name is an error naming the variable.
TEST(DistEnvTest, GlooSocketInterfaces) {
  EXPECT_TRUE(FromVars(TorchrunStatic(0, 2, 0))->gloo_interfaces.empty());
  Vars vars = TorchrunStatic(1, 2, 0);
  vars["GLOO_SOCKET_IFNAME"] = "eth0";
  auto env = FromVars(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->gloo_interfaces, std::vector<std::string>({"eth0"}));
  Vars srun = Srun(3);
  srun["GLOO_SOCKET_IFNAME"] = "ib0,eth1";
  env = FromVars(srun);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "slurm");
  EXPECT_EQ(env->gloo_interfaces, std::vector<std::string>({"ib0", "eth1"}));
  // One process reads it too (a world of one has no Gloo group).
  env = FromVars({{"GLOO_SOCKET_IFNAME", "eth0"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->gloo_interfaces, std::vector<std::string>({"eth0"}));
  vars["GLOO_SOCKET_IFNAME"] = "eth0,";
  EXPECT_NE(Error(vars).find(
                "GLOO_SOCKET_IFNAME='eth0,' has an empty interface name"),
            std::string::npos)
      << Error(vars);
}

TEST(DistEnvTest, SrunTask) {
  auto env = FromVars(Srun(6));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "slurm");
  EXPECT_EQ(env->rank, 6);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "gpu01");
  EXPECT_EQ(env->master_port, SlurmJobPort(123456));
  EXPECT_EQ(SlurmJobPort(123456), 15000 + 123456 % 15000);
  EXPECT_FALSE(env->use_agent_store);

  // srun's step node list wins over the job's; MASTER_ADDR/PORT over both.
  Vars vars = Srun(0);
  vars["SLURM_JOB_NODELIST"] = "a1,b[2-3]";
  EXPECT_EQ(FromVars(vars)->master_addr, "a1");
  vars["SLURM_STEP_NODELIST"] = "gpu[07,01-04]";
  EXPECT_EQ(FromVars(vars)->master_addr, "gpu07");
  vars["MASTER_ADDR"] = "head.example";
  vars["MASTER_PORT"] = "29600";
  EXPECT_EQ(FromVars(vars)->master_addr, "head.example");
  EXPECT_EQ(FromVars(vars)->master_port, 29600);

  // Without a tasks-per-node list: LOCAL_WORLD_SIZE, else 1 per node.
  vars = Srun(1);
  vars.erase("SLURM_STEP_TASKS_PER_NODE");
  vars["SLURM_LOCALID"] = "0";
  EXPECT_EQ(FromVars(vars)->local_world_size, 1);
  vars["SLURM_TASKS_PER_NODE"] = "3,5";
  EXPECT_EQ(FromVars(vars)->local_world_size, 3);

  // One task: one process.
  env = FromVars({{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "1"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_JOB_NODELIST", "n1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->world_size, 1);

  // torchrun started inside an srun task: torchrun's variables win.
  vars = TorchrunStatic(3, 4, 0);
  for (const auto& [k, v] : Srun(0)) vars[k] = v;
  env = FromVars(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
}

TEST(DistEnvTest, SlurmConflictsAndGapsAreErrors) {
  Vars vars = Srun(1);
  vars["WORLD_SIZE"] = "4";
  EXPECT_NE(Error(vars).find("WORLD_SIZE=4 conflicts with SLURM_NTASKS=8"),
            std::string::npos)
      << Error(vars);
  vars = Srun(1);
  vars["LOCAL_RANK"] = "0";
  EXPECT_NE(Error(vars).find("LOCAL_RANK=0 conflicts with SLURM_LOCALID=1"),
            std::string::npos)
      << Error(vars);
  // WORLD_SIZE that agrees is fine.
  vars = Srun(1);
  vars["WORLD_SIZE"] = "8";
  EXPECT_EQ(Error(vars), "");

  for (const char* name :
       {"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST"}) {
    vars = Srun(1);
    vars.erase(name);
    EXPECT_NE(Error(vars).find(std::string("SLURM_PROCID is set but ") + name +
                               " is not"),
              std::string::npos)
        << Error(vars);
  }
  vars = Srun(1);
  vars["SLURM_PROCID"] = "8";
  EXPECT_NE(Error(vars).find("SLURM_PROCID=8 is outside [0, SLURM_NTASKS=8)"),
            std::string::npos);
  vars = Srun(1);
  vars["SLURM_LOCALID"] = "5";
  EXPECT_NE(Error(vars).find("SLURM_LOCALID=5"), std::string::npos);
  vars = Srun(5);
  vars["SLURM_STEP_TASKS_PER_NODE"] = "4,1";
  EXPECT_NE(Error(vars).find("SLURM_LOCALID=1 but this node runs 1 task(s)"),
            std::string::npos)
      << Error(vars);
  vars = Srun(1);
  vars["SLURM_STEP_TASKS_PER_NODE"] = "4(x2";
  EXPECT_NE(Error(vars).find("SLURM_STEP_TASKS_PER_NODE: tasks per node"),
            std::string::npos)
      << Error(vars);
  vars = Srun(1);
  vars.erase("SLURM_JOB_ID");
  EXPECT_NE(Error(vars).find("neither MASTER_PORT nor SLURM_JOB_ID"),
            std::string::npos);
  vars = Srun(1);
  vars["SLURM_JOB_NODELIST"] = "gpu[01-";
  EXPECT_NE(Error(vars).find("SLURM_JOB_NODELIST: node list 'gpu[01-'"),
            std::string::npos)
      << Error(vars);
}

TEST(SlurmNodeListTest, Expands) {
  using List = std::vector<std::string>;
  EXPECT_EQ(*ExpandSlurmNodeList("gpu[01-04,07]"),
            (List{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"}));
  EXPECT_EQ(*ExpandSlurmNodeList("a1,b[2-3]"), (List{"a1", "b2", "b3"}));
  EXPECT_EQ(*ExpandSlurmNodeList("node7"), (List{"node7"}));
  EXPECT_EQ(*ExpandSlurmNodeList("n[8-11]"), (List{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(*ExpandSlurmNodeList("n[098-101]"),
            (List{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(*ExpandSlurmNodeList("r[1-2]-n[1-2],x.y"),
            (List{"r1-n1", "r1-n2", "r2-n1", "r2-n2", "x.y"}));
  EXPECT_EQ(*ExpandSlurmNodeList("[3-4]a"), (List{"3a", "4a"}));
}

TEST(SlurmNodeListTest, MalformedListsAreErrors) {
  for (const char* bad :
       {"", "a,,b", "gpu[01-04", "gpu]1", "gpu[[1]]", "gpu[4-1]", "gpu[a-b]",
        "gpu[1-2-3]", "gpu[]", "gpu[1,]", "gpu 1", "gpu[-1]"}) {
    auto hosts = ExpandSlurmNodeList(bad);
    EXPECT_FALSE(hosts.ok()) << "'" << bad << "'";
    if (!hosts.ok()) {
      EXPECT_NE(
          hosts.status().message().find(std::string("node list '") + bad + "'"),
          std::string::npos)
          << hosts.status();
    }
  }
  // Bounded: a user's variable cannot make us build millions of names.
  EXPECT_FALSE(ExpandSlurmNodeList("n[0-99999999]").ok());
  EXPECT_FALSE(ExpandSlurmNodeList("a[0-999]b[0-999]", 1000).ok());
  EXPECT_TRUE(ExpandSlurmNodeList("a[0-9]b[0-99]", 1000).ok());
}

TEST(SlurmNodeListTest, TasksPerNode) {
  EXPECT_EQ(*ExpandSlurmTasksPerNode("2(x3),1"),
            (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*ExpandSlurmTasksPerNode("8"), (std::vector<int>{8}));
  for (const char* bad : {"", "x", "2(x)", "2(x3", "(x3)", "0", "2,,1"}) {
    EXPECT_FALSE(ExpandSlurmTasksPerNode(bad).ok()) << "'" << bad << "'";
  }
  EXPECT_FALSE(ExpandSlurmTasksPerNode("1(x99999999)").ok());
}

// The process environment path reads the same variables.
TEST(DistEnvTest, FromProcessEnvironment) {
  ASSERT_EQ(std::getenv("WORLD_SIZE"), nullptr) << "run outside torchrun";
  ASSERT_EQ(std::getenv("SLURM_PROCID"), nullptr) << "run outside srun";
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_JOB_NODELIST", "gpu[03-04]", 1);
  setenv("SLURM_JOB_ID", "77", 1);
  auto env = DistEnvFromEnvironment();
  for (const char* v : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                        "SLURM_JOB_NODELIST", "SLURM_JOB_ID"}) {
    unsetenv(v);
  }
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 2);
  EXPECT_EQ(env->master_addr, "gpu03");
  EXPECT_EQ(env->master_port, 15077);
  // An empty variable counts as unset (as in torchrun's Python).
  setenv("WORLD_SIZE", "", 1);
  EXPECT_EQ(DistEnvFromEnvironment()->world_size, 1);
  unsetenv("WORLD_SIZE");
}

}  // namespace
}  // namespace xlnet
