// strata-ckpt verify: reads every byte the index points at and reports each problem that
// ShardedCheckpoint::verify finds (checksums, shard headers, coverage), not just the first,
// so that one run tells how much of a damaged save is affected.
#include <cstdio>
#include <string>

#include "commands.h"
#include "strata/checkpoint/sharded.h"

namespace strata::ckpt_tool {

int verify(const std::string& path) {
  const checkpoint::ShardedCheckpoint c = checkpoint::ShardedCheckpoint::open(path);
  const std::vector<std::string> problems = c.verify();
  if (!problems.empty()) {
    for (const std::string& p : problems) std::printf("PROBLEM: %s\n", p.c_str());
    std::printf("FAILED: %zu problem%s in %s\n", problems.size(), problems.size() == 1 ? "" : "s",
                c.directory().c_str());
    return kExitProblems;
  }
  size_t pieces = 0;
  uint64_t bytes = 0;
  for (const auto& [name, e] : c.tensors()) {
    pieces += e.pieces.size();
    for (const checkpoint::PieceLocation& p : e.pieces) bytes += p.byte_end - p.byte_begin;
  }
  std::printf("OK: %zu tensors, %zu pieces, %llu bytes verified (%s)\n", c.tensors().size(), pieces,
              static_cast<unsigned long long>(bytes), c.directory().c_str());
  return kExitOk;
}

}  // namespace strata::ckpt_tool
