// The one training loop, shared by pretraining and fine-tuning. A task
// supplies a TrainUnit ("batch -> loss"); the Trainer owns everything else:
// accumulation, gradient averaging over ranks, clipping, the schedule, AdamW,
// the divergence guard (non-finite steps skipped, non-finite weights never
// saved, the last good checkpoint kept), logging, evaluation, checkpoints
// and signals.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "config/config.h"
#include "model_io/checkpoint_manager.h"
#include "train/distributed.h"
#include "train/optimizer.h"
#include "train/tb_writer.h"

namespace xlnet {

// A number a unit reports for one micro-batch: a host number, or a 0-dim
// tensor (e.g. a count over the batch, on the GPU). The trainer adds a
// step's values up on the loss's device and reads them all, with the
// gradient norm, in one transfer per optimizer step, so a unit that
// reports tensors adds no host sync of its own.
class StepValue {
 public:
  StepValue(double value = 0) : value_(value) {}  // NOLINT: implicit
  StepValue(torch::Tensor value)                  // NOLINT: implicit
      : tensor_(std::move(value)) {}
  // The value as a 0-dim fp64 tensor on `device` (no host sync).
  torch::Tensor ToTensor(const torch::Device& device) const;
  // The value on the host (a sync when it is a tensor on a GPU).
  double Value() const;

 private:
  double value_ = 0;
  // When defined, the value (any numeric dtype, one element).
  torch::Tensor tensor_;
};

// What one micro-batch produced.
// The objective of one optimizer step is sum(loss) / sum(normalizer) over
// all its micro-batches on all ranks: a unit returns the loss *summed* over
// its examples (or targets) and their count, and the trainer scales the
// gradients by the global count after the all-reduce. So ranks or
// micro-batches with different numbers of targets weigh each target equally,
// and k micro-batches (or W ranks) equal one k (W) times larger batch.
struct StepOutput {
  // Scalar loss summed over this micro-batch's examples/targets.
  torch::Tensor loss;
  // How many examples/targets `loss` sums over.
  StepValue normalizer = 1.0;
  // Tokens this micro-batch processed (for tokens/s).
  StepValue tokens = 0.0;
  // Extra numbers to log (e.g. "accuracy"), averaged over micro-batches.
  std::map<std::string, StepValue> metrics;
};

// What a rank trains on; ranks compare it before the first step.
struct TrainingData {
  // The same on every rank that reads the same data (e.g. the batch
  // source's fingerprint); empty: nothing to compare.
  std::string key;
  // Where the data comes from, for errors ("--data DIR, fingerprint F").
  std::string description;
};

class TrainUnit {
 public:
  virtual ~TrainUnit() = default;
  // Trainable parameters under their HuggingFace names.
  virtual NamedTensors Parameters() = 0;
  // All tensors saved as model.safetensors (parameters and buffers): the
  // model's own tensors on its device, not copies, since resuming and the
  // rank-0 broadcast write into them.
  virtual NamedTensors StateDict() = 0;
  // config.json's text: ModelConfigToJson of the model's config, plus any
  // HF keys XLNetConfig lacks (e.g. problem_type).
  virtual std::string ModelConfigJson() = 0;
  // Sets train/eval mode.
  virtual void SetTraining(bool training) = 0;
  // Fetches this rank's next micro-batch and computes its loss.
  virtual StepOutput TrainStep() = 0;
  // Held-out evaluation; keys are logged with an "eval_" prefix.
  virtual std::map<std::string, double> Evaluate() { return {}; }
  // Extra numbers for the training metrics line (metrics.jsonl and
  // TensorBoard) logged after `steps_done` optimizer steps, e.g. cumulative
  // tokens per data source. Called on every rank; rank 0's are written.
  virtual std::map<std::string, double> LogValues(int64_t steps_done) {
    return {};
  }
  // This rank's training data; the trainer stops every rank when one
  // differs from rank 0's.
  virtual TrainingData Data() { return {}; }
  // Optimizer steps in one pass over the training data (fractional where a
  // pass does not fill whole steps), for train.num_epochs and the metrics'
  // "epoch"; nullopt when the data has no single epoch (a blend of sources,
  // no training data).
  virtual std::optional<double> StepsPerEpoch() { return std::nullopt; }
  // Unit state beyond the weights (data position, memory, ...): tensors
  // added to `files` (file name -> tensors) for this rank; LoadUnitState gets
  // the checkpoint directory back.
  virtual absl::Status SaveUnitState(
      int rank, std::map<std::string, NamedTensors>* files) {
    return absl::OkStatus();
  }
  virtual absl::Status LoadUnitState(const std::string& dir, int rank) {
    return absl::OkStatus();
  }
};

// The ETA of a run from its recent steps: the mean wall time of the last
// `capacity` steps, so one slow step (an evaluation, a checkpoint, a stall)
// weighs on the ETA only while it is in the window, instead of for the rest
// of the run as a since-start average would.
class StepTimeWindow {
 public:
  explicit StepTimeWindow(size_t capacity = 50) : capacity_(capacity) {}
  // Adds one step's wall time, dropping the oldest beyond the capacity.
  void Add(double seconds);
  // Seconds `remaining` more steps take at the window's mean (0 while the
  // window is empty).
  double Eta(int64_t remaining) const;

