#pragma once
// The four communication mappings of Megatron-style tensor parallelism, and the two of
// sequence parallelism, as differentiable ops over a tensor-parallel group. Each is the
// transpose of another: the backward of a forward all-reduce is the identity, the backward
// of a forward identity is an all-reduce, a split's backward is an all-gather and so on.
// Every rank of the group calls the same mappings in the same order (forward and backward).
//
// "Along dim": the pieces are equal slices of `dim` in group-rank order; the size of `dim`
// must divide by the group size where a mapping splits it.
#include <cstdint>

#include "strata/distributed/process_group.h"
#include "strata/tensor/tensor.h"

namespace strata::parallel {

// Forward: identity. Backward: all-reduce (sum) of the gradient. Enters a region whose ranks
// each use x for a different part of the output (column-parallel input).
Tensor copy_to_tp_region(const Tensor& x, dist::ProcessGroup& group);
// Forward: all-reduce (sum). Backward: identity. Leaves a region of partial sums
// (row-parallel output).
Tensor reduce_from_tp_region(const Tensor& x, dist::ProcessGroup& group);
// Forward: this rank's slice along dim. Backward: all-gather of the gradient along dim.
Tensor scatter_to_tp_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group);
// Forward: all-gather along dim. Backward: this rank's slice of the gradient.
Tensor gather_from_tp_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group);

// Sequence parallelism (Korthikanti et al. 2022): activations outside the TP region are
// sharded along the sequence.
// Forward: all-gather along dim (the sequence). Backward: reduce-scatter along dim.
Tensor gather_from_sequence_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group);
// Forward: reduce-scatter along dim. Backward: all-gather along dim.
Tensor reduce_scatter_to_sequence_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group);

// The collectives themselves, without autograd (results never require grad; x need not be
// contiguous).
Tensor all_gather_along(const Tensor& x, int64_t dim, dist::ProcessGroup& group);
Tensor reduce_scatter_along(const Tensor& x, int64_t dim, dist::ProcessGroup& group);
Tensor slice_along(const Tensor& x, int64_t dim, dist::ProcessGroup& group);  // contiguous copy
Tensor all_reduce_copy(const Tensor& x, dist::ProcessGroup& group);

}  // namespace strata::parallel
