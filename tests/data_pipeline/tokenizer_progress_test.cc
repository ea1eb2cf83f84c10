#include "data_pipeline/tokenizer_progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace xlnet::data {
namespace {

// SentencePiece 0.1.97's log of a 1,000-piece unigram model trained on 3
// copies of the bundled sample, as captured through the bridge, shortened:
// the settings dump keeps 4 of its lines, the meta pieces 2, the EM steps 3
// of their 9 rounds.
const std::vector<std::string>& CapturedLog() {
  static const auto* log = new std::vector<std::string>{
      "sentencepiece_trainer.cc(77) LOG(INFO) Starts training with : ",
      "trainer_spec {",
      "  model_type: UNIGRAM",
      "}",
      "denormalizer_spec {}",
      "trainer_interface.cc(406) LOG(INFO) Loaded all 8475 sentences",
      "trainer_interface.cc(422) LOG(INFO) Adding meta_piece: <unk>",
      "trainer_interface.cc(422) LOG(INFO) Adding meta_piece: \xE2\x82\xAC",
      "trainer_interface.cc(427) LOG(INFO) Normalizing sentences...",
      "trainer_interface.cc(536) LOG(INFO) all chars count=886965",
      "trainer_interface.cc(547) LOG(INFO) Done: 99.998% characters are "
      "covered.",
      "trainer_interface.cc(557) LOG(INFO) Alphabet size=69",
      "trainer_interface.cc(558) LOG(INFO) Final character coverage=0.99998",
      "trainer_interface.cc(590) LOG(INFO) Done! preprocessed 8475 sentences.",
      "unigram_model_trainer.cc(146) LOG(INFO) Making suffix array...",
      "unigram_model_trainer.cc(150) LOG(INFO) Extracting frequent sub "
      "strings...",
      "unigram_model_trainer.cc(201) LOG(INFO) Initialized 23066 seed "
      "sentencepieces",
      "trainer_interface.cc(596) LOG(INFO) Tokenizing input sentences with "
      "whitespace: 8475",
      "trainer_interface.cc(607) LOG(INFO) Done! 12247",
      "unigram_model_trainer.cc(491) LOG(INFO) Using 12247 sentences for EM "
      "training",
      "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=10435 "
      "obj=12.9147 num_tokens=25473 num_tokens/piece=2.44111",
      "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=1 size=8282 "
      "obj=11.2477 num_tokens=25592 num_tokens/piece=3.09007",
      "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=6210 "
      "obj=11.1781 num_tokens=26701 num_tokens/piece=4.29968",
      "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=1 size=1100 "
      "obj=13.4235 num_tokens=48518 num_tokens/piece=44.1073",
  };
  return *log;
}

TEST(SentencePiecePhasesTest, TurnsTheLogIntoPhasesWithCounts) {
  SentencePiecePhases phases(1000);
  std::vector<std::string> shown;
  for (const std::string& line : CapturedLog()) {
    const std::string phase = phases.Describe(line);
    if (!phase.empty()) shown.push_back(phase);
  }
  const std::vector<std::string> expected = {
      "loaded 8,475 sentences into SentencePiece",
      "normalising the sentences",
      "alphabet: 69 characters cover 99.998% of the sample's 886,965",
      "seed pieces: building the suffix array",
      "seed pieces: extracting frequent substrings",
      "seed pieces: 23,066 candidates",
      // Rounds from the first step's 10,435 pieces to 1,100 (1.1 x 1,000),
      // 0.75 x each time: 7826, 5869, 4401, 3300, 2475, 1856, 1392, 1100.
      "EM round 1 of about 9, step 1: 10,435 pieces (target 1,000), "
      "objective 12.9147, 25,473 tokens over 12,247 distinct words",
      "EM round 1 of about 9, step 2: 8,282 pieces (target 1,000), "
      "objective 11.2477, 25,592 tokens over 12,247 distinct words",
      "EM round 2 of about 9, step 1: 6,210 pieces (target 1,000), "
      "objective 11.1781, 26,701 tokens over 12,247 distinct words",
      // The line is shortened: its sub_iter 1 follows round 2's sub_iter 0.
      "EM round 2 of about 9, step 2: 1,100 pieces (target 1,000), "
      "objective 13.4235, 48,518 tokens over 12,247 distinct words",
  };
  EXPECT_EQ(shown, expected);
  EXPECT_EQ(phases.rounds(), 2);
}

// SentencePiece's advice names a flag of spm_train that xlnet-data has
// not: its too-long warnings become one line with the counts.
TEST(SentencePiecePhasesTest, TooLongSentencesAreOneLineWithTheCounts) {
  SentencePiecePhases phases(1000);
  EXPECT_EQ(phases.Describe("trainer_interface.cc(1) LOG(WARNING) Found too "
                            "long line (5000 > 4192)."),
            "SentencePiece skips sentences over 4,192 bytes (the first has "
            "5,000)");
  EXPECT_EQ(phases.Describe("trainer_interface.cc(2) LOG(WARNING) Too long "
                            "lines are skipped in the training."),
            "");
  EXPECT_EQ(phases.Describe("trainer_interface.cc(3) LOG(WARNING) The "
                            "maximum length can be changed with "
                            "--max_sentence_length=<size> flag."),
            "");
  EXPECT_EQ(phases.Describe("trainer_interface.cc(4) LOG(INFO) Skipped 12 "
                            "too long sentences."),
            "SentencePiece skipped 12 sentences over its maximum length");
}

TEST(SentencePiecePhasesTest, UnknownLinesAndWarningsArePassedOn) {
  SentencePiecePhases phases(1000);
  EXPECT_EQ(phases.Describe("trainer_interface.cc(1) LOG(WARNING) Reserved "
                            "chars are found. Skipped: x"),
            "SentencePiece warning: Reserved chars are found. Skipped: x");
  EXPECT_EQ(phases.Describe("x.cc(2) LOG(ERROR) bad"),
            "SentencePiece error: bad");
  EXPECT_EQ(phases.Describe("x.cc(3) LOG(INFO) Something new: 12"),
            "SentencePiece: Something new: 12");
  EXPECT_EQ(phases.Describe("a line of its own"),
            "SentencePiece: a line of its own");
  EXPECT_EQ(phases.Describe(""), "");
  EXPECT_EQ(phases.rounds(), 0);
}

TEST(SentencePiecePhasesTest, ExpectedRoundsFollowThePruningSchedule) {
  // Already at 1.1 x vocab_size: one round.
  EXPECT_EQ(ExpectedEmRounds(1100, 1000), 1);
  EXPECT_EQ(ExpectedEmRounds(1000, 1000), 1);
  // 1466 -> 1100 (0.75 x 1466 = 1099, raised to 1100).
  EXPECT_EQ(ExpectedEmRounds(1466, 1000), 2);
  // 1,000,000 seeds to 35,200 (32,000 pieces): 0.75^12 x 1e6 = 31,676.
  EXPECT_EQ(ExpectedEmRounds(1000000, 32000), 13);
}

}  // namespace
}  // namespace xlnet::data
