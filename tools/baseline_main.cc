// xlnet-baseline: a bag-of-words classifier to compare fine-tuning against
// (see finetune/bow_baseline.h).
#include "common/tool_main.h"
#include "finetune/finetune_command.h"

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-baseline", argc, argv,
                        &xlnet::RunBaselineCommand);
}