 private:
  // Steps kept.
  size_t capacity_;
  // The last steps' wall times, oldest first.
  std::deque<double> seconds_;
  // The sum of seconds_.
  double sum_ = 0;
};

// What on_step reports about one optimizer step, once its numbers are read
// (with train.step_reads deferred, usually after the next step is queued).
struct StepTiming {
  int64_t step = 0;      // 1-based step
  double seconds = 0;    // wall time of the whole step on this rank: data,
                         // forward, backward, all-reduce, clip, optimizer,
                         // and the wait for its numbers (read_seconds)
  int64_t tokens = 0;    // tokens of the step on all ranks
  double loss = 0;       // global loss of the step
  bool skipped = false;  // non-finite, not applied
  // Wall time the host waited for the step's numbers (the device finishing
  // the queued forward, backward and clipping): near 0 when the device was
  // idle waiting for the host, i.e. a host-bound step.
  double read_seconds = 0;
};

struct TrainerOptions {
  TrainConfig train;
  // The resolved config, written to RUN/config.yaml and every checkpoint.
  std::string config_yaml;
  // The run directory (metrics.jsonl, checkpoints/).
  std::string run_dir;
  // Resume from: "" (fresh), "latest" (the newest checkpoint in run_dir
  // that verifies; fresh when there is no checkpoint at all, an error when
  // there are some but none verifies) or a checkpoint directory.
  std::string resume;
  // At a resume, config_yaml is compared key by key with the checkpoint's
  // config.yaml: every change is logged ("resume: train.lr 0.0003 ->
  // 0.001") and recorded in RUN/config_changes.jsonl, and a change that
  // breaks exactness (model, data, seed; config/resume_changes.h) is an
  // error unless this is set (--allow_changed_settings), when it is a
  // warning (train/resume_settings.h).
  bool allow_changed_settings = false;
  // Print a progress line every log_steps (rank 0). Logged loss is the mean
  // over the steps since the previous line.
  bool progress = true;
  // Files copied verbatim into every checkpoint and into RUN/best/ (file
  // name -> bytes), e.g. the tokenizer's spiece.model.
  std::map<std::string, std::string> extra_files;
  // When set, a key of TrainUnit::Evaluate() (without the "eval_" prefix):
  // the model of the best evaluation so far is kept as RUN/best/ (a model
  // directory plus best.json), and the run also evaluates after its last
  // step. Higher is better unless best_lower_is_better. Needed by
  // train.patience (early stopping watches this metric).
  std::string best_metric;
  bool best_lower_is_better = false;
  // Dynamic loss scaling (LossScaler). Always on for train.dtype fp16 (with
  // these options if set, else the defaults); setting it enables it for
  // other dtypes too (tests run it in fp32 on the CPU). The scale is saved
  // in trainer_state.json and restored on resume.
  std::optional<LossScalerOptions> loss_scaling;
  // false: never write checkpoints (benchmarks); a stop request still ends
  // the run after the current step.
  bool save_checkpoints = true;
  // Called on every rank after each optimizer step (benchmarks).
  std::function<void(const StepTiming&)> on_step;
  // When set, called on rank 0 before each write of a checkpoint or of
  // RUN/best/: an error (RUN/run.lock removed or replaced, so another
  // process may own RUN now; RunDirectory::CheckLock) stops the run with
  // nothing written.
  std::function<absl::Status()> check_run_lock;
};

struct TrainResult {
  int64_t steps = 0;          // optimizer steps completed (total)
  int64_t skipped_steps = 0;  // non-finite steps skipped (all of the run's)
  bool interrupted = false;   // stopped by SIGTERM/SIGINT
  double last_loss = 0;
  std::string last_checkpoint;
  // RUN/best/ when best_metric is set and an evaluation ran, else "".
  std::string best_dir;
  // The best value of best_metric (when best_dir is set).
  double best_value = 0;
  // Stopped by train.patience: that many evaluations in a row without the
  // best metric improving.
  bool early_stopped = false;
};

// Installs SIGTERM/SIGINT handlers that ask running trainers to stop after
// the current step (saving a checkpoint), or before the first step when the
// signal comes while starting up. Idempotent; tools install them first
// thing, before reading configs or starting LibTorch's work.
void InstallStopSignalHandlers();
// Requests a stop as a signal would (tests, embedding applications).
void RequestStop();
void ClearStopRequest();
// Whether a stop was requested in this process.
bool StopRequested();

class Trainer {
 public:
  // `group` may be null (one process). The unit must outlive the trainer.
  Trainer(TrainerOptions options, TrainUnit* unit, ProcessGroup* group);
  ~Trainer();

