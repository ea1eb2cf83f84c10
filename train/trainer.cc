#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <signal.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/status.h"
#include "common/strings.h"
#include "model_io/rank_files.h"
#include "model_io/run_layout.h"
#include "train/background_save.h"
#include "train/resume_settings.h"

namespace xlnet {
namespace {

constexpr int kTrainerStateVersion = 1;
constexpr char kOptimizerFile[] = "optimizer.safetensors";
// metrics.jsonl is read whole on resume: a line per logged step is about
// 200 bytes, so this is millions of steps.
constexpr uint64_t kMaxMetricsBytes = uint64_t{1} << 30;

std::atomic<bool> g_stop_requested{false};

void OnStopSignal(int) { g_stop_requested = true; }

std::string RngFile(int rank) { return RankFileName("rng", rank); }

// This rank's share of verifying checkpoint `dir` when `world_size` ranks
// resume from it: rank 0 the listing (stat only) and the shared files' CRCs,
// every rank the CRCs of the per-rank files it loads (FilesRankLoads). One
// process checks the whole directory. Returns the bytes read.
absl::StatusOr<int64_t> VerifyShare(const std::string& dir, int rank,
                                    int world_size) {
  if (world_size == 1) return VerifyChecksums(dir, ChecksumScope());
  XLNET_ASSIGN_OR_RETURN(const std::vector<std::string> listed,
                         ListedFiles(dir));
  const std::set<std::string> own = FilesRankLoads(listed, rank);
  ChecksumScope scope;
  scope.listing = rank == 0;
  scope.read = [&](const std::string& name) {
    return own.count(name) > 0 || (rank == 0 && !RankOfFile(name));
  };
  return VerifyChecksums(dir, scope);
}

torch::Tensor CpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetCpuRngState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// trainer_state.json, checked: every field of the right type and range.
struct TrainerState {
  int64_t step = 0;
  int64_t skipped_steps = 0;
  int64_t world_size = 1;
  std::optional<double> loss_scale;
  int64_t loss_scale_growth_tracker = 0;
  // Early stopping's count (absent in checkpoints older than train.patience:
  // 0).
  int64_t evals_without_improvement = 0;
  // The divergence guard's counts (absent in older checkpoints: 0): bad
  // steps in a row at this step, all of them, and the first (0: none).
  int64_t bad_in_a_row = 0;
  int64_t bad_steps = 0;
  int64_t first_bad_step = 0;
};

// `key` of `state` as an integer >= `min` (`fallback` when absent and not
// required); errors name `path` and the field.
absl::StatusOr<int64_t> IntField(const nlohmann::json& state, const char* key,
                                 const std::string& path, int64_t min,
                                 std::optional<int64_t> fallback) {
  if (!state.contains(key)) {
    if (fallback) return *fallback;
    return absl::DataLossError(absl::StrCat(path, ": no ", key));
  }
  const nlohmann::json& v = state[key];
  if (!v.is_number_integer()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", key, " must be an integer, got ", v.dump()));
  }
  // get<int64_t>() of 2^63 and above (stored unsigned) is a cast to a
  // negative number: refuse it by name instead.
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return absl::DataLossError(absl::StrCat(path, ": ", key, " ", v.dump(),
                                            " is too large (at most ",
                                            INT64_MAX, ")"));
  }
  const int64_t value = v.get<int64_t>();
  if (value < min) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", key, " ", value, ": must be >= ", min));
  }
  return value;
}

// Reads and checks DIR/trainer_state.json. A checkpoint directory named
// step_N must hold step N.
absl::StatusOr<TrainerState> ReadTrainerState(const std::string& dir) {
  const std::string path = dir + "/" + kTrainerStateFile;
  XLNET_ASSIGN_OR_RETURN(nlohmann::json j, ReadStateJson(path, "trainer_state",
                                                         kTrainerStateVersion));
  TrainerState state;
  XLNET_ASSIGN_OR_RETURN(state.step, IntField(j, "step", path, 0, {}));
  std::string name = dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') + 1);
  int64_t dir_step = 0;
  if (name.rfind("step_", 0) == 0 &&
      absl::SimpleAtoi(name.substr(5), &dir_step) && dir_step != state.step) {
    return absl::DataLossError(absl::StrCat(path, ": step ", state.step,
                                            " is not the step of its "
                                            "directory ",
                                            name));
  }
  XLNET_ASSIGN_OR_RETURN(state.skipped_steps,
                         IntField(j, "skipped_steps", path, 0, 0));
  if (state.skipped_steps > state.step) {
    return absl::DataLossError(
        absl::StrCat(path, ": skipped_steps ", state.skipped_steps,
                     ": more than the ", state.step, " steps run"));
  }
  XLNET_ASSIGN_OR_RETURN(state.world_size,
                         IntField(j, "world_size", path, 1, 1));
  if (j.contains("loss_scale")) {
    if (!j["loss_scale"].is_number()) {
      return absl::DataLossError(
          absl::StrCat(path, ": loss_scale must be a number"));
    }
    state.loss_scale = j["loss_scale"].get<double>();
  }
  XLNET_ASSIGN_OR_RETURN(state.loss_scale_growth_tracker,
                         IntField(j, "loss_scale_growth_tracker", path, 0, 0));
  XLNET_ASSIGN_OR_RETURN(state.evals_without_improvement,
                         IntField(j, "evals_without_improvement", path, 0, 0));
  XLNET_ASSIGN_OR_RETURN(state.bad_steps, IntField(j, "bad_steps", path, 0, 0));
  XLNET_ASSIGN_OR_RETURN(state.bad_in_a_row,
                         IntField(j, "bad_in_a_row", path, 0, 0));
  XLNET_ASSIGN_OR_RETURN(state.first_bad_step,
                         IntField(j, "first_bad_step", path, 0, 0));
  // Every bad step was skipped; the first lies within the steps run and
  // is there exactly when some step was bad.
  if (state.bad_steps > state.skipped_steps ||
      state.bad_in_a_row > state.bad_steps ||
      state.first_bad_step > state.step ||
      (state.bad_steps > 0) != (state.first_bad_step > 0)) {
    return absl::DataLossError(absl::StrCat(
        path, ": bad_in_a_row ", state.bad_in_a_row, ", bad_steps ",
        state.bad_steps, ", first_bad_step ", state.first_bad_step,
        ": need bad_in_a_row <= bad_steps <= skipped_steps (",
        state.skipped_steps, "), first_bad_step <= step (", state.step,
        ") and first_bad_step > 0 exactly when bad_steps > 0"));
  }
  return state;
}

}  // namespace

torch::Tensor StepValue::ToTensor(const torch::Device& device) const {
  if (!tensor_.defined()) {
    return torch::full({}, value_,
                       torch::TensorOptions(torch::kFloat64).device(device));
  }
  TORCH_CHECK(tensor_.numel() == 1,
              "a StepOutput value must hold one number, got a tensor of shape ",
              tensor_.sizes());
  return tensor_.detach().reshape({}).to(device, torch::kFloat64);
}

double StepValue::Value() const {
  return tensor_.defined() ? tensor_.item<double>() : value_;
}

void InstallStopSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

void RequestStop() { g_stop_requested = true; }
void ClearStopRequest() { g_stop_requested = false; }
bool StopRequested() { return g_stop_requested.load(); }

Trainer::Trainer(TrainerOptions options, TrainUnit* unit, ProcessGroup* group)
    : options_(std::move(options)),
      unit_(unit),
      group_(group),
      checkpoints_(options_.run_dir, options_.train.keep_checkpoints) {
  params_ = unit_->Parameters();
  optimizer_ = std::make_unique<AdamW>(params_, options_.train);
  if (options_.loss_scaling || options_.train.dtype == Dtype::kFp16) {
    scaler_.emplace(options_.loss_scaling.value_or(LossScalerOptions()));
  }
  if (group_ != nullptr && group_->world_size() > 1) {
    reducer_ = std::make_unique<GradientReducer>(
        group_, params_, GradReduceOptionsOf(options_.train));
  }
}

int Trainer::rank() const { return group_ ? group_->rank() : 0; }

