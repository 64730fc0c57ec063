#pragma once
// The one place outside the tensor layer that moves a tensor onto other memory: ZeRO packs
// each parameter into its bucket while every handle to it (module, optimizer, autograd)
// keeps pointing at the same TensorImpl. Private to the library.
#include <cstdint>
#include <memory>

#include "strata/tensor/tensor.h"

namespace strata::detail {

// `t` (every handle to it) now reads `storage` from element `offset` on; its shape, strides,
// dtype and autograd state are kept. The caller has copied the values there.
inline void rebind_storage(const Tensor& t, std::shared_ptr<Storage> storage, int64_t offset) {
  TensorImpl* impl = t.impl();
  impl->storage = std::move(storage);
  impl->offset = offset;
}

}  // namespace strata::detail
