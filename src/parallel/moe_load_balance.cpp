#include "strata/parallel/moe_load_balance.h"

#include <vector>

#include "strata/nn/moe.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

// Sums the counts over `group` on its tensor device (NCCL reduces device tensors only).
std::vector<int64_t> sum_over(dist::ProcessGroup& group, const std::vector<int64_t>& counts) {
  if (group.size() == 1) return counts;
  Tensor t = from_vector(counts, {static_cast<int64_t>(counts.size())}).to(group.tensor_device());
  group.all_reduce(t)->wait();
  return t.to(Device::cpu()).to_vector<int64_t>();
}

}  // namespace

int64_t enable_global_load_balancing(nn::Module& model, dist::ProcessGroup& group) {
  int64_t count = 0;
  for (nn::Module* m : model.modules()) {
    auto* moe = dynamic_cast<nn::MoE*>(m);
    if (moe == nullptr) continue;
    moe->set_routing_count_reducer([&group](const std::vector<int64_t>& counts) { return sum_over(group, counts); });
    ++count;
  }
  return count;
}

}  // namespace strata::parallel