bool Trainer::StopRequestedOnAnyRank() {
  double stop = g_stop_requested.load() ? 1 : 0;
  if (group_ && world_size() > 1) {
    std::vector<torch::Tensor> t = {torch::tensor({stop}, torch::kFloat64)};
    group_->AllReduceSum(t);
    stop = t[0][0].item<double>();
  }
  return stop > 0;
}
int Trainer::world_size() const { return group_ ? group_->world_size() : 1; }

absl::Status Trainer::AppendMetrics(const std::string& line) {
  if (rank() != 0) return absl::OkStatus();
  const std::string path = RunPath(options_.run_dir, kMetricsFile);
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status Trainer::TensorBoardScalars(const nlohmann::json& line,
                                         const std::string& prefix) {
  if (!tb_) return absl::OkStatus();
  for (const auto& item : line.items()) {
    if (item.key() == "step" || !item.value().is_number()) continue;
    XLNET_RETURN_IF_ERROR(
        tb_->Scalar(step_, prefix + item.key(), item.value().get<double>()));
  }
  return absl::OkStatus();
}

absl::Status Trainer::TruncateMetricsAfter(int64_t step) {
  // A run that died after its last checkpoint logged steps that the resumed
  // run repeats; drop them so metrics.jsonl has each step once.
  const std::string path = RunPath(options_.run_dir, kMetricsFile);
  if (rank() != 0 || !PathExists(path)) return absl::OkStatus();
  // Lines that do not parse (a torn last line from a crash) go too.
  std::string kept;
  XLNET_RETURN_IF_ERROR(
      ReadMetricsLines(path, kMaxMetricsBytes, MetricsWindow::kWhole,
                       [&](const std::string& line, const nlohmann::json& j) {
                         if (j.contains("step")) {
                           absl::StatusOr<int64_t> s =
                               JsonInteger(j["step"], path, 0, INT64_MAX);
                           if (!s.ok() || *s > step) return;
                         }
                         absl::StrAppend(&kept, line, "\n");
                       }));
  return WriteFileAtomic(path, kept);
}

absl::Status Trainer::SetAsideNewerCheckpoints(const std::string& restored,
                                               int64_t step) {
  XLNET_ASSIGN_OR_RETURN(const std::string aside,
                         checkpoints_.SetAsideNewerThan(step));
  if (aside.empty()) return absl::OkStatus();
  const std::string metrics = RunPath(options_.run_dir, kMetricsFile);
  if (PathExists(metrics)) {
    XLNET_ASSIGN_OR_RETURN(const std::string text,
                           ReadFile(metrics, kMaxMetricsBytes));
    XLNET_RETURN_IF_ERROR(
        WriteFileAtomic(absl::StrCat(aside, "/", kMetricsFile), text));
  }
  XLOG(WARNING) << "resuming " << restored << " (step " << step
                << "): the run's checkpoints after step " << step
                << " belong to the timeline this resume leaves; they were "
                   "moved, unchanged, with a copy of "
                << kMetricsFile << ", to " << aside
                << " (--resume latest will not pick them; delete the "
                   "directory when it is no longer needed)";
  return absl::OkStatus();
}

absl::Status Trainer::CheckRunLock(const std::string& what) const {
  if (!options_.check_run_lock) return absl::OkStatus();
  const absl::Status status = options_.check_run_lock();
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), "; not saving ", what));
}

absl::StatusOr<std::vector<int>> Trainer::FailedRanks(bool failed,
                                                      const std::string& what) {
  if (!group_ || world_size() == 1) {
    return failed ? std::vector<int>{0} : std::vector<int>{};
  }
  std::vector<int> out;
  XLNET_RETURN_IF_ERROR(CatchExceptions(what, [&]() {
    std::vector<torch::Tensor> t = {
        torch::zeros({world_size()}, torch::kFloat64)};
    if (failed) t[0][rank()].fill_(1.0);
    group_->AllReduceSum(t);
    for (int r = 0; r < world_size(); ++r) {
      if (t[0][r].item<double>() > 0) out.push_back(r);
    }
    return absl::OkStatus();
  }));
  return out;
}

// A checkpoint on its way: this rank's files being staged (every rank), then
// rank 0 committing. Every rank holds one between StartSave and the step at
// which the all-reduced progress says the commit is done (or failed).
struct Trainer::PendingSave {
  enum class Phase { kStaging, kCommitting };
  int64_t step = 0;
  std::string name;     // "checkpoint step_N", for messages
  std::string staging;  // StagingDir of the step
  bool background = false;
  Phase phase = Phase::kStaging;
  std::chrono::steady_clock::time_point start;
  double snapshot_seconds = 0;  // the training thread's share
  int64_t trained_steps = 0;  // steps trained while it was written
  // Rank 0 lost the run's lock: nothing is written by any rank.
  bool lock_lost = false;
  // The copies (background) or the live tensors (not) to write: this
  // rank's per-rank files, and on rank 0 also kWeightsFile/kOptimizerFile.
  std::unique_ptr<StateSnapshot> snapshot;
  StateSnapshot::Files live;
  // Rank 0: what the commit writes beside the tensors, and the manager it
  // commits through (a copy: the training thread may change the original's
  // pruning rule meanwhile).
  std::map<std::string, std::string> text_files;
  std::optional<CheckpointManager> manager;
  int64_t checksummed = 0;  // by this rank while staging
  SaveReport report;        // rank 0's commit
  // Rank 0: config.json's text, taken on the training thread.
  std::string config_json;
  // This rank's job of the current phase (none on ranks > 0 while rank 0
  // commits).
  std::unique_ptr<BackgroundJob> job;

  // The tensors to write (the writer thread's first call of a background
  // save copies the device clones to the host).
  StateSnapshot::Files& Files() { return snapshot ? snapshot->Host() : live; }
};

Trainer::~Trainer() = default;

absl::Status Trainer::Save(int64_t step, bool background) {
  XLNET_RETURN_IF_ERROR(StartSave(step, background));
  if (background) return absl::OkStatus();
  return FinishSave();
}

absl::Status Trainer::SaveFiles(const std::string& what,
                                std::map<std::string, NamedTensors>* files) {
  XLNET_RETURN_IF_ERROR(unit_->SaveUnitState(rank(), files));
  return CatchExceptions(what, [&]() {
    (*files)[RngFile(rank())] = {{"cpu", CpuRngState()}};
    if (rank() == 0) {
      (*files)[kWeightsFile] = unit_->StateDict();
      (*files)[kOptimizerFile] = optimizer_->StateTensors();
    }
    return absl::OkStatus();
  });
}