  // Runs until train.max_steps or a stop request; saves at save_steps, at
  // the end and on stop. Errors (I/O, collectives, too many non-finite
  // steps) come back as a status; a checkpoint is written first when possible.
  //
  // The divergence guard: a step whose loss or gradient norm is not finite
  // is skipped; train.max_bad_steps of them in a row (counted across
  // restarts: the count is in trainer_state.json) stop the run with an
  // error. A non-finite learning rate stops it before the update. Weights
  // made non-finite by an update stop it with an error and are never saved
  // (checked before every save, at the end, after every skipped step and
  // every train.log_steps). Pruning keeps the newest checkpoint from before
  // the run's first non-finite step. A run that reaches its end with
  // finite weights succeeds even when it skipped steps, unless its last
  // step was skipped as non-finite: that is an error naming the last good
  // checkpoint (the checkpoint of the end is still written).
  absl::StatusOr<TrainResult> Run();

  // How many times the trainer read a step's numbers (loss, normalizer,
  // tokens, metrics, gradient norm and the stop flag together, once per
  // step) right after queueing that step, so that the device had to finish
  // it first: every step with train.step_reads each_step; with deferred
  // only the steps of ReadsAtOnce and the step after one whose late read
  // found it skipped or stopping. The weight checks, evaluations and saves
  // read on their own cadence and are not counted.
  int64_t step_host_reads() const { return step_host_reads_; }
  // The steps whose numbers were read a step late (deferred): after the
  // next step was queued, so the device had work while the host waited.
  int64_t deferred_step_reads() const { return deferred_step_reads_; }

  // The bytes this rank read to verify the checkpoint it resumed from (its
  // share: VerifyCheckpoint); 0 when it resumed none.
  int64_t resume_verified_bytes() const { return resume_verified_bytes_; }

 private:
  // What one optimizer step did, summed over ranks.
  struct StepRecord {
    int64_t step = 0;       // 1-based
    double loss = 0;        // loss_sum / normalizer
    double loss_sum = 0;    // summed unit losses
    double normalizer = 0;  // summed normalizers
    int64_t tokens = 0;
    double grad_norm = 0;  // before clipping
    double lr = 0;
    bool finite = true;  // false: the step was skipped
    bool stop = false;   // some rank was asked to stop
    // This rank's wall time: queueing the step, and waiting for its numbers
    // in the host read (read_seconds).
    double seconds = 0;
    double read_seconds = 0;
    // The unit's extra numbers, averaged over micro-batches (this rank).
    std::map<std::string, double> metrics;
  };
  // Sums since the last log line.
  struct LogWindow {
    double tokens = 0;
    double seconds = 0;
    double loss_sum = 0;
    double normalizer = 0;
  };

