#include "distributed/host_staging.h"

#include <memory>

#include "distributed/work_list.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factory.h"

namespace strata::dist::staging {
namespace {

void check(const Tensor& t, const char* op, const char* what) {
  STRATA_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
  STRATA_CHECK(t.is_contiguous(), op, ": ", what, " of shape ", t.shape(), " on ", t.device(),
               " is not contiguous; pass .contiguous() (and copy the result back)");
}

// A host copy of t's values (t itself when already on the CPU).
Tensor to_host(const Tensor& t) { return t.device().is_cpu() ? t : t.detach().to(Device::cpu()); }

// A host buffer for results that land in t, holding t's values (all_reduce, broadcast).
Tensor host_buffer(const Tensor& t) { return t.device().is_cpu() ? t : t.detach().to(Device::cpu()); }
// A host buffer for results only (all_gather, reduce_scatter, all_to_all, recv).
Tensor host_output(const Tensor& t) { return t.device().is_cpu() ? t : empty(t.shape(), {.dtype = t.dtype()}); }

WorkPtr staged(WorkPtr inner, Tensor device_out, Tensor host_out) {
  if (device_out.device().is_cpu()) return std::make_unique<detail::StagedWork>(std::move(inner), nullptr);
  return std::make_unique<detail::StagedWork>(std::move(inner), [device_out, host_out]() mutable {
    NoGradGuard no_grad;
    device_out.copy_(host_out);
  });
}

}  // namespace

bool needs(const Tensor& a, const Tensor& b) {
  return (a.defined() && a.device().is_cuda()) || (b.defined() && b.device().is_cuda());
}

WorkPtr all_reduce(ProcessGroup& pg, Tensor& tensor, ReduceOp op) {
  check(tensor, "all_reduce", "tensor");
  Tensor h = host_buffer(tensor);
  WorkPtr w = pg.all_reduce(h, op);
  return staged(std::move(w), tensor, h);
}

WorkPtr broadcast(ProcessGroup& pg, Tensor& tensor, int root) {
  check(tensor, "broadcast", "tensor");
  Tensor h = host_buffer(tensor);
  WorkPtr w = pg.broadcast(h, root);
  return staged(std::move(w), tensor, h);
}

WorkPtr all_gather(ProcessGroup& pg, Tensor& out, const Tensor& in) {
  check(out, "all_gather", "out");
  check(in, "all_gather", "in");
  Tensor hin = to_host(in);  // taken first: `in` may be a view of `out`
  Tensor hout = host_output(out);
  WorkPtr w = pg.all_gather(hout, hin);
  return staged(std::move(w), out, hout);
}

WorkPtr reduce_scatter(ProcessGroup& pg, Tensor& out, const Tensor& in, ReduceOp op) {
  check(out, "reduce_scatter", "out");
  check(in, "reduce_scatter", "in");
  Tensor hin = to_host(in);
  Tensor hout = host_output(out);
  WorkPtr w = pg.reduce_scatter(hout, hin, op);
  return staged(std::move(w), out, hout);
}

WorkPtr all_to_all(ProcessGroup& pg, Tensor& out, const Tensor& in) {
  check(out, "all_to_all", "out");
  check(in, "all_to_all", "in");
  Tensor hin = to_host(in);
  Tensor hout = host_output(out);
  WorkPtr w = pg.all_to_all(hout, hin);
  return staged(std::move(w), out, hout);
}

WorkPtr send(ProcessGroup& pg, const Tensor& tensor, int dst) {
  check(tensor, "send", "tensor");
  Tensor h = to_host(tensor);
  return std::make_unique<detail::StagedWork>(pg.send(h, dst), nullptr);
}

WorkPtr recv(ProcessGroup& pg, Tensor& tensor, int src) {
  check(tensor, "recv", "tensor");
  Tensor h = host_output(tensor);
  WorkPtr w = pg.recv(h, src);
  return staged(std::move(w), tensor, h);
}

}  // namespace strata::dist::staging
