#pragma once
// VocabParallelEmbedding's index step, one token at a time: the CPU loop
// (src/backend/cpu/vocab_parallel.cpp) and the CUDA kernel (cuda/vocab_parallel.cu) call the
// same function.
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// VocabParallelEmbedding's lookup index: a token this rank holds looks up its local row;
// any other looks up row 0 and is marked `outside` (its embedding is then replaced by 0), so
// the sum over ranks holds each token's row exactly once. Returns false for a token outside
// [0, vocab).
STRATA_HD bool vp_shard_index(int64_t token, int64_t vocab, int64_t start, int64_t part, int64_t* local,
                              bool* outside) {
  const int64_t j = token - start;
  const bool here = j >= 0 && j < part;
  *local = here ? j : 0;
  *outside = !here;
  return token >= 0 && token < vocab;
}

}  // namespace strata_kernels