absl::Status Trainer::ReserveSaveBuffer() {
  const auto start = std::chrono::steady_clock::now();
  StateSnapshot::Files files;
  XLNET_RETURN_IF_ERROR(
      SaveFiles("sizing the background saves' host buffer", &files));
  int64_t bytes = 0;
  XLNET_RETURN_IF_ERROR(
      CatchExceptions("reserving the background saves' host buffer", [&]() {
        bytes = StateSnapshot::ReserveHostBuffer(files);
        return absl::OkStatus();
      }));
  if (bytes > 0) {
    XLOG(INFO) << absl::StrFormat(
        "background saves: %s of page-locked host memory reserved in %.2f s",
        HumanBytes(static_cast<double>(bytes)),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  return absl::OkStatus();
}

absl::Status Trainer::StartSave(int64_t step, bool background) {
  // One save at a time: the previous one is committed first.
  XLNET_RETURN_IF_ERROR(FinishSave());
  // Never a checkpoint of non-finite weights (on every rank, before anything
  // is written).
  XLNET_RETURN_IF_ERROR(CheckWeights());
  auto save = std::make_unique<PendingSave>();
  save->step = step;
  save->name = absl::StrCat("checkpoint step_", step);
  save->background = background;
  save->start = std::chrono::steady_clock::now();
  // Every rank, rank 0 included: its own state into the staging directory
  // (a filesystem shared by all ranks, as for any multi-node checkpoint),
  // checksummed by itself, then its rank manifest (rank_files.h).
  save->staging = StagingDir(checkpoints_.checkpoints_dir(), step);
  // Rank 0 first checks that RUN is still this run's: nothing is written
  // otherwise, by any rank.
  absl::Status own =
      rank() == 0 ? CheckRunLock(checkpoints_.StepDir(step)) : absl::OkStatus();
  save->lock_lost = !own.ok();
  StateSnapshot::Files files;
  if (own.ok()) own = SaveFiles(absl::StrCat("saving ", save->name), &files);
  if (own.ok()) {
    own = CatchExceptions(absl::StrCat("saving ", save->name), [&]() {
      if (background) {
        save->snapshot = StateSnapshot::Take(files);
      } else {
        save->live = std::move(files);
      }
      return absl::OkStatus();
    });
  }
  if (rank() == 0 && own.ok()) {
    save->text_files = options_.extra_files;
    save->text_files[kRunConfigFile] = options_.config_yaml;
    nlohmann::json state = {
        {"step", step},
        {"skipped_steps", skipped_},
        {"world_size", world_size()},
        {"evals_without_improvement", evals_without_improvement_},
        {"bad_in_a_row", bad_in_a_row_},
        {"bad_steps", bad_steps_}};
    if (first_bad_step_ > 0) state["first_bad_step"] = first_bad_step_;
    if (scaler_) {
      state["loss_scale"] = scaler_->scale();
      state["loss_scale_growth_tracker"] = scaler_->growth_tracker();
    }
    save->text_files[kTrainerStateFile] =
        StateJsonText("trainer_state", kTrainerStateVersion, state);
    save->manager = checkpoints_;
    save->config_json = unit_->ModelConfigJson();
  }
  save->snapshot_seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - save->start)
                               .count();
  PendingSave* raw = save.get();
  auto stage = [this, raw, own]() -> absl::Status {
    XLNET_RETURN_IF_ERROR(own);
    StateSnapshot::Files& all = raw->Files();
    std::map<std::string, NamedTensors> per_rank;
    for (auto& [file, tensors] : all) {
      if (RankOfFile(file)) per_rank[file] = tensors;
    }
    XLNET_ASSIGN_OR_RETURN(raw->checksummed,
                           WriteRankFiles(raw->staging, raw->step, world_size(),
                                          rank(), per_rank));
    return absl::OkStatus();
  };
  save->job = background && own.ok() ? BackgroundJob::Start(stage)
                                     : BackgroundJob::RunNow(stage);
  pending_save_ = std::move(save);
  ++save_serial_;
  return absl::OkStatus();
}

std::array<double, 2> Trainer::SaveProgress() const {
  const PendingSave* save = pending_save_.get();
  if (!save || !save->job || !save->job->done()) return {0, 0};
  return save->job->status().ok() ? std::array<double, 2>{1, 0}
                                  : std::array<double, 2>{0, 1};
}

absl::Status Trainer::AdvanceSave(double done, double failed) {
  PendingSave* save = pending_save_.get();
  if (!save) return absl::OkStatus();
  if (save->phase == PendingSave::Phase::kStaging) {
    if (failed > 0) {
      const std::string unchanged =
          "; nothing was committed (the previous checkpoint stays the newest)";
      // Every rank sees the failure at this step: which ranks could not
      // stage their files (one more collective), then the error.
      std::unique_ptr<PendingSave> ended = std::move(pending_save_);
      const absl::Status own = ended->job->Wait();
      XLNET_ASSIGN_OR_RETURN(
          std::vector<int> ranks,
          FailedRanks(!own.ok(), absl::StrCat("saving ", ended->name)));
      if (rank() == 0) RemoveAll(ended->staging).IgnoreError();
      if (ended->lock_lost) return own;
      if (!own.ok()) {
        return absl::Status(own.code(),
                            absl::StrCat(ended->name, ": rank ", rank(), ": ",
                                         own.message(), unchanged));
      }
      return absl::DataLossError(absl::StrCat(
          ended->name, ": rank(s) ", absl::StrJoin(ranks, ", "),
          " could not write their files (their errors say why)", unchanged));
    }
    if (done < world_size()) return absl::OkStatus();
    // Every rank's files are staged: rank 0 merges the manifests, writes
    // the shared files and commits.
    save->job->Wait();
    save->job.reset();
    save->phase = PendingSave::Phase::kCommitting;
    ++save_serial_;
    if (rank() != 0) return absl::OkStatus();
    auto commit = [this, save]() -> absl::Status {
      StateSnapshot::Files& all = save->Files();
      CheckpointContents contents;
      contents.model = std::move(all[kWeightsFile]);
      contents.tensor_files[kOptimizerFile] = std::move(all[kOptimizerFile]);
      contents.text_files = save->text_files;
      contents.staging_dir = save->staging;
      contents.world_size = world_size();
      absl::Status committed = save->manager->Save(
          save->step, save->config_json, contents, &save->report);
      const absl::Status removed = RemoveAll(save->staging);
      if (committed.ok()) committed = removed;
      return committed;
    };
    save->job = save->background ? BackgroundJob::Start(commit)
                                 : BackgroundJob::RunNow(commit);
    return absl::OkStatus();
  }
  // Committing: rank 0's outcome, the same on every rank.
  if (done == 0 && failed == 0) return absl::OkStatus();
  std::unique_ptr<PendingSave> ended = std::move(pending_save_);
  if (failed > 0) {
    if (rank() == 0) XLNET_RETURN_IF_ERROR(ended->job->Wait());
    return absl::DataLossError(absl::StrCat(
        "rank 0 could not commit ", ended->name, " (its error says why)"));
  }
  if (rank() == 0) {
    ended->job->Wait();
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - ended->start)
                               .count();
    const std::string sizes =
        absl::StrFormat("checksummed %d bytes; merged %d rank manifests",
                        ended->checksummed + ended->report.checksummed_bytes,
                        ended->report.merged_manifests);
    if (ended->background) {
      XLOG(INFO) << absl::StrFormat(
          "saved checkpoint %s in the background in %.2f s while %d steps "
          "trained (%.3f s on the training thread to copy %d bytes; %s)",
          checkpoints_.StepDir(ended->step), seconds, ended->trained_steps,
          ended->snapshot_seconds, ended->snapshot->bytes(), sizes);
    } else {
      XLOG(INFO) << absl::StrFormat("saved checkpoint %s in %.2f s (%s)",
                                    checkpoints_.StepDir(ended->step), seconds,
                                    sizes);
    }
  }
  return absl::OkStatus();
}

absl::Status Trainer::FinishSave() {
  if (!pending_save_) return absl::OkStatus();
  // Writing and checksumming on a slow file system is not a stuck step.
  ScopedTimeout io(group_, std::chrono::seconds(options_.train.io_timeout_s),
                   "train.io_timeout_s");
  while (pending_save_) {
    PendingSave* save = pending_save_.get();
    if (save->job) save->job->Wait();
    std::array<double, 2> progress = SaveProgress();
    if (group_ && world_size() > 1) {
      // Instead of a barrier: how many ranks are done, how many failed.
      XLNET_RETURN_IF_ERROR(
          CatchExceptions(absl::StrCat("saving ", save->name), [&]() {
            std::vector<torch::Tensor> t = {
                torch::tensor({progress[0], progress[1]}, torch::kFloat64)};
            group_->AllReduceSum(t);
            progress = {t[0][0].item<double>(), t[0][1].item<double>()};
            return absl::OkStatus();
          }));
    }
    XLNET_RETURN_IF_ERROR(AdvanceSave(progress[0], progress[1]));
  }
  return absl::OkStatus();
}

absl::Status Trainer::VerifyCheckpoint(const std::string& dir) {
  absl::StatusOr<int64_t> share = VerifyShare(dir, rank(), world_size());
  if (!group_ || world_size() == 1) {
    if (share.ok()) resume_verified_bytes_ = *share;
    return share.status();
  }
  XLNET_ASSIGN_OR_RETURN(
      const std::vector<int> failed,
      FailedRanks(!share.ok(), absl::StrCat("verifying ", dir)));
  if (failed.empty()) {
    resume_verified_bytes_ = *share;
    return absl::OkStatus();
  }
  // Every rank gets the same problem: rank 0's when it failed (its listing
  // explains the others'), else the first failing rank's.
  const int first = failed.front();
  std::string problem;
  if (rank() == first) {
    problem = std::string(share.status().message());
    if (first != 0) problem = absl::StrCat("rank ", first, ": ", problem);
  }
  XLNET_RETURN_IF_ERROR(CatchExceptions(absl::StrCat("verifying ", dir), [&]() {
    group_->BroadcastText(&problem, first);
    return absl::OkStatus();
  }));
  return absl::DataLossError(problem);
}

