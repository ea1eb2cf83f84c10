// How large a model a config asks for, before anything is allocated: the
// parameter count of XLNetLMHeadModel computed from the config alone, and a
// check of it against the memory this machine has available, so that a
// config with n_layer 100000 or vocab_size 1e12 is a one-line error naming
// the key instead of an allocation failure (or minutes of swapping).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "config/config.h"

namespace xlnet {

// Parameters of XLNetLMHeadModel(config) (the tied LM weight counted once),
// as a double so that absurd configs do not overflow. Fine-tuning heads add
// O(d_model^2), which the memory check's margin covers.
double ModelParameterCount(const XLNetConfig& config);

// OK when the fp32 parameters fit in the memory available now (with a
// margin); otherwise InvalidArgument "SOURCE: the model (KEY_PREFIX +
// vocab_size V, d_model D, n_layer L, d_inner I) has P parameters, B in
// fp32, more than the M of memory available; check KEY" where KEY is the
// size that contributes most. `key_prefix` is "model." for a YAML config and
// "" for config.json.
absl::Status CheckModelFitsInMemory(const XLNetConfig& config,
                                    const std::string& source,
                                    const std::string& key_prefix);

}  // namespace xlnet
