// Fuzz target: the checkpoint checksum reader (model_io/checkpoint_manager.h
// VerifyChecksums, through model_io/model_dir.h ReadStateJson) on a fuzzed
// checksums.json in a directory holding one small file, "weights.bin".
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "model_io/checkpoint_manager.h"
#include "model_io/model_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = xlnet::fuzz::ScratchDir();
  static const bool written = [&] {
    xlnet::fuzz::WriteBytes(dir + "/weights.bin", std::string("xlnet\n"));
    return true;
  }();
  (void)written;
  const std::string path = dir + "/" + xlnet::kChecksumsFile;
  xlnet::fuzz::WriteBytes(path, data, size);
  (void)xlnet::VerifyChecksums(dir);
  // The trainer's and run directory's state files go through the same
  // reader with other kinds.
  (void)xlnet::ReadStateJson(path, "trainer_state", 1);
  return 0;
}