absl::Status Trainer::Restore(const std::string& dir) {
  XLNET_ASSIGN_OR_RETURN(const TrainerState state, ReadTrainerState(dir));
  XLNET_RETURN_IF_ERROR(
      CopyWeightsFromDir(dir, unit_->StateDict(), Checksums::kAlreadyVerified));
  XLNET_ASSIGN_OR_RETURN(SafetensorsFile optimizer,
                         SafetensorsFile::Open(dir + "/" + kOptimizerFile));
  XLNET_RETURN_IF_ERROR(optimizer_->LoadState(optimizer));
  step_ = state.step;
  skipped_ = state.skipped_steps;
  evals_without_improvement_ = state.evals_without_improvement;
  bad_in_a_row_ = state.bad_in_a_row;
  bad_steps_ = state.bad_steps;
  first_bad_step_ = state.first_bad_step;
  if (first_bad_step_ > 0) checkpoints_.set_keep_newest_before(first_bad_step_);
  if (scaler_ && state.loss_scale) {
    XLNET_RETURN_IF_ERROR(Annotate(
        scaler_->Restore(*state.loss_scale, state.loss_scale_growth_tracker),
        dir + "/" + kTrainerStateFile));
  }
  const std::string rng = dir + "/" + RngFile(rank());
  if (PathExists(rng)) {
    XLNET_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(rng));
    XLNET_ASSIGN_OR_RETURN(torch::Tensor cpu, file.Load("cpu"));
    SetCpuRngState(cpu);
  } else {
    XLOG(WARNING)
        << dir << " has no RNG state for rank " << rank()
        << " (different world size); dropout continues from a fresh stream";
  }
  XLNET_RETURN_IF_ERROR(unit_->LoadUnitState(dir, rank()));
  XLOG(INFO) << "resumed from " << dir << " at step " << step_;
  return TruncateMetricsAfter(step_);
}

absl::Status Trainer::EvaluateAndKeepBest() {
  unit_->SetTraining(false);
  std::map<std::string, double> eval;
  XLNET_RETURN_IF_ERROR(
      CatchExceptions(absl::StrCat("evaluation at step ", step_), [&]() {
        torch::NoGradGuard no_grad;
        eval = unit_->Evaluate();
        return absl::OkStatus();
      }));
  unit_->SetTraining(true);
  evaluated_step_ = step_;
  if (eval.empty()) return absl::OkStatus();
  nlohmann::json line = {{"step", step_}};
  nlohmann::json tb_line;
  std::string text;
  for (const auto& [k, v] : eval) {
    line["eval_" + k] = v;
    tb_line[k] = v;
    absl::StrAppend(&text, " eval_", k, " ", absl::StrFormat("%.4f", v));
  }
  XLNET_RETURN_IF_ERROR(AppendMetrics(line.dump()));
  XLNET_RETURN_IF_ERROR(TensorBoardScalars(tb_line, "eval/"));
  if (rank() == 0) XLOG(INFO) << "step " << step_ << ":" << text;
  if (options_.best_metric.empty()) return absl::OkStatus();
  auto it = eval.find(options_.best_metric);
  if (it == eval.end()) {
    std::string keys;
    for (const auto& [k, v] : eval) absl::StrAppend(&keys, " ", k);
    return absl::InvalidArgumentError(
        absl::StrCat("the best-checkpoint metric '", options_.best_metric,
                     "' is not among the evaluation's metrics:", keys));
  }
  const double value = it->second;
  // How much `value` improves on the best so far (> 0: better).
  const double gain =
      !best_value_ ? std::numeric_limits<double>::infinity()
                   : (options_.best_lower_is_better ? *best_value_ - value
                                                    : value - *best_value_);
  const bool better = std::isfinite(value) && gain > 0;
  // Early stopping counts evaluations that do not beat the best by more
  // than patience_min_delta (HF's early_stopping_threshold).
  if (std::isfinite(value) && gain > options_.train.patience_min_delta) {
    evals_without_improvement_ = 0;
  } else {
    ++evals_without_improvement_;
  }
  if (!better) return absl::OkStatus();
  // RUN/best is never written from non-finite weights (whose evaluation can
  // still give a finite accuracy). Every rank takes this branch.
  XLNET_RETURN_IF_ERROR(CheckWeights());
  best_value_ = value;
  if (rank() == 0) XLNET_RETURN_IF_ERROR(SaveBest(eval));
  return absl::OkStatus();
}

absl::Status Trainer::SaveBest(const std::map<std::string, double>& eval) {
  const std::string dir = RunPath(options_.run_dir, kBestDir);
  XLNET_RETURN_IF_ERROR(CheckRunLock(dir));
  nlohmann::json state = {{"step", step_},
                          {"metric", options_.best_metric},
                          {"value", *best_value_},
                          {"lower_is_better", options_.best_lower_is_better}};
  for (const auto& [k, v] : eval) state["eval"][k] = v;
  XLNET_RETURN_IF_ERROR(WriteModelDir(
      dir, unit_->ModelConfigJson(), unit_->StateDict(),
      [&](const AtomicDirWriter& writer) -> absl::Status {
        for (const auto& [name, bytes] : options_.extra_files) {
          XLNET_RETURN_IF_ERROR(WriteFileAtomic(writer.Path(name), bytes));
        }
        // As in every checkpoint: what the model was trained with (its
        // text rules included, which fine-tuning from here reads).
        XLNET_RETURN_IF_ERROR(
            WriteFileAtomic(writer.Path(kRunConfigFile), options_.config_yaml));
        return WriteFileAtomic(writer.Path(kBestStateFile),
                               state.dump(2) + "\n");
      }));
  XLOG(INFO) << "new best " << options_.best_metric << " "
             << absl::StrFormat("%.4f", *best_value_) << " at step " << step_
             << ": saved " << dir;
  return absl::OkStatus();
}

namespace {

// Every rank of a launch against rank 0: the same resolved config and
// training data (else all stop, naming both), then rank 0's weights.
absl::Status StartLikeRankZero(ProcessGroup& group, TrainUnit& unit,
                               const std::string& config_yaml) {
  XLNET_RETURN_IF_ERROR(group.CheckSameOnAllRanks("config", config_yaml));
  const TrainingData data = unit.Data();
  XLNET_RETURN_IF_ERROR(group.AgreeWithRank0(
      "the training data", data.key, data.description,
      "every rank must read the same corpus (a path all ranks share, "
      "with the same contents)"));
  return CatchExceptions("broadcasting parameters", [&]() {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : unit.StateDict()) {
      std::vector<torch::Tensor> t = {tensor};
      group.Broadcast(t, 0);
    }
    return absl::OkStatus();
  });
}

// The value of `metric` that RUN/best holds (best.json), if it holds one for
// that metric.
absl::StatusOr<std::optional<double>> KeptBestValue(const std::string& run_dir,
                                                    const std::string& metric) {
  const std::string best =
      absl::StrCat(RunPath(run_dir, kBestDir), "/", kBestStateFile);
  if (!PathExists(best)) return std::nullopt;
  XLNET_ASSIGN_OR_RETURN(std::string text, ReadFile(best, kMaxConfigFileBytes));
  absl::StatusOr<nlohmann::json> j = ParseJson(text, best);
  if (!j.ok()) return absl::DataLossError(j.status().message());
  if (!j->is_object() || !j->contains("metric") ||
      !(*j)["metric"].is_string() || !j->contains("value") ||
      !(*j)["value"].is_number()) {
    return absl::DataLossError(absl::StrCat(
        best, ": expected a string 'metric' and a number 'value'"));
  }
  if ((*j)["metric"].get<std::string>() != metric) return std::nullopt;
  return (*j)["value"].get<double>();
}

}  // namespace

