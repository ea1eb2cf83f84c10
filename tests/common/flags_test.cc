#include "common/flags.h"

#include <gtest/gtest.h>

namespace xlnet {
namespace {

TEST(FlagsTest, ParsesEveryForm) {
  std::string model, config;
  int64_t steps = 5;
  bool verbose = false;
  std::vector<std::string> sets;
  FlagParser flags("xlnet-test", "ARGS");
  flags.AddString("model", &model, "model dir");
  flags.AddInt("steps", &steps, "steps");
  flags.AddBool("verbose", &verbose, "chatty");
  flags.AddConfigFlags(&config, &sets);
  const char* argv[] = {"prog",      "--model",  "m",     "--steps=7",
                        "--verbose", "--set",    "a.b=1", "--set=c.d=2",
                        "pos",       "--config", "c.yaml"};
  ASSERT_TRUE(flags.Parse(11, argv).ok());
  EXPECT_EQ(model, "m");
  EXPECT_EQ(steps, 7);
  EXPECT_TRUE(verbose);
  EXPECT_EQ(sets, (std::vector<std::string>{"a.b=1", "c.d=2"}));
  EXPECT_EQ(config, "c.yaml");
  EXPECT_EQ(flags.positional(), std::vector<std::string>{"pos"});
  EXPECT_TRUE(flags.WasSet("steps"));
  EXPECT_FALSE(flags.help_requested());
}

TEST(FlagsTest, ErrorsAndHelp) {
  std::string model;
  int64_t steps = 0;
  FlagParser flags("xlnet-test", "ARGS");
  flags.AddString("model", &model, "the model directory");
  flags.AddInt("steps", &steps, "number of steps");
  const char* unknown[] = {"prog", "--modle", "x"};
  auto s = flags.Parse(3, unknown);
  EXPECT_EQ(
      s.message(),
      "unknown flag --modle (did you mean 'model'?); see xlnet-test --help");
  FlagParser f2("xlnet-test", "ARGS");
  f2.AddInt("steps", &steps, "number of steps");
  const char* bad_int[] = {"prog", "--steps", "many"};
  EXPECT_EQ(f2.Parse(3, bad_int).message(),
            "--steps: expected an integer, got 'many'");
  FlagParser f3("xlnet-test", "ARGS");
  f3.AddString("model", &model, "the model directory");
  const char* missing[] = {"prog", "--model"};
  EXPECT_EQ(f3.Parse(2, missing).message(), "--model needs a value");
  const char* help[] = {"prog", "--help"};
  FlagParser f4("xlnet-test", "ARGS");
  f4.AddString("model", &model, "the model directory");
  ASSERT_TRUE(f4.Parse(2, help).ok());
  EXPECT_TRUE(f4.help_requested());
  EXPECT_NE(f4.Help().find("--model    the model directory"),
            std::string::npos);
  EXPECT_NE(f4.Help().find("--help"), std::string::npos);
}

TEST(FlagsTest, HelpMarksRequiredFlagsAndTakesAConfigHelp) {
  std::string model, out, config;
  std::vector<std::string> sets;
  FlagParser flags("xlnet-test", "--model DIR [--out DIR]");
  flags.AddString("model", &model, "the model directory");
  flags.AddString("out", &out, "where to write");
  flags.AddConfigFlags(&config, &sets, "optional YAML config");
  flags.Require("model");
  const std::string help = flags.Help();
  EXPECT_NE(help.find("--model    (required) the model directory"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("--out      where to write"), std::string::npos) << help;
  EXPECT_NE(help.find("--config   optional YAML config"), std::string::npos)
      << help;
  const char* none[] = {"prog"};
  auto proceed = flags.ParseCommandLine(1, none);
  ASSERT_FALSE(proceed.ok());
  EXPECT_EQ(proceed.status().message(),
            "--model is required; see xlnet-test --help");
}

TEST(FlagsTest, Doubles) {
  double thresh = 1.0;
  FlagParser flags("xlnet-test", "ARGS");
  flags.AddDouble("thresh", &thresh, "threshold");
  const char* ok[] = {"prog", "--thresh=-2.5e-1"};
  ASSERT_TRUE(flags.Parse(2, ok).ok());
  EXPECT_DOUBLE_EQ(thresh, -0.25);
  for (const char* text : {"x", "nan", "inf", ""}) {
    FlagParser f("xlnet-test", "ARGS");
    f.AddDouble("thresh", &thresh, "threshold");
    const char* bad[] = {"prog", "--thresh", text};
    EXPECT_EQ(f.Parse(3, bad).message(),
              std::string("--thresh: expected a number, got '") + text + "'");
  }
}

// Every flag's text starts in one column, --help and --version included,
// also when the tool's own names are short.
TEST(FlagsTest, HelpAlignsEveryFlag) {
  std::string out;
  FlagParser flags("xlnet-test", "ARGS");
  flags.AddString("out", &out, "where");
  const std::string help = flags.Help();
  EXPECT_NE(help.find("  --out      where\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --help     print this help"), std::string::npos)
      << help;
  EXPECT_NE(help.find("  --version  print the version"), std::string::npos)
      << help;
}

}  // namespace
}  // namespace xlnet
