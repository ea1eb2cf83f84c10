#include "model/model_size.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/runtime.h"
#include "common/strings.h"

namespace xlnet {
namespace {

// The parameters of one layer: relative attention (q, k, v, o, r; three
// biases; segment embedding; LayerNorm) and the feed-forward block.
double LayerParameters(const XLNetConfig& c) {
  const double d = static_cast<double>(c.d_model);
  const double hd = static_cast<double>(c.n_head) * c.d_head;
  const double attention = 5 * d * hd + 3 * hd + 2 * hd + 2 * d;
  const double ff = 2 * d * c.d_inner + c.d_inner + d + 2 * d;
  return attention + ff;
}

}  // namespace

double ModelParameterCount(const XLNetConfig& c) {
  const double embedding = static_cast<double>(c.vocab_size) * c.d_model;
  const double mask_emb = static_cast<double>(c.d_model);
  const double lm_bias = static_cast<double>(c.vocab_size);
  return embedding + mask_emb + lm_bias + c.n_layer * LayerParameters(c);
}

absl::Status CheckModelFitsInMemory(const XLNetConfig& c,
                                    const std::string& source,
                                    const std::string& key_prefix) {
  const double params = ModelParameterCount(c);
  const double bytes = 4 * params;
  const double available = static_cast<double>(AvailableMemoryBytes());
  // Half of what is free: the parameters are not all a run allocates.
  if (bytes <= available / 2) return absl::OkStatus();
  // Name the size furthest beyond what large models use.
  struct Size {
    const char* key;
    double value;
    double large;
  };
  const Size sizes[] = {
      {"vocab_size", static_cast<double>(c.vocab_size), 2.5e5},
      {"n_layer", static_cast<double>(c.n_layer), 96},
      {"d_model", static_cast<double>(c.d_model), 8192},
      {"d_inner", static_cast<double>(c.d_inner), 32768}};
  const Size* worst = &sizes[0];
  for (const Size& s : sizes) {
    if (s.value / s.large > worst->value / worst->large) worst = &s;
  }
  const std::string key = worst->key;
  const std::string p = key_prefix;
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": the model (", p, "vocab_size ", c.vocab_size, ", ", p,
      "d_model ", c.d_model, ", ", p, "n_layer ", c.n_layer, ", ", p,
      "d_inner ", c.d_inner, ") has ", absl::StrFormat("%.3g", params),
      " parameters, ", HumanBytes(bytes), " in fp32, more than half of the ",
      HumanBytes(available), " of memory available; check ", p, key));
}

}  // namespace xlnet