absl::Status Trainer::Prepare() {
  ScopedTimeout startup(group_,
                        std::chrono::seconds(options_.train.startup_timeout_s),
                        "train.startup_timeout_s");
  if (options_.train.patience > 0 && options_.best_metric.empty()) {
    return absl::InvalidArgumentError(
        "train.patience: early stopping watches the metric that picks "
        "RUN/best (finetune.metric: fine-tuning with a dev set); this run has "
        "none");
  }
  if (reducer_ && options_.train.grad_reduce_dtype != Dtype::kFp32) {
    XLNET_RETURN_IF_ERROR(group_->CheckAllReduceDtype(
        *GradReduceOptionsOf(options_.train).reduce_dtype,
        "train.grad_reduce_dtype"));
  }
  XLNET_RETURN_IF_ERROR(MakeDirs(options_.run_dir));
  // Staging directories of a save that was killed or failed go before any
  // rank can stage again: the other ranks save only after a collective
  // below (LatestValidStep's or StartLikeRankZero's) that waits for this.
  if (rank() == 0) {
    XLNET_RETURN_IF_ERROR(RemoveStagingDirs(checkpoints_.checkpoints_dir()));
  }
  // The checkpoint resumed from ("" when none) and its step; every rank
  // verified its share of it (VerifyCheckpoint), and nothing reads it to
  // verify again.
  std::string restored;
  int64_t restored_step = 0;
  if (options_.resume == "latest") {
    XLNET_ASSIGN_OR_RETURN(const int64_t step, LatestValidStep());
    if (step >= 0) {
      restored = checkpoints_.StepDir(step);
      restored_step = step;
    }
  } else if (!options_.resume.empty()) {
    restored = options_.resume;
    XLNET_RETURN_IF_ERROR(VerifyCheckpoint(restored));
    XLNET_ASSIGN_OR_RETURN(const TrainerState state,
                           ReadTrainerState(restored));
    restored_step = state.step;
  }
  if (!restored.empty()) {
    XLOG(INFO) << "rank " << rank() << " verified " << resume_verified_bytes_
               << " bytes of " << restored;
  }
  // Before anything is written: the settings that differ from the
  // checkpoint's, reported, and refused when they break exactness.
  ResumedSettings resumed;
  if (!restored.empty()) {
    XLNET_ASSIGN_OR_RETURN(
        resumed, CompareResumedSettings(restored, options_.config_yaml,
                                        options_.allow_changed_settings,
                                        /*report=*/rank() == 0));
  }
  if (rank() == 0 && !restored.empty()) {
    XLNET_RETURN_IF_ERROR(SetAsideNewerCheckpoints(restored, restored_step));
  }
  if (rank() == 0) {
    XLNET_RETURN_IF_ERROR(WriteRunSettings(options_.run_dir, restored_step,
                                           restored, options_.config_yaml,
                                           resumed));
  }
  if (group_ && world_size() > 1) {
    XLNET_RETURN_IF_ERROR(
        StartLikeRankZero(*group_, *unit_, options_.config_yaml));
  }
  if (!options_.best_metric.empty() && !options_.resume.empty()) {
    // A resumed run competes with the best model the run already kept.
    XLNET_ASSIGN_OR_RETURN(
        best_value_, KeptBestValue(options_.run_dir, options_.best_metric));
  }
  if (!restored.empty()) {
    XLNET_RETURN_IF_ERROR(Restore(restored));
  } else if (options_.resume == "latest") {
    // No checkpoint yet (a first start, or one that died before its first
    // save): a fresh run, without what a dead attempt logged.
    if (rank() == 0) {
      XLOG(INFO) << "--resume latest: no checkpoint in "
                 << checkpoints_.checkpoints_dir() << "; starting at step 0";
    }
    XLNET_RETURN_IF_ERROR(TruncateMetricsAfter(0));
  }
  // Once, before the first step: training from non-finite weights (a
  // checkpoint an older version saved from a diverged run, or a broken
  // model directory) only produces skipped steps.
  XLNET_ASSIGN_OR_RETURN(const bool finite, WeightsFiniteOnAllRanks());
  if (!finite && restored.empty()) {
    return absl::InvalidArgumentError(
        "the starting weights (the model directory or the initialization) "
        "are not finite; nothing was trained");
  }
  if (!finite) {
    return absl::DataLossError(absl::StrCat(
        restored,
        ": its weights are not finite (saved from a diverged run); nothing "
        "was trained. Resume from an older checkpoint (--resume ",
        checkpoints_.checkpoints_dir(), "/step_N) with a lower train.lr"));
  }
  weights_finite_at_ = step_;
  return absl::OkStatus();
}

absl::StatusOr<bool> Trainer::WeightsFiniteOnAllRanks() {
  double bad = 0;
  XLNET_RETURN_IF_ERROR(CatchExceptions("checking the weights", [&]() {
    bad = AllFinite(unit_->StateDict()) ? 0 : 1;
    if (group_ && world_size() > 1) {
      std::vector<torch::Tensor> t = {torch::tensor({bad}, torch::kFloat64)};
      group_->AllReduceSum(t);
      bad = t[0][0].item<double>();
    }
    return absl::OkStatus();
  }));
  return bad == 0;
}

absl::Status Trainer::CheckWeights() {
  if (weights_finite_at_ == step_) return absl::OkStatus();
  XLNET_ASSIGN_OR_RETURN(const bool finite, WeightsFiniteOnAllRanks());
  if (finite) {
    weights_finite_at_ = step_;
    return absl::OkStatus();
  }
  // An update cannot be undone without a copy of the weights, so the run
  // stops here, before any save.
  return absl::InternalError(absl::StrCat(
      "step ", step_, ": the weights are not finite (they were after step ",
      weights_finite_at_,
      "; an optimizer update since made them so, e.g. a learning rate too "
      "large for the dtype); nothing was saved from them. ",
      RecoveryAdvice(weights_finite_at_ + 1)));
}

std::string Trainer::RecoveryAdvice(int64_t before) const {
  if (first_bad_step_ > 0) before = std::min(before, first_bad_step_);
  const std::optional<int64_t> good = checkpoints_.NewestBefore(before);
  const std::string fixes =
      "a lower train.lr, a smaller train.clip or train.dtype=fp32, or check "
      "the data";
  if (!good) {
    return absl::StrCat("No checkpoint precedes step ", before,
                        ": start over with ", fixes, ".");
  }
  const std::string dir = checkpoints_.StepDir(*good);
  return absl::StrCat("The last good checkpoint is ", dir,
                      ": resume from it (--resume ", dir, ") with ", fixes,
                      ".");
}

absl::StatusOr<int64_t> Trainer::LatestValidStep() {
  // All ranks go through the candidates together, each verifying its share
  // (one all-reduce per candidate); rank 0 reports skipped checkpoints once
  // and reads the chosen one's step.
  int64_t step = -1;
  absl::Status status;
  absl::StatusOr<std::optional<std::string>> latest = checkpoints_.LatestValid(
      [this](const std::string& dir) { return VerifyCheckpoint(dir); },
      /*report=*/rank() == 0);
  if (rank() == 0) {
    if (!latest.ok()) {
      status = absl::Status(
          latest.status().code(),
          absl::StrCat(latest.status().message(),
                       ". Restore a good copy, or start over without --resume "
                       "and with --overwrite (which deletes them)"));
    } else if (latest->has_value()) {
      // An error here too must reach the other ranks, not leave them waiting.
      absl::StatusOr<TrainerState> state = ReadTrainerState(**latest);
      if (state.ok()) {
        step = state->step;
      } else {
        status = state.status();
      }
    }
  }
  if (group_ && world_size() > 1) {
    // [rank 0 failed, its step + 1]; the other ranks add zeros.
    double failed = status.ok() ? 0 : 1;
    double found = rank() == 0 ? static_cast<double>(step + 1) : 0;
    XLNET_RETURN_IF_ERROR(CatchExceptions("choosing the checkpoint", [&]() {
      std::vector<torch::Tensor> t = {
          torch::tensor({failed, found}, torch::kFloat64)};
      group_->AllReduceSum(t);
      failed = t[0][0].item<double>();
      found = t[0][1].item<double>();
      return absl::OkStatus();
    }));
    if (rank() != 0) {
      if (failed > 0) {
        return absl::DataLossError(
            "rank 0 found no checkpoint to resume (its error says why)");
      }
      step = static_cast<int64_t>(found) - 1;
    }
  }
  XLNET_RETURN_IF_ERROR(status);
  return step;
}

