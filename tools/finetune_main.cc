// xlnet-finetune: fine-tuning on classification, regression and SQuAD
// (see finetune/finetune_command.h).
#include "common/tool_main.h"
#include "finetune/finetune_command.h"

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-finetune", argc, argv,
                        &xlnet::RunFinetuneCommand);
}
