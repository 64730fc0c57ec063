#pragma once
// libtorch-style index expressions for Tensor::index and Tensor::index_put_:
//
//   using namespace strata::indexing;
//   x.index({Slice(0, 4), 2});                 // x[0:4, 2]
//   x.index({Ellipsis, None, Slice(None, None, 2)});  // x[..., None, ::2]
//   x.index({idx});                            // x[idx], idx an int64/int32 tensor
//   x.index_put_({mask}, 0.0);                 // x[mask] = 0, mask a Bool tensor
//
// The rules are PyTorch's: integers select (and drop) a dimension, slices clamp to the
// dimension, None inserts a dimension of size 1, Ellipsis stands for the dimensions not
// named; integer and Bool tensors are advanced indices (a Bool mask of k dimensions stands
// for the k int64 tensors of its true positions). Advanced indices broadcast together; their
// result dimensions replace the indexed ones in place when those are adjacent, else they
// come first.
#include <cstdint>
#include <optional>

#include "strata/tensor/tensor.h"

namespace strata::indexing {

// `None`: a new axis as an index, an open end as a Slice bound.
inline constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {};
inline constexpr EllipsisIndexType Ellipsis{};

// start:stop:step; an open bound is None. Negative bounds count from the end; the step must
// be positive (as PyTorch).
struct Slice {
  Slice(std::optional<int64_t> start_ = None, std::optional<int64_t> stop_ = None, std::optional<int64_t> step_ = None)
      : start(start_), stop(stop_), step(step_) {}
  std::optional<int64_t> start, stop, step;
};

// One entry of an index list.
class TensorIndex {
 public:
  enum class Kind { None, Ellipsis, Integer, Slice, Tensor };
  TensorIndex(std::nullopt_t /*none*/) : kind_(Kind::None) {}
  TensorIndex(EllipsisIndexType /*ellipsis*/) : kind_(Kind::Ellipsis) {}
  TensorIndex(int64_t integer) : kind_(Kind::Integer), integer_(integer) {}
  TensorIndex(int integer) : kind_(Kind::Integer), integer_(integer) {}
  TensorIndex(bool) = delete;  // PyTorch's x[True] is not supported; a literal bool is a mistake
  TensorIndex(Slice slice) : kind_(Kind::Slice), slice_(slice) {}
  TensorIndex(Tensor tensor) : kind_(Kind::Tensor), tensor_(std::move(tensor)) {}

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace strata::indexing