// One step's numbers on their way to the host: for a step read late on
// CUDA, an asynchronous copy into page-locked memory (done when `copied`
// is); otherwise the tensor itself, which ReadStep copies to the host
// (nothing to copy on the CPU). Layout of `values` (fp64): StepValueIndex.
struct Trainer::PendingRead {
  int64_t step = 0;  // step_ after the step
  double lr = 0;
  double loss_scale = 1;       // the scale its loss was multiplied by
  double enqueue_seconds = 0;  // the host's time to queue the step
  int64_t save_serial = 0;     // save_serial_ when the progress was taken
  std::vector<std::string> metric_names;
  // The step's numbers: the tensor itself when read at once (ReadStep
  // copies it, blocking), a page-locked host copy when read late.
  torch::Tensor values;
  torch::Tensor source;  // the device tensor being copied, kept alive
#if TORCH_VERSION_MAJOR >= 2
  std::optional<c10::Event> copied;
#endif
};

namespace {

// Positions in PendingRead::values; the unit's metrics follow kMetrics.
enum StepValueIndex : int64_t {
  kLossSum,
  kNormalizer,
  kTokens,
  kStop,
  kSavesDone,
  kSavesFailed,
  kGradNorm,
  kFinite,
  kMetrics,
};

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer::PendingRead>> Trainer::EnqueueStep() {
  const TrainConfig& train = options_.train;
  const int64_t accum = train.grad_accum_steps;
  const auto step_start = std::chrono::steady_clock::now();
  auto pending = std::make_unique<PendingRead>();
  pending->lr = ScheduledLearningRate(train, step_);
  if (!std::isfinite(pending->lr)) {
    // Validation refuses a non-finite train.lr; this guards the schedule
    // and options built in code. Skipping cannot help: every step has it.
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step_ + 1, ": the learning rate is ", pending->lr,
                     " (train.lr ", train.lr, "); stopped before the update"));
  }
  // The step's numbers stay on the loss's device until ReadStep.
  torch::Tensor loss_sum, normalizer, tokens;
  std::map<std::string, torch::Tensor> metric_sums;
  XLNET_RETURN_IF_ERROR(
      CatchExceptions(absl::StrCat("step ", step_ + 1), [&]() {
        for (int64_t micro = 0; micro < accum; ++micro) {
          if (reducer_) reducer_->Prepare(/*sync=*/micro == accum - 1);
          StepOutput out = unit_->TrainStep();
          TORCH_CHECK(out.loss.defined() && out.loss.numel() == 1,
                      "TrainStep must return a scalar loss");
          if (scaler_) {
            scaler_->Scale(out.loss).backward();
          } else {
            out.loss.backward();
          }
          const torch::Device device = out.loss.device();
          if (!loss_sum.defined()) {
            const torch::Tensor zero = torch::zeros(
                {}, torch::TensorOptions(torch::kFloat64).device(device));
            loss_sum = normalizer = tokens = zero;
          }
          torch::NoGradGuard no_grad;
          // In fp64, in micro-batch order: the sums a host loop of
          // .item<double>() values would make.
          loss_sum = loss_sum + out.loss.detach().to(torch::kFloat64);
          normalizer = normalizer + out.normalizer.ToTensor(device);
          tokens = tokens + out.tokens.ToTensor(device);
          for (const auto& [k, v] : out.metrics) {
            torch::Tensor& sum = metric_sums[k];
            const torch::Tensor term =
                v.ToTensor(device) / static_cast<double>(accum);
            sum = sum.defined() ? sum + term : term;
          }
        }
        if (reducer_) reducer_->Finish();
        return absl::OkStatus();
      }));

  // One small collective per step: the global loss sum and normalizer (to
  // scale the gradients), tokens for the log, and whether any rank was
  // asked to stop (so all ranks stop at the same step).
  torch::Tensor sums;
  pending->save_serial = save_serial_;
  XLNET_RETURN_IF_ERROR(CatchExceptions("step all-reduce", [&]() {
    torch::NoGradGuard no_grad;
    // torch::full is a fill on the device, not a copy from the host (a
    // blocking one would sync).
    // With a save in the background, each rank's progress rides along:
    // ranks done, ranks failed (SaveProgress).
    const std::array<double, 2> progress = SaveProgress();
    sums = torch::stack(
        {loss_sum, normalizer, tokens,
         torch::full_like(loss_sum, g_stop_requested.load() ? 1.0 : 0.0),
         torch::full_like(loss_sum, progress[0]),
         torch::full_like(loss_sum, progress[1])});
    if (group_ && world_size() > 1) {
      std::vector<torch::Tensor> t = {sums};
      group_->AllReduceSum(t);
      sums = t[0];
    }
    return absl::OkStatus();
  }));
  // The reducer averaged the summed gradients over ranks; scale them to the
  // gradient of sum(loss) / sum(normalizer) (and undo the loss scale), then
  // clip, in one pass, on the device; the update is skipped on the device
  // when the loss or the gradient norm is not finite.
  pending->loss_scale = scaler_ ? scaler_->scale() : 1.0;
  torch::Tensor all, skip;
  XLNET_RETURN_IF_ERROR(CatchExceptions("gradient clipping", [&]() {
    torch::NoGradGuard no_grad;
    const torch::Tensor scale =
        torch::full_like(sums[1], static_cast<double>(world_size()))
            .div_(sums[1].clamp_min(1e-12) * pending->loss_scale);
    const torch::Tensor grad_norm =
        ScaleAndClipGrads(params_, train.clip, scale).to(sums.device()).view(1);
    // The host's rule (StepRecord::loss, finite) on the device, in fp64.
    const torch::Tensor loss = sums[0] / sums[1].clamp_min(1e-12);
    const torch::Tensor finite = torch::isfinite(grad_norm.reshape({}))
                                     .logical_and(torch::isfinite(loss));
    skip = finite.logical_not();
    std::vector<torch::Tensor> values = {sums, grad_norm,
                                         finite.to(torch::kFloat64).view(1)};
    for (const auto& [k, v] : metric_sums) {
      values.push_back(v.view(1));
      pending->metric_names.push_back(k);
    }
    all = torch::cat(values);
    return absl::OkStatus();
  }));
  {
    // LibTorch throws when a step's rate does not fit the weights' dtype
    // (e.g. 1e300 for fp32 weights): an error, not an exception out of Run.
    const std::string context =
        absl::StrCat("step ", step_ + 1, ": the optimizer update at rate ",
                     pending->lr, " (nothing is saved after it)");
    XLNET_RETURN_IF_ERROR(CatchExceptions(context, [&]() {
      optimizer_->Step(pending->lr, skip);
      return absl::OkStatus();
    }));
  }
  optimizer_->ZeroGrad();
  ++step_;
  pending->step = step_;
  XLNET_RETURN_IF_ERROR(CatchExceptions("step read", [&]() {
    if (all.is_cpu() || ReadsAtOnce(step_)) {
      // Read in ReadStep with a blocking copy (none on the CPU), as every
      // step is with train.step_reads each_step.
      pending->values = all;
      return absl::OkStatus();
    }
#if TORCH_VERSION_MAJOR >= 2
    // Queued behind the step: the host waits for it only in ReadStep.
    pending->values = torch::empty(
        all.sizes(), torch::TensorOptions(torch::kFloat64).pinned_memory(true));
    pending->values.copy_(all, /*non_blocking=*/true);
    pending->source = all;
    c10::impl::VirtualGuardImpl impl(all.device().type());
    pending->copied.emplace(all.device().type());
    pending->copied->record(impl.getStream(all.device()));
#else
    pending->values = all;  // read with a blocking copy in ReadStep
#endif
    return absl::OkStatus();
  }));
  // The page-locked buffer of the background saves, once all the state they
  // copy exists: in the run's first step, which start-up costs already
  // slow, rather than in the first save (StateSnapshot::ReserveHostBuffer).
  if (step_ == start_step_ + 1 && options_.save_checkpoints &&
      options_.train.background_save && options_.train.save_steps > 0 &&
      options_.train.save_steps < options_.train.max_steps) {
    XLNET_RETURN_IF_ERROR(ReserveSaveBuffer());
  }
  pending->enqueue_seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - step_start)
                                 .count();
  return pending;
}

