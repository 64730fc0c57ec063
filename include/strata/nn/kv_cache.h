#pragma once
// Keys and values of the positions a model has already seen, per layer, so that generation
// runs each new token through the model once instead of the whole sequence again.
#include <cstdint>
#include <utility>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::nn {

class KVCache {
 public:
  // Room for `capacity` positions in each of `n_layers` layers; buffers are allocated on first use.
  KVCache(int64_t n_layers, int64_t capacity);

  int64_t length() const { return length_; }  // positions cached in every layer
  int64_t capacity() const { return capacity_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

  // Layer `layer` stores the keys and values [B, Hkv, T, D] of the positions [length(),
  // length() + T) and gets back those of all positions [0, length() + T) as views into the
  // cache. Grad mode must be off: the cache holds values, not graphs. Every layer appends the
  // same T before the model calls advance(T).
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& k, const Tensor& v);
  // Commits the positions the layers appended this forward.
  void advance(int64_t steps);
  // Forgets every position (keeps the buffers).
  void reset() { length_ = 0; }

 private:
  struct Layer {
    Tensor k, v;  // [B, Hkv, capacity, D]
  };
  std::vector<Layer> layers_;
  int64_t capacity_;
  int64_t length_ = 0;
};

}  // namespace strata::nn
