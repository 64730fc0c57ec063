#pragma once
// CUDA tensors through a process group that moves host memory (MPI, local): the front door
// (process_group.cpp) hands the backend host stand-ins for an op's CUDA tensors and copies
// the results back when the Work is waited on (or reports completion). Slow (two PCIe
// copies and a host synchronisation per op) but exact, and it lets multi-rank GPU code run
// where NCCL cannot (several ranks sharing one GPU, machines without NCCL).
#include <utility>
#include <vector>

#include "strata/distributed/work.h"
#include "strata/tensor/tensor.h"

namespace strata::dist::detail {

// The host stand-ins of one op's tensors. Inactive (the op is not staged), every tensor
// stands for itself; active, CPU tensors still do and CUDA tensors get host copies.
class HostStage {
 public:
  explicit HostStage(bool active) : active_(active) {}
  // A tensor the op only reads (send, all_gather's and reduce_scatter's in).
  Tensor input(const Tensor& t) const;
  // A tensor the op reads and overwrites (all_reduce, broadcast): its result is copied back.
  Tensor in_out(const Tensor& t);
  // A tensor the op only writes (out, recv): a host buffer whose result is copied back.
  Tensor output(const Tensor& t);
  // The op's Work; staged results reach their tensors once it completes.
  WorkPtr finish(WorkPtr inner);

 private:
  bool active_;
  std::vector<std::pair<Tensor, Tensor>> back_;  // (CUDA tensor, its host buffer)
};

}  // namespace strata::dist::detail