bool Trainer::ReadsAtOnce(int64_t step) const {
  const TrainConfig& train = options_.train;
  if (train.step_reads == StepReads::kEachStep || scaler_) return true;
  const auto every = [step](int64_t n) { return n > 0 && step % n == 0; };
  return step == start_step_ + 1 || step == train.max_steps ||
         every(train.log_steps) || every(train.eval_steps) ||
         (options_.save_checkpoints && every(train.save_steps));
}

absl::StatusOr<Trainer::StepRecord> Trainer::ReadStep(
    std::unique_ptr<PendingRead> pending, bool at_once) {
  StepRecord r;
  r.step = pending->step;
  r.lr = pending->lr;
  std::vector<double> host;
  XLNET_RETURN_IF_ERROR(CatchExceptions(
      absl::StrCat("reading step ", r.step, "'s numbers"), [&]() {
        const auto read_start = std::chrono::steady_clock::now();
#if TORCH_VERSION_MAJOR >= 2
        if (pending->copied) pending->copied->synchronize();
#endif
        const torch::Tensor v = pending->values.cpu();
        r.read_seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - read_start)
                             .count();
        host.assign(v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
        return absl::OkStatus();
      }));
  r.seconds = pending->enqueue_seconds + r.read_seconds;
  ++(at_once ? step_host_reads_ : deferred_step_reads_);
  r.loss_sum = host[kLossSum];
  r.normalizer = host[kNormalizer];
  r.tokens = static_cast<int64_t>(host[kTokens]);
  r.stop = host[kStop] > 0;
  r.grad_norm = host[kGradNorm];
  r.finite = host[kFinite] != 0;
  for (size_t i = 0; i < pending->metric_names.size(); ++i) {
    r.metrics[pending->metric_names[i]] = host[kMetrics + i];
  }
  r.loss = r.loss_sum / std::max(r.normalizer, 1e-12);
  optimizer_->Settle(!r.finite);
  // With loss scaling, an overflow while the scale can still back off is
  // calibration, not a bad step (LossScaler::CountsAsBadStep).
  const bool bad =
      !r.finite &&
      (!scaler_ || scaler_->CountsAsBadStep(std::isfinite(r.loss)));
  if (r.finite) {
    bad_in_a_row_ = 0;
  } else {
    ++skipped_;
    if (bad) {
      ++bad_in_a_row_;
      ++bad_steps_;
      if (first_bad_step_ == 0) {
        // From now on pruning keeps the last checkpoint from before it.
        first_bad_step_ = r.step;
        checkpoints_.set_keep_newest_before(first_bad_step_);
      }
    }
    if (bad || !scaler_) {
      XLOG(WARNING) << "step " << r.step
                    << ": non-finite loss or gradient (loss " << r.loss
                    << ", grad norm " << r.grad_norm << "); step skipped ("
                    << bad_in_a_row_ << " in a row)";
    }
  }
  if (scaler_) {
    scaler_->Update(r.finite);
    if (!r.finite && !bad) {
      XLOG(INFO) << "step " << r.step << ": gradient overflow at loss scale "
                 << pending->loss_scale << "; step skipped, scale now "
                 << scaler_->scale();
    }
  }
  // A record whose save progress was taken in an earlier phase of the save
  // (or for an earlier save) says nothing about the current one.
  if (pending_save_) {
    ++pending_save_->trained_steps;
    if (pending->save_serial == save_serial_) {
      XLNET_RETURN_IF_ERROR(AdvanceSave(host[kSavesDone], host[kSavesFailed]));
    }
  }
  return r;
}

void StepTimeWindow::Add(double seconds) {
  seconds_.push_back(seconds);
  sum_ += seconds;
  while (seconds_.size() > capacity_) {
    sum_ -= seconds_.front();
    seconds_.pop_front();
  }
}

double StepTimeWindow::Eta(int64_t remaining) const {
  if (seconds_.empty() || remaining <= 0) return 0;
  return std::max(0.0, sum_ / static_cast<double>(seconds_.size())) *
         static_cast<double>(remaining);
}

void Trainer::PrintProgress(double loss, double lr, double grad_norm,
                            double tokens_per_sec) const {
  if (!options_.progress || rank() != 0) return;
  const TrainConfig& train = options_.train;
  XLOG(INFO) << absl::StrFormat(
      "step %d/%d | loss %.4f | lr %.2e | grad_norm %.3f | %s tok/s | ETA %s",
      step_, train.max_steps, loss, lr, grad_norm,
      WithCommas(static_cast<int64_t>(tokens_per_sec)),
      FormatDuration(step_times_.Eta(train.max_steps - step_)));
}

absl::Status Trainer::Log(const StepRecord& r) {
  const TrainConfig& train = options_.train;
  const auto now = std::chrono::steady_clock::now();
  step_times_.Add(std::chrono::duration<double>(now - last_step_end_).count());
  last_step_end_ = now;
  run_tokens_ += r.tokens;
  window_.tokens += r.tokens;
  window_.seconds += r.seconds;
  if (std::isfinite(r.loss)) {
    window_.loss_sum += r.loss_sum;
    window_.normalizer += r.normalizer;
  }
  if (r.step % train.log_steps != 0 && r.step != train.max_steps) {
    // The run's first step: a progress line (not a metrics line, so the
    // logged means keep covering whole log_steps windows).
    if (r.step == start_step_ + 1) {
      PrintProgress(r.loss, r.lr, r.grad_norm,
                    r.seconds > 0 ? r.tokens / r.seconds : 0);
    }
    return absl::OkStatus();
  }
  const double tokens_per_sec =
      window_.seconds > 0 ? window_.tokens / window_.seconds : 0;
  const double mean_loss =
      window_.normalizer > 0 ? window_.loss_sum / window_.normalizer : r.loss;
  // "learning_rate" is the name HF's Trainer and TensorBoard users look
  // for; "lr" stays for existing readers.
  nlohmann::json line = {{"step", r.step},
                         {"loss", mean_loss},
                         {"lr", r.lr},
                         {"learning_rate", r.lr},
                         {"grad_norm", r.grad_norm},
                         {"tokens_per_sec", tokens_per_sec}};
  for (const auto& [k, v] : r.metrics) line[k] = v;
  for (const auto& [k, v] : unit_->LogValues(step_)) line[k] = v;
  if (skipped_ > 0) line["skipped_steps"] = skipped_;
  if (scaler_) line["loss_scale"] = scaler_->scale();
  XLNET_RETURN_IF_ERROR(AppendMetrics(line.dump()));
  XLNET_RETURN_IF_ERROR(TensorBoardScalars(line, "train/"));
  PrintProgress(mean_loss, r.lr, r.grad_norm, tokens_per_sec);
  window_ = LogWindow();
  return absl::OkStatus();
}

void Trainer::PrintSummary(const TrainResult& result) const {
  if (!options_.progress || rank() != 0) return;
  const double wall = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - run_start_)
                          .count();
  const char* how = result.interrupted     ? "stopped"
                    : result.early_stopped ? "stopped early"
                                           : "finished";
  std::string text = absl::StrFormat(
      "run %s at step %d: %d steps this run, %s tokens in %s (%s tok/s), "
      "last loss %.4f, %d skipped steps",
      how, step_, step_ - start_step_, WithCommas(run_tokens_),
      wall < 60 ? absl::StrFormat("%.1fs", wall) : FormatDuration(wall),
      WithCommas(static_cast<int64_t>(wall > 0 ? run_tokens_ / wall : 0)),
      result.last_loss, skipped_);
  if (!result.best_dir.empty()) {
    absl::StrAppend(&text, ", best eval_", options_.best_metric, " ",
                    absl::StrFormat("%.4f", result.best_value), " in ",
                    result.best_dir);
  }
  if (!result.last_checkpoint.empty()) {
    absl::StrAppend(&text, "; checkpoint ", result.last_checkpoint);
  }
  XLOG(INFO) << text;
}

