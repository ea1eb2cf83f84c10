// The sentence splitter's documented rule (data_pipeline/sentence_splitter.h).
#include "data_pipeline/sentence_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace xlnet::data {
namespace {

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string_view> views;
  SplitSentences(text, &views);
  return std::vector<std::string>(views.begin(), views.end());
}

using Sentences = std::vector<std::string>;

TEST(SentenceSplitterTest, SplitsAfterTerminatorsBeforeACapital) {
  EXPECT_EQ(Split("The jury met. It said nothing! Why? Nobody knows."),
            (Sentences{"The jury met.", "It said nothing!", "Why?",
                       "Nobody knows."}));
  // Closing quotes and brackets stay with their sentence; an opening quote
  // or a digit may start the next one.
  EXPECT_EQ(Split("He said \"no.\" She left (quietly.) \"Go,\" he said. "
                  "1961 was a year."),
            (Sentences{"He said \"no.\"", "She left (quietly.)",
                       "\"Go,\" he said.", "1961 was a year."}));
  // Non-ASCII capitals count; runs of terminators end one sentence.
  EXPECT_EQ(Split("C'est fini... \xC3\x89t\xC3\xA9 vient!?! Oui."),
            (Sentences{"C'est fini...", "\xC3\x89t\xC3\xA9 vient!?!", "Oui."}));
}

TEST(SentenceSplitterTest, KeepsAbbreviationsInitialsAndInnerPeriods) {
  EXPECT_EQ(
      Split("Mr. Smith met Dr. Jones at St. Paul. They talked."),
      (Sentences{"Mr. Smith met Dr. Jones at St. Paul.", "They talked."}));
  EXPECT_EQ(
      Split("J. F. Kennedy spoke in the U.S. Senate. Then he left."),
      (Sentences{"J. F. Kennedy spoke in the U.S. Senate.", "Then he left."}));
  EXPECT_EQ(
      Split("Apples, pears, etc. Were they fresh? Yes, e.g. Some."),
      (Sentences{"Apples, pears, etc. Were they fresh?", "Yes, e.g. Some."}));
  // No split without whitespace, or before a lowercase word.
  EXPECT_EQ(Split("Version 3.5 is out. see the notes.x Next"),
            (Sentences{"Version 3.5 is out. see the notes.x Next"}));
}

TEST(SentenceSplitterTest, LineBreaksEndSentencesAndBlanksAreDropped) {
  EXPECT_EQ(Split("  First line\nsecond line.\r\n\n   \nThird. Fourth  "),
            (Sentences{"First line", "second line.", "Third.", "Fourth"}));
  EXPECT_TRUE(Split("").empty());
  EXPECT_TRUE(Split(" \n \t ").empty());
  EXPECT_EQ(Split("Ends with a period."), (Sentences{"Ends with a period."}));
}

}  // namespace
}  // namespace xlnet::data
