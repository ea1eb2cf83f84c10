// Fuzz target: the shard file decoders (data_pipeline/shard_format.h,
// DecodeShardHeader, DecodeDocTable, VerifyShardBody) on a shard file of
// fuzzed bytes, read in place as the memory-mapped reader does. Each input
// is decoded twice: as it is, and "repaired" (version 2 header whose counts
// match the size, the body's checksum filled in) so the fuzzer gets past the
// header into the document table and the token checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data_pipeline/shard_format.h"

namespace {

namespace data = xlnet::data;

void Decode(const char* bytes, size_t size) {
  auto header = data::DecodeShardHeader(bytes, size, "shard-00000.bin");
  if (!header.ok()) return;
  (void)data::GetShardLayout(*header);
  auto docs = data::DecodeDocTable(bytes, *header, "shard-00000.bin");
  if (!docs.ok()) return;
  (void)data::VerifyShardBody(bytes, size, *header, 1000, "shard-00000.bin");
}

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader maps files, so its data is page-aligned; keep 8-byte
  // alignment as mmap would give.
  std::vector<uint64_t> aligned((size + 7) / 8 + 1);
  std::memcpy(aligned.data(), data, size);
  char* bytes = reinterpret_cast<char*>(aligned.data());
  Decode(bytes, size);

  if (size < data::kShardHeaderBytes) return 0;
  // Repair: the fuzzed document count (mod 16) and id width, the largest
  // token count that fits, the file cut to that layout's size.
  const uint32_t id_bytes = (bytes[80] & 1) != 0 ? 4 : 2;
  const size_t body = size - data::kShardHeaderBytes;
  const uint64_t num_docs = static_cast<uint8_t>(bytes[24]) % 16;
  if (16 * num_docs > body) return 0;
  const uint64_t num_tokens = (body - 16 * num_docs) / (id_bytes + 1);
  const data::ShardLayout layout =
      data::GetShardLayout(num_tokens, num_docs, id_bytes);
  if (layout.total > size) return 0;
  std::memcpy(bytes, "XLNSHARD", 8);
  PutU32(bytes + 8, 2);
  PutU32(bytes + 12, data::kShardHeaderBytes);
  PutU64(bytes + 16, num_tokens);
  PutU64(bytes + 24, num_docs);
  PutU32(bytes + 80, id_bytes);
  PutU64(bytes + 40, data::ShardBodyChecksum(bytes, layout.total));
  Decode(bytes, layout.total);
  return 0;
}
