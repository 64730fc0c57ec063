#pragma once
// The element-wise reductions our own collectives run on this rank's CPU (the ring, ring.h,
// and the shared-memory collectives, shm_collectives.h): one implementation, so that both
// reduce a chunk with exactly the same arithmetic.
#include <mpi.h>

#include <cstddef>
#include <cstdint>

#include "strata/distributed/types.h"

namespace strata::dist::mpi {

// dst[i] = a[i] (op) b[i] for i < n; dst may alias a or b (element-wise, in place).
// `type` is MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T or MPI_INT64_T; Avg reduces as Sum (the
// caller divides). Integers wrap like MPI's.
void combine(MPI_Datatype type, ReduceOp op, void* dst, const void* a, const void* b, int64_t n);

// Bytes per element of the wire types above plus MPI_UINT16_T (16-bit floats moved as words)
// and MPI_UINT8_T (bool, moved only).
size_t element_size(MPI_Datatype type);

}  // namespace strata::dist::mpi