absl::StatusOr<TrainResult> Trainer::Run() {
  const TrainConfig& train = options_.train;
  XLNET_RETURN_IF_ERROR(Prepare());
  if (rank() == 0 && train.tensorboard) {
    // A new events file per run or resume; TensorBoard merges RUN/tb/.
    XLNET_ASSIGN_OR_RETURN(
        tb_, TbWriter::Open(RunPath(options_.run_dir, kTensorBoardDir)));
    XLNET_RETURN_IF_ERROR(tb_->Text(step_, "config", options_.config_yaml));
  }
  TrainResult result;
  int64_t last_saved = -1;
  run_start_ = std::chrono::steady_clock::now();
  last_step_end_ = run_start_;
  start_step_ = step_;
  window_ = LogWindow();
  unit_->SetTraining(true);
  if (StopRequestedOnAnyRank()) {
    // Asked to stop while starting up: nothing new to save.
    if (rank() == 0) {
      XLOG(INFO) << "stop requested before the first step; nothing to save";
    }
    result.interrupted = true;
    result.steps = step_;
    result.skipped_steps = skipped_;
    if (options_.resume.empty() || step_ == 0) return result;
    result.last_checkpoint = checkpoints_.StepDir(step_);
    return result;
  }
  if (train.patience > 0 && evals_without_improvement_ >= train.patience) {
    // Resuming a run that stopped early (e.g. a requeued job): nothing more
    // to train with this patience.
    if (rank() == 0) {
      XLOG(INFO) << "the run stopped early at step " << step_ << " ("
                 << evals_without_improvement_
                 << " evaluations without improvement, train.patience="
                 << train.patience << "); raise train.patience to go on";
    }
    result.early_stopped = true;
    last_saved = step_;
    evaluated_step_ = step_;
  }
  // With train.step_reads deferred, the step queued one iteration earlier
  // whose numbers are read in this one.
  std::unique_ptr<PendingRead> late;
  bool ended = false;
  while (!ended && !result.early_stopped && step_ < train.max_steps) {
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<PendingRead> queued, EnqueueStep());
    std::vector<StepRecord> records;
    if (late) {
      XLNET_ASSIGN_OR_RETURN(StepRecord r,
                             ReadStep(std::move(late), /*at_once=*/false));
      records.push_back(std::move(r));
    }
    // A skipped or stopping step is acted on at the step just queued, once
    // its numbers are in too (the stop flag stays set, so that step stops).
    const bool act =
        !records.empty() && (!records[0].finite || records[0].stop);
    if (act || ReadsAtOnce(step_)) {
      XLNET_ASSIGN_OR_RETURN(StepRecord r,
                             ReadStep(std::move(queued), /*at_once=*/true));
      records.push_back(std::move(r));
    } else {
      late = std::move(queued);
    }
    for (const StepRecord& r : records) {
      XLNET_ASSIGN_OR_RETURN(ended, AfterStep(r, &result, &last_saved));
    }
  }
  XLNET_RETURN_IF_ERROR(Finish(last_saved, &result));
  PrintSummary(result);
  return result;
}

absl::StatusOr<bool> Trainer::AfterStep(const StepRecord& r,
                                        TrainResult* result,
                                        int64_t* last_saved) {
  const TrainConfig& train = options_.train;
  result->last_loss = r.loss;
  if (options_.on_step) {
    options_.on_step(
        {r.step, r.seconds, r.tokens, r.loss, !r.finite, r.read_seconds});
  }
  XLNET_RETURN_IF_ERROR(Log(r));
  XLNET_RETURN_IF_ERROR(GuardAfterStep(r));
  // Evaluations, stops and saves happen at the step just queued (a step
  // read late is never one that evaluates or saves: ReadsAtOnce).
  if (r.step != step_) return false;
  if (train.eval_steps > 0 && step_ % train.eval_steps == 0) {
    XLNET_RETURN_IF_ERROR(EvaluateAndKeepBest());
    // Every rank evaluates the same numbers (TrainUnit::Evaluate), so
    // every rank takes this branch at the same step.
    if (train.patience > 0 && evals_without_improvement_ >= train.patience &&
        step_ < train.max_steps) {
      if (rank() == 0) {
        XLOG(INFO) << "early stopping at step " << step_ << ": "
                   << options_.best_metric << " has not improved by more than "
                   << train.patience_min_delta << " in "
                   << evals_without_improvement_
                   << " evaluations (train.patience=" << train.patience << ")";
      }
      result->early_stopped = true;
      if (options_.save_checkpoints) XLNET_RETURN_IF_ERROR(Save(step_));
      *last_saved = step_;
      return true;
    }
  }
  if (r.stop) {
    XLOG(INFO) << "stop requested: saving at step " << step_;
    if (options_.save_checkpoints) XLNET_RETURN_IF_ERROR(Save(step_));
    *last_saved = step_;
    result->interrupted = true;
    return true;
  }
  if (options_.save_checkpoints && train.save_steps > 0 &&
      step_ % train.save_steps == 0) {
    // The run's last save is written before it ends (Finish).
    XLNET_RETURN_IF_ERROR(
        Save(step_, train.background_save && step_ < train.max_steps));
    *last_saved = step_;
  }
  return false;
}

absl::Status Trainer::GuardAfterStep(const StepRecord& r) {
  const TrainConfig& train = options_.train;
  // The weights are checked every log_steps (a cadence, not every step: on
  // a GPU each check is a host sync, and the finiteness pass reads every
  // weight), after every skipped step (non-finite weights make every later
  // loss non-finite, so skipping cannot help; such steps are rare) and, in
  // Save and Finish, before every save and at the end. Non-finite weights
  // seen late are still never saved: Save checks first.
  if (!r.finite || r.step % train.log_steps == 0) {
    XLNET_RETURN_IF_ERROR(CheckWeights());
  }
  if (bad_in_a_row_ < train.max_bad_steps) return absl::OkStatus();
  // The weights are those of the last applied step (finite: Save checks),
  // and the saved count stops a restart at its first bad step.
  std::string saved;
  if (options_.save_checkpoints) {
    XLNET_RETURN_IF_ERROR(Save(step_));
    saved = absl::StrCat(" and saved ", checkpoints_.StepDir(step_));
  }
  return absl::InternalError(absl::StrCat(
      bad_in_a_row_, " non-finite steps in a row (train.max_bad_steps=",
      train.max_bad_steps, "); stopped at step ", step_, saved,
      ". The run's first non-finite step was ", first_bad_step_, ". ",
      RecoveryAdvice(first_bad_step_)));
}

absl::Status Trainer::Finish(int64_t last_saved, TrainResult* result) {
  // A save still in the background is committed first.
  XLNET_RETURN_IF_ERROR(FinishSave());
  XLNET_RETURN_IF_ERROR(CheckWeights());
  if (!options_.best_metric.empty() && evaluated_step_ != step_ &&
      !result->interrupted) {
    XLNET_RETURN_IF_ERROR(EvaluateAndKeepBest());
  }
  if (options_.save_checkpoints && last_saved != step_) {
    XLNET_RETURN_IF_ERROR(Save(step_));
  }
  if (best_value_) {
    result->best_dir = RunPath(options_.run_dir, kBestDir);
    result->best_value = *best_value_;
  }
  result->steps = step_;
  result->skipped_steps = skipped_;
  if (options_.save_checkpoints) {
    result->last_checkpoint = checkpoints_.StepDir(step_);
  }
  if (result->interrupted || bad_in_a_row_ == 0) return absl::OkStatus();
  // Ended on skipped steps: whether the run had recovered is unknown, so
  // it did not succeed (a restart resumes here and ends the same way).
  return absl::InternalError(absl::StrCat(
      "the run ended at step ", step_, " with its last ", bad_in_a_row_,
      " step(s) non-finite and skipped (train.max_bad_steps=",
      options_.train.max_bad_steps, " not reached)",
      options_.save_checkpoints
          ? absl::StrCat("; saved ", checkpoints_.StepDir(step_),
                         " with the weights of the last finite step")
          : "",
      ". The run's first non-finite step was ", first_bad_step_, ". ",
      RecoveryAdvice(first_bad_step_)));
}

}  // namespace xlnet
