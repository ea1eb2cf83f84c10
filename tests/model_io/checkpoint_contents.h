// A tiny model and its checkpoint contents, shared by the checkpoint tests.
#pragma once

#include "model_io/checkpoint_manager.h"

namespace xlnet::testing {

// The config the stored shapes of Contents describe.
inline XLNetConfig TinyModel() {
  XLNetConfig c;
  c.vocab_size = 10;
  c.d_model = 4;
  c.n_head = 1;
  c.d_head = 4;
  c.n_layer = 1;
  c.d_inner = 8;
  return c;
}

// The shared files of a checkpoint whose weights are all `value`.
inline CheckpointContents Contents(float value) {
  CheckpointContents c;
  c.model = {
      {"transformer.word_embedding.weight", torch::full({10, 4}, value)},
      {"transformer.layer.0.ff.layer_1.weight", torch::full({8, 4}, value)}};
  c.tensor_files["optimizer.safetensors"] = {
      {"step", torch::tensor(int64_t{3})}};
  c.text_files["config.yaml"] = "train:\n  lr: 0.1\n";
  return c;
}

}  // namespace xlnet::testing
