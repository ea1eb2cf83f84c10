// xlnet-squad-eval: the official SQuAD evaluation of a predictions file
// (see finetune/finetune_command.h).
#include "common/tool_main.h"
#include "finetune/finetune_command.h"

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-squad-eval", argc, argv,
                        &xlnet::RunSquadEvalCommand);
}
