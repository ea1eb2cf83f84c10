// Fuzz target: the prepared-directory readers (data_pipeline/shard_format.h
// ReadManifest, then data_pipeline/shard_reader.h ShardSet::Open) on a
// fuzzed manifest.json in a directory holding one valid-looking shard name
// (no shard files: Open must fail cleanly on the missing ones).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_reader.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = xlnet::fuzz::ScratchDir();
  xlnet::fuzz::WriteBytes(dir + "/manifest.json", data, size);
  auto manifest = xlnet::data::ReadManifest(dir);
  if (!manifest.ok()) return 0;
  (void)xlnet::data::ShardSet::Open(dir, /*verify=*/true);
  return 0;
}