  // Before the first step: the checkpoint to resume and its settings
  // compared with the run's (CompareResumedSettings), RUN/config.yaml and
  // RUN/config_changes.jsonl, the same config on every rank, rank 0's
  // weights everywhere, the best value so far, resuming.
  absl::Status Prepare();
  // A step's numbers between EnqueueStep and ReadStep (trainer.cc).
  struct PendingRead;
  // Every micro-batch's forward and backward, the gradient all-reduce,
  // clipping and the optimizer (skipped on the device when the loss or the
  // gradient norm is not finite); step_ advances. Returns the step's
  // numbers on their way to the host, read by ReadStep.
  absl::StatusOr<std::unique_ptr<PendingRead>> EnqueueStep();
  // Whether step `step`'s numbers are read as soon as it is queued: always
  // with train.step_reads each_step or loss scaling (the next step's scale
  // depends on them); with deferred on the run's first step, log,
  // evaluation and save steps and the last step.
  bool ReadsAtOnce(int64_t step) const;
  // Waits for a step's numbers and books them: skipped and bad steps, the
  // loss scale, the optimizer's count, the background save's progress.
  // `at_once`: read right after the step was queued (counted in
  // step_host_reads) rather than a step late.
  absl::StatusOr<StepRecord> ReadStep(std::unique_ptr<PendingRead> pending,
                                      bool at_once);
  // What follows a step once its numbers are read: on_step, the log, the
  // divergence guard, and at the step just queued the evaluation, a stop
  // and the save. True when the run ends there (a stop, early stopping).
  absl::StatusOr<bool> AfterStep(const StepRecord& record, TrainResult* result,
                                 int64_t* last_saved);
  // Adds the step to the window; every train.log_steps writes a
  // metrics.jsonl line and a progress line (and the run's first step a
  // progress line only, so a slow run shows life before log_steps).
  absl::Status Log(const StepRecord& record);
  // Rank 0 with options_.progress: the progress line of step_.
  void PrintProgress(double loss, double lr, double grad_norm,
                     double tokens_per_sec) const;
  // Rank 0 with options_.progress: the end-of-run summary of a run that
  // ended without an error (steps, tokens, wall time, tokens/s, best
  // evaluation, skipped steps, checkpoint).
  void PrintSummary(const TrainResult& result) const;
  // Loads checkpoint `dir`, which VerifyCheckpoint accepted.
  absl::Status Restore(const std::string& dir);
  // Whether checkpoint `dir` verifies, all ranks together: each verifies
  // its share (rank 0 the listing, by stat, and the shared files; every
  // rank the per-rank files it loads), and one all-reduce combines the
  // verdicts, so every rank gets the same answer and the same problem
  // (naming the rank for a per-rank failure). One process verifies the
  // whole directory. Sets resume_verified_bytes_.
  absl::Status VerifyCheckpoint(const std::string& dir);
  // The ranks (ascending) on which `failed` is true: one all-reduce, which
  // also stands for a barrier. Errors (a rank gone) name `what`.
  absl::StatusOr<std::vector<int>> FailedRanks(bool failed,
                                               const std::string& what);
  // Whether the weights (TrainUnit::StateDict) are finite on every rank (a
  // collective).
  absl::StatusOr<bool> WeightsFiniteOnAllRanks();
  // An error when the weights are not finite; remembers the step at which
  // they were (so a second check at the same step costs nothing). A
  // collective: every rank calls it at the same steps.
  absl::Status CheckWeights();
  // After each optimizer step: CheckWeights on its cadence, and the stop at
  // train.max_bad_steps non-finite steps in a row.
  absl::Status GuardAfterStep(const StepRecord& record);
  // What to do after a divergence: the last good checkpoint (the newest
  // from before step `before` and before the run's first non-finite step)
  // to resume from, and what to change.
  std::string RecoveryAdvice(int64_t before) const;
  // After the loop: the final evaluation and save, `result`'s fields, and
  // an error when the run ended on non-finite steps.
  absl::Status Finish(int64_t last_saved, TrainResult* result);
  // --resume latest: the step of the newest checkpoint that verifies, -1
  // when there is none; an error when checkpoints exist but none verifies.
  // Rank 0 chooses; every rank gets its choice.
  absl::StatusOr<int64_t> LatestValidStep();
  // Whether a stop was requested on some rank (a collective).
  bool StopRequestedOnAnyRank();
  // Runs TrainUnit::Evaluate, logs it, updates RUN/best/ and the early
  // stopping count.
  absl::Status EvaluateAndKeepBest();
  absl::Status SaveBest(const std::map<std::string, double>& eval);
  // What a save of this rank writes, by file: the unit's state and this
  // rank's RNG; on rank 0 also the weights and the optimizer's state (the
  // live tensors, not copies). `what` names the action in errors.
  absl::Status SaveFiles(const std::string& what,
                         std::map<std::string, NamedTensors>* files);
  // With background saves: reserves their page-locked host buffer
  // (StateSnapshot::ReserveHostBuffer) and logs its size and time.
  absl::Status ReserveSaveBuffer();
  // Saves checkpoint step_<step>: StartSave, then (unless `background`)
  // FinishSave. Collectives: every rank calls it at the same step.
  absl::Status Save(int64_t step, bool background = false);
  // Finishes any earlier save (FinishSave), checks the weights, and starts
  // this one: every rank stages its per-rank files (on a BackgroundJob's
  // thread from a StateSnapshot when `background`, else now from the live
  // tensors); rank 0 commits once every rank has staged (AdvanceSave).
  absl::Status StartSave(int64_t step, bool background);
  // This rank's part of the pending save's progress for the step
  // all-reduce: {1, 0} when its job of the current phase finished well,
  // {0, 1} when it failed, {0, 0} otherwise (or without a pending save).
  std::array<double, 2> SaveProgress() const;
  // Moves the pending save on by the all-reduced progress (`done` and
  // `failed` ranks), the same on every rank: all staged -> rank 0 starts
  // the commit; committed -> the save ends (rank 0 logs it); a failure ->
  // an error naming the ranks, nothing committed.
  absl::Status AdvanceSave(double done, double failed);
  // Blocks until the pending save (if any) is committed or has failed: each
  // rank waits for its job, then one all-reduce per phase.
  absl::Status FinishSave();
  // options_.check_run_lock, its error ending in "; not saving WHAT".
  absl::Status CheckRunLock(const std::string& what) const;
  absl::Status AppendMetrics(const std::string& json_line);
  // Rank 0 with train.tensorboard: every number of `line` but "step" as a
  // scalar named prefix + key at the current step.
  absl::Status TensorBoardScalars(const nlohmann::json& line,
                                  const std::string& prefix);
  absl::Status TruncateMetricsAfter(int64_t step);
  // Rank 0, resuming `restored` at `step`: checkpoints newer than `step`
  // belong to a timeline this run leaves (a resume by hand from an older
  // checkpoint, or past newer ones that do not verify); they move, kept,
  // to checkpoints/abandoned/ (CheckpointManager::SetAsideNewerThan) with a
  // copy of metrics.jsonl as it was, and a warning names where.
  absl::Status SetAsideNewerCheckpoints(const std::string& restored,
                                        int64_t step);
  int rank() const;
  int world_size() const;

