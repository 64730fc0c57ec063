#include "strata/distributed/split_exchange.h"

#include "strata/core/error.h"
#include "strata/tensor/factory.h"

namespace strata::dist {

std::vector<int64_t> exchange_split_sizes(ProcessGroup& group, std::span<const int64_t> in_splits) {
  const int n = group.size();
  STRATA_CHECK(in_splits.size() == static_cast<size_t>(n), "exchange_split_sizes on group '", group.name(), "' (rank ",
               group.rank(), "): in_splits has ", in_splits.size(), " entries but the group has ", n,
               " ranks (one split per rank)");
  for (size_t r = 0; r < in_splits.size(); ++r)
    STRATA_CHECK(in_splits[r] >= 0, "exchange_split_sizes on group '", group.name(), "' (rank ", group.rank(),
                 "): in_splits[", r, "] is ", in_splits[r], "; a split counts rows and cannot be negative");
  const std::vector<int64_t> mine(in_splits.begin(), in_splits.end());
  // On the group's own device: an NCCL group moves only tensors on its GPU.
  const Tensor sent = from_vector(mine, {n}).to(group.tensor_device());
  Tensor received = empty({n}, {.dtype = DType::Int64, .device = group.tensor_device()});
  group.all_to_all(received, sent)->wait();
  return received.to_vector<int64_t>();
}

}  // namespace strata::dist
