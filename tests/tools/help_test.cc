// The tools' --help tells the truth: every `--set section.key=value` example
// in any tool's help parses with the config parser for the sections that
// tool reads, and xlnet-finetune's usage marks what is optional.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "tests/test_util.h"

namespace xlnet {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::ToolPath;

// One --help to read: the command after build/bin/xlnet-, and the config
// sections that tool accepts.
struct HelpCase {
  std::string command;
  std::vector<std::string> sections;
};

std::vector<HelpCase> AllHelps() {
  const std::vector<std::string> all = AllConfigSections();
  return {
      {"inspect", all},
      {"run", all},
      {"lm", all},
      {"lm eval", all},
      {"lm generate", all},
      {"export", all},
      {"data", all},
      {"data tokenizer", all},
      {"data prepare", all},
      {"data combine", all},
      {"data dump", all},
      {"data inspect", all},
      {"pretrain", {"model", "data", "train"}},
      {"finetune", {"data", "train", "finetune"}},
      {"baseline", all},
      {"squad-eval", all},
  };
}

// The values after `--set` in `text` (`--set X` and `--set=X`).
std::vector<std::string> SetExamples(const std::string& text) {
  static const std::regex kSet(R"(--set[ =]([^\s\]\)]+))");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kSet);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

TEST(ToolHelpTest, EverySetExampleParses) {
  // Placeholders, not examples.
  const std::set<std::string> placeholders = {"k=v", "section.key=value"};
  int examples = 0;
  for (const HelpCase& c : AllHelps()) {
    const CommandResult r = RunCommand(ToolPath(c.command) + " --help");
    ASSERT_EQ(r.exit_code, 0) << c.command << "\n" << r.output;
    ASSERT_NE(r.output.find("usage:"), std::string::npos) << c.command << "\n"
                                                          << r.output;
    for (const std::string& example : SetExamples(r.output)) {
      if (placeholders.count(example) > 0) continue;
      ++examples;
      auto config = ParseConfig("", "xlnet-" + c.command + " --help", {example},
                                c.sections);
      EXPECT_TRUE(config.ok()) << "xlnet-" << c.command << " --help: --set "
                               << example << ": " << config.status();
    }
  }
  // The generic example of every --set flag, and xlnet-finetune's columns.
  EXPECT_GE(examples, 3);
}

TEST(ToolHelpTest, FinetuneUsageMarksOptionalFlags) {
  const CommandResult r = RunCommand(ToolPath("finetune") + " --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string usage = r.output.substr(0, r.output.find("\n\n"));
  for (const char* optional :
       {"[--train F]", "[--dev F]", "[--test F]", "[--config CFG.yaml]",
        "[--set k=v ...]", "[--do_predict]", "[--tokenizer spiece.model]",
        "[--labels A,B,...]", "[--from_scratch]"}) {
    EXPECT_NE(usage.find(optional), std::string::npos) << optional << "\n"
                                                       << usage;
  }
  for (const char* required : {"--task", "--init", "--out"}) {
    EXPECT_NE(usage.find(std::string(required) + " "), std::string::npos)
        << required;
    EXPECT_EQ(usage.find(std::string("[") + required), std::string::npos)
        << required;
  }
  // The flag lines say which are required, and that --config is optional.
  const std::regex required_line(R"(--(task|init|out) +\(required\))");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(),
                                               required_line),
                          std::sregex_iterator()),
            3)
      << r.output;
  const std::regex config_line(R"(--config +YAML config[^\n]*optional)");
  EXPECT_TRUE(std::regex_search(r.output, config_line)) << r.output;
  // A missing required flag names it.
  const CommandResult missing =
      RunCommand(ToolPath("finetune") + " --task classification --out /tmp/x");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("--init is required"), std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace xlnet
