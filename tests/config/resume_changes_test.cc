#include "config/resume_changes.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace xlnet {
namespace {

// Every key of every section has a decision in the one table, so a key
// added later cannot fall through unclassified.
TEST(ResumeChangesTest, EveryKeyIsClassified) {
  int keys = 0;
  for (const std::string& section : AllConfigSections()) {
    for (const std::string& key : ConfigKeys(section)) {
      const std::string path = absl::StrCat(section, ".", key);
      EXPECT_TRUE(ResumeChangeOf(path).has_value()) << path;
      ++keys;
    }
  }
  EXPECT_GT(keys, 80);
  EXPECT_FALSE(ResumeChangeOf("train.no_such_key").has_value());
}

TEST(ResumeChangesTest, ClassesOfTheKeysThatDecideARun) {
  for (const char* key :
       {"model.d_model", "model.dropout", "model.id2label", "train.seed",
        "train.batch_size", "data.seq_len", "data.sources",
        "data.eval_fraction", "data.tokenizer", "finetune.max_seq_length",
        "finetune.label_column"}) {
    EXPECT_EQ(ResumeChangeOf(key), ResumeChange::kBreaksExactness) << key;
  }
  for (const char* key : {"train.lr", "train.warmup_steps", "train.decay",
                          "train.max_steps", "train.clip", "train.dtype",
                          "train.device", "train.grad_accum_steps"}) {
    EXPECT_EQ(ResumeChangeOf(key), ResumeChange::kTraining) << key;
  }
  for (const char* key :
       {"train.log_steps", "train.save_steps", "train.eval_steps",
        "train.eval_batches", "train.keep_checkpoints", "train.tensorboard",
        "data.loader_threads", "data.prefetch_batches",
        "finetune.eval_batch_size", "finetune.n_best_size"}) {
    EXPECT_EQ(ResumeChangeOf(key), ResumeChange::kBookkeeping) << key;
  }
}

TEST(ResumeChangesTest, EqualConfigsHaveNoChanges) {
  Config a;
  a.data.sources = {{"corpus/wiki", 0.75, "wiki"}};
  const Config b = a;
  EXPECT_TRUE(ChangedSettings(a, b).empty());
}

TEST(ResumeChangesTest, ChangedKeysInConfigOrderWithTheirTexts) {
  Config before, after;
  before.train.lr = 3e-4;
  after.train.lr = 1e-3;
  after.model.dropout = 0.2;
  after.train.log_steps = 5;
  after.model.ff_activation = "relu";
  after.data.sources = {{"a", 2, "a"}};
  after.finetune.null_score_threshold = -1.5;
  const std::vector<SettingChange> changes = ChangedSettings(before, after);
  std::vector<std::string> lines;
  for (const SettingChange& c : changes) lines.push_back(DescribeChange(c));
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "model.ff_activation \"gelu\" -> \"relu\"",
                       "model.dropout 0.1 -> 0.2",
                       "data.sources [] -> [{path: \"a\", weight: 2.0, name: "
                       "\"a\"}]",
                       "train.lr 0.0003 -> 0.001",
                       "train.log_steps 10 -> 5",
                       "finetune.null_score_threshold null -> -1.5",
                   }));
  ASSERT_EQ(changes.size(), 6u);
  EXPECT_EQ(changes[0].kind, ResumeChange::kBreaksExactness);
  EXPECT_EQ(changes[3].kind, ResumeChange::kTraining);
  EXPECT_EQ(changes[4].kind, ResumeChange::kBookkeeping);
  EXPECT_EQ(changes[5].kind, ResumeChange::kBookkeeping);
}

// The texts are config.yaml's, so two values compare equal exactly when
// they are: a double that prints the same at 6 digits but differs is a
// change.
TEST(ResumeChangesTest, DoublesDifferingBeyondSixDigitsAreChanges) {
  Config before, after;
  before.train.lr = 1e-4;
  after.train.lr = 1.0000001e-4;
  const std::vector<SettingChange> changes = ChangedSettings(before, after);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].old_value, changes[0].new_value);
}

}  // namespace
}  // namespace xlnet
