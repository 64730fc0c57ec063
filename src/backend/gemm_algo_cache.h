#pragma once
// A cache of cuBLASLt's algorithm choice per problem. cublasLtMatmulAlgoGetHeuristic costs
// tens of microseconds on the host, about what a small GEMM costs on the GPU, and a training
// step repeats the same few dozen problems every step. No CUDA headers: the key is built from
// plain integers (the caller converts its cuBLASLt enums), so the cache is unit-tested on
// machines without a GPU. The value type is the caller's (the algorithm, its workspace size,
// or "no algorithm takes this problem").
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "backend/gemm_cublas_layout.h"

namespace strata::gemm {

// Everything cuBLASLt's choice depends on: the device, the types, the call's geometry (not
// its offsets: they only move the pointers, whose alignments are keyed instead), and the
// epilogue's bias. Two calls with equal keys may share an algorithm.
struct AlgoKey {
  static constexpr int kFields = 25;
  std::array<int64_t, kFields> fields{};

  friend bool operator<(const AlgoKey& x, const AlgoKey& y) { return x.fields < y.fields; }
  friend bool operator==(const AlgoKey& x, const AlgoKey& y) { return x.fields == y.fields; }
};

// The types as the caller's cuBLASLt enum values.
struct AlgoTypes {
  int64_t data = 0, scale = 0, compute = 0;
};

// The alignment (bytes) of each pointer the call reads or writes; bias 0 when the call has no
// bias epilogue. The heuristic sees the bias pointer through the descriptor, so its alignment
// is part of the problem too.
struct AlgoAlignments {
  int64_t a = 0, b = 0, d = 0, bias = 0;
};

inline AlgoKey algo_key(int device, const AlgoTypes& types, const CublasCall& c, const AlgoAlignments& align) {
  AlgoKey k;
  k.fields = {device,     types.data, types.scale,  types.compute, c.m,      c.n,     c.k,       c.a.trans, c.a.rows,
              c.a.cols,   c.a.ld,     c.b.trans,    c.b.rows,      c.b.cols, c.b.ld,  c.ldd,     c.batch,   c.stride_a,
              c.stride_b, c.stride_d, c.accumulate, align.a,       align.b,  align.d, align.bias};
  return k;
}

// Thread-safe map from key to the caller's choice; `choose` runs outside the lock (it calls
// into cuBLASLt), so two threads may both choose for a new key: the first stored wins, and
// both get an equally valid answer. Bounded: past `capacity` entries the cache is cleared
// (a program cycling through that many shapes gains nothing from it).
template <class Value>
class AlgoCache {
 public:
  explicit AlgoCache(size_t capacity = 4096) : capacity_(capacity) {}

  template <class Choose>
  Value find_or_choose(const AlgoKey& key, Choose&& choose) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) {
        ++hits_;
        return it->second;
      }
    }
    Value v = choose();
    std::lock_guard<std::mutex> lock(mutex_);
    ++misses_;
    if (entries_.size() >= capacity_) entries_.clear();
    return entries_.emplace(key, std::move(v)).first->second;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }
  uint64_t hits() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }
  uint64_t misses() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return misses_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<AlgoKey, Value> entries_;
  size_t capacity_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace strata::gemm
