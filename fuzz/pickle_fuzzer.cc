// Fuzz target: the torch.save pickle reader (model_io/torch_pickle.h,
// ReadTorchSaveStateDict). The fuzzed bytes are the archive's data.pkl; the
// target wraps them in a torch.save zip (LibTorch's PyTorchStreamWriter)
// with two storage records, data/0 (48 bytes) and data/1 (24 bytes, the
// sizes of tests/fixtures/torch_save/ordered_state_dict.bin), so the
// unpickler's own code is what gets fuzzed rather than the zip container.
#include <caffe2/serialize/inline_container.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "model_io/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string zip;
  {
    caffe2::serialize::PyTorchStreamWriter writer(
        [&zip](const void* buf, size_t n) -> size_t {
          zip.append(static_cast<const char*>(buf), n);
          return n;
        });
    writer.writeRecord("data.pkl", data, size);
    static const char storage[48] = {1, 2, 3, 4, 5, 6, 7, 8};
    writer.writeRecord("data/0", storage, 48);
    writer.writeRecord("data/1", storage, 24);
    writer.writeEndOfFile();
  }
  const std::string path = xlnet::fuzz::ScratchDir() + "/pytorch_model.bin";
  xlnet::fuzz::WriteBytes(path, zip);
  (void)xlnet::ReadTorchSaveStateDict(path);
  return 0;
}