  TrainerOptions options_;
  TrainUnit* unit_;
  ProcessGroup* group_;
  NamedTensors params_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<GradientReducer> reducer_;
  CheckpointManager checkpoints_;
  // RUN/tb/'s events file of this run (rank 0, train.tensorboard).
  std::unique_ptr<TbWriter> tb_;
  std::optional<LossScaler> scaler_;
  int64_t step_ = 0;
  int64_t skipped_ = 0;
  int64_t evaluated_step_ = -1;
  std::optional<double> best_value_;
  // Evaluations in a row since best_metric last improved by more than
  // train.patience_min_delta (saved in trainer_state.json).
  int64_t evals_without_improvement_ = 0;
  // Non-finite steps in a row that count towards train.max_bad_steps (not
  // loss-scale calibration); saved, so a restart continues the count.
  int64_t bad_in_a_row_ = 0;
  // All such steps of the run, and the first of them (1-based; 0: none
  // yet). Saved; pruning keeps the newest checkpoint before first_bad_step_.
  int64_t bad_steps_ = 0;
  int64_t first_bad_step_ = 0;
  // The step after which the weights were last found finite (-1: not yet).
  int64_t weights_finite_at_ = -1;
  int64_t start_step_ = 0;
  std::chrono::steady_clock::time_point run_start_;
  LogWindow window_;
  // Wall times of the recent steps (for the ETA), each from the end of the
  // previous step (or the run's start) to the end of this one's logging.
  StepTimeWindow step_times_;
  std::chrono::steady_clock::time_point last_step_end_;
  // Tokens of this run's steps, all ranks (for the summary).
  int64_t run_tokens_ = 0;
  // See step_host_reads() and deferred_step_reads().
  int64_t step_host_reads_ = 0;
  int64_t deferred_step_reads_ = 0;
  // Changes whenever a save starts or moves from staging to committing:
  // a step's save progress counts only in the phase it was taken in.
  int64_t save_serial_ = 0;
  // See resume_verified_bytes().
  int64_t resume_verified_bytes_ = 0;
  // The save being written (StartSave to the step its commit ends). Last,
  // so that it is destroyed first: its thread uses the members above.
  struct PendingSave;
  std::unique_ptr<PendingSave> pending_save_;
};

}  // namespace xlnet
