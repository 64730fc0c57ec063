#include "strata/distributed/types.h"

#include <algorithm>
#include <ostream>

#include "strata/core/error.h"
#include "strata/distributed/process_group.h"

namespace strata::dist {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "product";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << reduce_op_name(op); }

std::string_view op_type_name(OpType op) {
  switch (op) {
    case OpType::AllReduce: return "all_reduce";
    case OpType::Broadcast: return "broadcast";
    case OpType::AllGather: return "all_gather";
    case OpType::ReduceScatter: return "reduce_scatter";
    case OpType::AllToAll: return "all_to_all";
    case OpType::Send: return "send";
    case OpType::Recv: return "recv";
    case OpType::Barrier: return "barrier";
    case OpType::AllToAllV: return "all_to_all_v";
  }
  return "unknown";
}

int64_t ProcessGroup::chunk_begin(int64_t total, int r) const {
  STRATA_CHECK(total >= 0 && r >= 0 && r < size_, "chunk_begin: total ", total, " and rank ", r,
               " must be non-negative and the rank below the group size ", size_);
  int64_t c = (total + size_ - 1) / size_;
  return std::min(static_cast<int64_t>(r) * c, total);
}

int64_t ProcessGroup::chunk_size(int64_t total, int r) const {
  STRATA_CHECK(total >= 0 && r >= 0 && r < size_, "chunk_size: total ", total, " and rank ", r,
               " must be non-negative and the rank below the group size ", size_);
  int64_t c = (total + size_ - 1) / size_;
  int64_t begin = std::min(static_cast<int64_t>(r) * c, total);
  return std::min(begin + c, total) - begin;
}

}  // namespace strata::dist
