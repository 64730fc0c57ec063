// Backend-independent parts of ProcessGroup: the default batch of point-to-point ops.
#include <memory>
#include <vector>

#include "distributed/work_list.h"
#include "strata/core/error.h"
#include "strata/distributed/process_group.h"

namespace strata::dist {

WorkPtr ProcessGroup::batch_send_recv(std::span<const P2POp> ops) {
  std::vector<WorkPtr> works;
  works.reserve(ops.size());
  for (const P2POp& op : ops) {
    Tensor t = op.tensor;
    works.push_back(op.kind == P2POp::Kind::Send ? send(t, op.peer) : recv(t, op.peer));
  }
  return std::make_unique<detail::WorkList>(std::move(works));
}

}  // namespace strata::dist
