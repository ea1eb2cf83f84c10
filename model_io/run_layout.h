// The run directory's layout: the name of every entry that xlnet-pretrain
// and xlnet-finetune write into RUN/ (their --out), and the one reader of
// RUN/metrics.jsonl. Writers (train/, finetune/) and readers (export, the
// run directory checks) spell a name only through these constants, so the
// on-disk contract is written down once.
//
//   RUN/config.yaml        the resolved config of the steps since the last
//                          resume (every checkpoint and RUN/best/ hold
//                          their own)
//   RUN/config_changes.jsonl  the settings changed at each resume
//   RUN/metrics.jsonl      one JSON object per logged step or evaluation
//   RUN/checkpoints/       step_N/ model directories (CheckpointManager),
//                          each with trainer_state.json
//   RUN/best/              the best evaluation's model directory + best.json
//   RUN/eval_results.json  fine-tuning's final scores
//   RUN/predictions_*      fine-tuning's predictions per evaluation set
//   RUN/tb/                TensorBoard event files
//   RUN/run.lock           the lock of the process that owns RUN
//   RUN/run.json           {"kind": "pretraining" | "fine-tuning"}
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xlnet {

// The resolved config as YAML. Written by Trainer::Prepare (RUN/: the
// settings of the steps since the last resume, train/resume_settings.h),
// into every checkpoint and into RUN/best/ (what that model was trained
// with); read by export (the tokenizer's
// casing, the model card) and by fine-tuning from a model directory that
// has one (the text rules the model was pretrained with).
inline constexpr char kRunConfigFile[] = "config.yaml";

// A JSON object per setting changed at a resume: {"step", "key", "old",
// "new", "kind", "resumed_from", "forced"} (train/resume_settings.h).
// Written by the trainer on rank 0 before the first step (the records from
// the resumed step on are replaced); read by people and scripts.
inline constexpr char kConfigChangesFile[] = "config_changes.jsonl";

// A JSON object per line: training steps and evaluations ("eval_*" keys).
// Appended by Trainer::Log on rank 0; read (ReadMetricsLines) by the
// trainer on resume (to drop steps the resumed run repeats) and by export
// (the model card's last evaluation); xlnet-plot draws it.
inline constexpr char kMetricsFile[] = "metrics.jsonl";

// The checkpoints, RUN/checkpoints/step_N/. Written and listed by
// CheckpointManager; named by the run directory checks.
inline constexpr char kCheckpointsDir[] = "checkpoints";

// The step, loss scale, early-stopping count and non-finite step counts
// (bad_in_a_row, bad_steps, first_bad_step: the divergence guard's) of a
// checkpoint, in each RUN/checkpoints/step_N/ (not in RUN/ itself).
// Written by Trainer::Save; read on resume and by export (the steps
// trained).
inline constexpr char kTrainerStateFile[] = "trainer_state.json";

// RUN/best/: the model directory of the best evaluation so far, with
// kBestStateFile in it. Written by Trainer::SaveBest when a best metric is
// set (fine-tuning with a dev set); loaded by fine-tuning for the final
// scores, read by export.
inline constexpr char kBestDir[] = "best";

// RUN/best/best.json: the step, metric and value of RUN/best and that
// evaluation's numbers. Written by Trainer::SaveBest; read by a resumed run
// (the value to beat) and by export (the model card).
inline constexpr char kBestStateFile[] = "best.json";

// Fine-tuning's final dev and test scores (and best_dir). Written by
// RunFinetuning and the bag-of-words baseline; read by people and scripts.
inline constexpr char kEvalResultsFile[] = "eval_results.json";

// A prefix: RUN/predictions_<set>.tsv, or RUN/predictions_<set>/ for SQuAD.
// Written by RunFinetuning; read by people and scripts.
inline constexpr char kPredictionsPrefix[] = "predictions_";

// RUN/tb/: TensorBoard event files, a new one per run or resume. Written by
// the trainer (train.tensorboard); read by TensorBoard.
inline constexpr char kTensorBoardDir[] = "tb";

// The flock rank 0 holds for the run's life (pid, host, start, command in
// it). Written and read by RunDirectory.
inline constexpr char kRunLockFile[] = "run.lock";

// {"kind": "pretraining" | "fine-tuning"}. Written and read by
// RunDirectory, so that a run of one kind is never continued or replaced by
// a command of the other.
inline constexpr char kRunInfoFile[] = "run.json";

// RUN/.launch-ID: written by rank 0 of a multi-rank launch under a fresh
// ID, which every rank looks up to prove it writes into the same directory
// (RunDirectory). Removed by the next launch.
inline constexpr char kLaunchFilePrefix[] = ".launch-";

// RUN/NAME: `name` (one of the constants above) in the run directory.
std::string RunPath(absl::string_view run_dir, absl::string_view name);

// The entries a run writes into RUN/ (what --overwrite removes and what
// makes a directory "hold a run"), kPredictionsPrefix aside (a prefix).
// run.lock and run.json are not among them: they say who may write, not
// that a run has written.
const std::vector<std::string>& RunEntries();

// How much of metrics.jsonl ReadMetricsLines reads; it never reads more
// than its max_bytes.
enum class MetricsWindow {
  // The whole file; a longer one is an error (InvalidArgument "PATH: larger
  // than the limit of N bytes", as ReadFile says).
  kWhole,
  // The last max_bytes, from the first whole line in them (all of a file
  // no longer than that).
  kTail,
};

// Called with a line of metrics.jsonl as written (without its newline) and
// its parse, a JSON object.
using MetricsLineVisitor =
    std::function<void(const std::string& line, const nlohmann::json& record)>;

// Reads the metrics.jsonl at `path` (at most `max_bytes` of it, see
// MetricsWindow) and calls `visit` on each line that is a JSON object, in
// file order. Empty lines and lines that are not a JSON object (strictly,
// ParseJson: a torn last line from a crash, a duplicate key) are skipped;
// what a record must hold beyond that is the caller's to check. Errors are
// the file's: NotFound when it cannot be opened, InvalidArgument when it is
// not a regular file or (kWhole) too large, DataLoss when reading fails.
absl::Status ReadMetricsLines(const std::string& path, uint64_t max_bytes,
                              MetricsWindow window,
                              const MetricsLineVisitor& visit);

}  // namespace xlnet
