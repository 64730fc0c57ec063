#include "strata/nn/kv_cache.h"

#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"

namespace strata::nn {

KVCache::KVCache(int64_t n_layers, int64_t capacity) : layers_(static_cast<size_t>(n_layers)), capacity_(capacity) {
  STRATA_CHECK(n_layers > 0 && capacity > 0, "KVCache: needs a positive layer count and capacity, got ", n_layers,
               " layers and ", capacity, " positions");
}

std::pair<Tensor, Tensor> KVCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  STRATA_CHECK(!grad_enabled(), "KVCache::append: grad mode is on; run cached forwards under NoGradGuard");
  STRATA_CHECK(layer >= 0 && layer < num_layers(), "KVCache::append: layer ", layer, " is out of range [0, ",
               num_layers(), ")");
  STRATA_CHECK(k.dim() == 4 && k.shape() == v.shape(), "KVCache::append: keys ", k.shape(), " and values ", v.shape(),
               " must both be [batch, kv_heads, time, head_dim]");
  const int64_t T = k.size(2);
  STRATA_CHECK(length_ + T <= capacity_, "KVCache::append: ", length_, " cached + ", T,
               " new positions exceed the capacity of ", capacity_);
  Layer& l = layers_[static_cast<size_t>(layer)];
  const Shape full{k.size(0), k.size(1), capacity_, k.size(3)};
  if (!l.k.defined() || l.k.dtype() != k.dtype()) {
    STRATA_CHECK(length_ == 0, "KVCache::append: layer ", layer, " has no buffer for its ", length_,
                 " cached positions");
    l.k = empty(full, {.dtype = k.dtype(), .device = k.device()});
    l.v = empty(full, {.dtype = v.dtype(), .device = v.device()});
  }
  STRATA_CHECK(l.k.shape() == full, "KVCache::append: layer ", layer,
               " caches [batch, kv_heads, capacity, head_dim] = ", l.k.shape(), " but got keys ", k.shape(),
               "; reset() or a new cache for a new batch shape");
  l.k.narrow(2, length_, T).copy_(k);
  l.v.narrow(2, length_, T).copy_(v);
  return {l.k.narrow(2, 0, length_ + T), l.v.narrow(2, 0, length_ + T)};
}

void KVCache::advance(int64_t steps) {
  STRATA_CHECK(steps >= 0 && length_ + steps <= capacity_, "KVCache::advance: ", steps, " steps from ", length_,
               " exceed the capacity of ", capacity_);
  length_ += steps;
}

}  // namespace strata::nn
