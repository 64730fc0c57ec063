#pragma once
// CUDA tensors through a process group that moves host memory (MPI, local): each op copies
// its CUDA inputs to host tensors, runs the group's own CPU op on them, and copies results
// back when the Work is waited on (or reports completion). Slow (two PCIe copies and a host
// synchronisation per op) but exact, and it lets multi-rank GPU code run where NCCL cannot
// (several ranks sharing one GPU, machines without NCCL).
#include "strata/distributed/process_group.h"

namespace strata::dist::staging {

// True when any defined argument lives on a CUDA device.
bool needs(const Tensor& a, const Tensor& b = {});

WorkPtr all_reduce(ProcessGroup& pg, Tensor& tensor, ReduceOp op);
WorkPtr broadcast(ProcessGroup& pg, Tensor& tensor, int root);
WorkPtr all_gather(ProcessGroup& pg, Tensor& out, const Tensor& in);
WorkPtr reduce_scatter(ProcessGroup& pg, Tensor& out, const Tensor& in, ReduceOp op);
WorkPtr all_to_all(ProcessGroup& pg, Tensor& out, const Tensor& in);
WorkPtr send(ProcessGroup& pg, const Tensor& tensor, int dst);
WorkPtr recv(ProcessGroup& pg, Tensor& tensor, int src);

}  // namespace strata::dist::staging
