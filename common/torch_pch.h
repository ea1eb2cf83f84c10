// The precompiled header shared by all targets: LibTorch plus the few
// standard and Abseil headers nearly every file includes. Nothing here may
// depend on project code.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
