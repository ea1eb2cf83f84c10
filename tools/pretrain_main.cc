// xlnet-pretrain: permutation-LM pretraining (see pretrain/pretrain_command.h).
#include "common/tool_main.h"
#include "pretrain/pretrain_command.h"

int main(int argc, char** argv) {
  return xlnet::RunTool("xlnet-pretrain", argc, argv,
                        &xlnet::RunPretrainCommand);
}
