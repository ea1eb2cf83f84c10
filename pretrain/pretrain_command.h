// `xlnet-pretrain`: the toolkit's main job, as a library function so the
// thin main and the tests share it.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "pretrain/distributed.h"

namespace xlnet {

// Parses the command line and runs pretraining (or, with --nproc_per_node N
// and no WORLD_SIZE in the environment, launches N local ranks of itself).
absl::Status RunPretrainCommand(int argc, char** argv);

}  // namespace xlnet
