// ProcessGroup's front door: every public op checks its arguments with one wording, stages
// CUDA tensors through the host for backends that move host memory, describes the op and
// counts it, then calls the backend's do_* (process_group.h).
#include <algorithm>
#include <memory>
#include <sstream>
#include <vector>

#include "distributed/group_checks.h"
#include "distributed/host_staging.h"
#include "distributed/work_list.h"
#include "strata/core/error.h"
#include "strata/distributed/process_group.h"

namespace strata::dist {
namespace {

using detail::describe;
using detail::HostStage;

bool on_cuda(const Tensor& t) { return t.defined() && t.device().is_cuda(); }

bool is_send(const P2POp& op) { return op.kind == P2POp::Kind::Send; }

// "float32, 12 elements to rank 3".
OpDescription p2p_description(const P2POp& op) {
  const bool send = is_send(op);
  return {
      send ? "send" : "recv",
      describe(op.tensor.dtype(), op.tensor.numel()) + (send ? " to rank " : " from rank ") + std::to_string(op.peer),
      std::nullopt};
}

// One op stands for itself; a larger batch is "2 sends, 1 recvs".
OpDescription batch_description(std::span<const P2POp> ops) {
  if (ops.size() == 1) return p2p_description(ops[0]);
  const auto sends = std::count_if(ops.begin(), ops.end(), is_send);
  std::ostringstream os;
  os << sends << " sends, " << static_cast<int64_t>(ops.size()) - sends << " recvs";
  return {"batch_send_recv", os.str(), std::nullopt};
}

}  // namespace

// ------------------------------------------------------------------ checks and counts

void ProcessGroup::check_tensor(const char* op, const char* what, const Tensor& t) const {
  STRATA_CHECK(t.defined(), op, " on group '", name_, "' (rank ", rank_, "): ", what, " is an undefined tensor");
  STRATA_CHECK(placement() != Placement::OwnDevice || t.device() == tensor_device(), op, " on group '", name_,
               "' (rank ", rank_, "): ", what, " of shape ", t.shape(), " is on ", t.device(),
               ", but the group runs on ", tensor_device(), " (move it there with .to(group.tensor_device()))");
  STRATA_CHECK(t.is_contiguous(), op, " on group '", name_, "' (rank ", rank_, "): ", what, " of shape ", t.shape(),
               " on ", t.device(), " is not contiguous; pass .contiguous() (and copy the result back)");
}

bool ProcessGroup::stages(const Tensor& a, const Tensor& b) const {
  return placement() == Placement::Host && (on_cuda(a) || on_cuda(b));
}

void ProcessGroup::count(OpType type, uint64_t bytes, uint64_t received_bytes) {
  std::lock_guard<std::mutex> lk(stats_mu_);
  OpCounter& c = stats_[type];
  c.calls += 1;
  c.bytes += bytes;
  c.received_bytes += received_bytes;
}

CommStats ProcessGroup::stats() const {
  std::lock_guard<std::mutex> lk(stats_mu_);
  return stats_;
}

void ProcessGroup::reset_stats() {
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_.clear();
}

// ------------------------------------------------------------------ collectives

WorkPtr ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", "tensor", tensor);
  const DType d = tensor.dtype();
  detail::check_average_dtype("all_reduce", op, d);
  const int64_t n = tensor.numel();
  HostStage stage(stages(tensor));
  Tensor t = stage.in_out(tensor);
  WorkPtr w = do_all_reduce(
      t, op, {"all_reduce", describe(d, n, reduce_op_name(op)), detail::reduce_signature(OpType::AllReduce, op, d, n)});
  count(OpType::AllReduce, tensor.nbytes());
  return stage.finish(std::move(w));
}

WorkPtr ProcessGroup::broadcast(Tensor& tensor, int root) {
  check_tensor("broadcast", "tensor", tensor);
  detail::check_peer("broadcast", "root", root, *this);
  const DType d = tensor.dtype();
  const int64_t n = tensor.numel();
  HostStage stage(stages(tensor));
  Tensor t = stage.in_out(tensor);
  WorkPtr w = do_broadcast(
      t, root,
      {"broadcast", describe(d, n) + ", root " + std::to_string(root), detail::broadcast_signature(d, n, root)});
  count(OpType::Broadcast, tensor.nbytes());
  return stage.finish(std::move(w));
}

WorkPtr ProcessGroup::all_gather(Tensor& out, const Tensor& in) {
  check_tensor("all_gather", "out", out);
  check_tensor("all_gather", "in", in);
  detail::check_same_dtype("all_gather", out, in);
  const int64_t m = out.numel();
  detail::check_chunk("all_gather", "in", in.numel(), m, *this);
  const DType d = out.dtype();
  HostStage stage(stages(out, in));
  const Tensor hin = stage.input(in);  // taken first: `in` may be a view of `out`
  Tensor hout = stage.output(out);
  WorkPtr w =
      do_all_gather(hout, hin, {"all_gather", describe(d, m, "total"), detail::op_signature(OpType::AllGather, d, m)});
  count(OpType::AllGather, in.nbytes());
  return stage.finish(std::move(w));
}

WorkPtr ProcessGroup::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  check_tensor("reduce_scatter", "out", out);
  check_tensor("reduce_scatter", "in", in);
  const DType d = in.dtype();
  detail::check_same_dtype("reduce_scatter", out, in);
  detail::check_average_dtype("reduce_scatter", op, d);
  const int64_t m = in.numel();
  detail::check_chunk("reduce_scatter", "out", out.numel(), m, *this);
  HostStage stage(stages(out, in));
  const Tensor hin = stage.input(in);
  Tensor hout = stage.output(out);
  OpDescription desc{"reduce_scatter", describe(d, m, std::string(reduce_op_name(op)) + ", total"),
                     detail::reduce_signature(OpType::ReduceScatter, op, d, m)};
  WorkPtr w = do_reduce_scatter(hout, hin, op, desc);
  count(OpType::ReduceScatter, in.nbytes());
  return stage.finish(std::move(w));
}

WorkPtr ProcessGroup::all_to_all(Tensor& out, const Tensor& in) {
  check_tensor("all_to_all", "out", out);
  check_tensor("all_to_all", "in", in);
  detail::check_all_to_all(out, in, size_);
  const DType d = in.dtype();
  const int64_t n = in.numel();
  HostStage stage(stages(out, in));
  const Tensor hin = stage.input(in);
  Tensor hout = stage.output(out);
  WorkPtr w = do_all_to_all(hout, hin, {"all_to_all", describe(d, n), detail::op_signature(OpType::AllToAll, d, n)});
  count(OpType::AllToAll, in.nbytes());
  return stage.finish(std::move(w));
}

// Splits count rows; the backend takes element counts. The bytes sent and received follow
// from the splits alone, so a dispatcher can assert them from its routing counts.
WorkPtr ProcessGroup::all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_splits,
                                   std::span<const int64_t> in_splits) {
  check_tensor("all_to_all_v", "out", out);
  check_tensor("all_to_all_v", "in", in);
  const int64_t row = detail::check_all_to_all_v(*this, out, in, out_splits, in_splits);
  std::vector<int64_t> out_counts, in_counts;
  for (int64_t rows : out_splits) out_counts.push_back(rows * row);
  for (int64_t rows : in_splits) in_counts.push_back(rows * row);
  const DType d = in.dtype();
  std::ostringstream what;
  what << dtype_name(d) << ", rows of " << row << " elements, " << in.size(0) << " rows sent, " << out.size(0)
       << " received";
  HostStage stage(stages(out, in));
  const Tensor hin = stage.input(in);
  Tensor hout = stage.output(out);
  WorkPtr w = do_all_to_all_v(hout, hin, out_counts, in_counts,
                              {"all_to_all_v", what.str(), detail::all_to_all_v_signature(d, row)});
  count(OpType::AllToAllV, in.nbytes(), out.nbytes());
  return stage.finish(std::move(w));
}

// Rank r's rows as one batch: a send of in's slice to every rank, a receive into out's
// slice from every rank (empty slices left out).
WorkPtr ProcessGroup::do_all_to_all_v(Tensor& out, const Tensor& in, std::span<const int64_t> out_counts,
                                      std::span<const int64_t> in_counts, const OpDescription& desc) {
  const Tensor src = detail::overlap(out, in) ? in.clone() : in;  // a send never reads what a recv writes
  const Tensor flat_in = src.view({src.numel()});
  const Tensor flat_out = out.view({out.numel()});
  std::vector<P2POp> ops;
  int64_t sent = 0, received = 0;
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<size_t>(r);
    if (in_counts[i] > 0) ops.push_back(P2POp::send(flat_in.narrow(0, sent, in_counts[i]), r));
    if (out_counts[i] > 0) ops.push_back(P2POp::recv(flat_out.narrow(0, received, out_counts[i]), r));
    sent += in_counts[i];
    received += out_counts[i];
  }
  if (ops.empty()) return std::make_unique<detail::WorkList>(std::vector<WorkPtr>{});
  return do_batch_send_recv(ops, desc);
}

WorkPtr ProcessGroup::barrier() {
  WorkPtr w = do_barrier({"barrier", "", detail::barrier_signature()});
  count(OpType::Barrier, 0);
  return w;
}

// ------------------------------------------------------------------ point to point

WorkPtr ProcessGroup::send(const Tensor& tensor, int dst) {
  check_tensor("send", "tensor", tensor);
  detail::check_peer("send", "destination rank", dst, *this);
  HostStage stage(stages(tensor));
  WorkPtr w = do_send(stage.input(tensor), dst, p2p_description(P2POp::send(tensor, dst)));
  count(OpType::Send, tensor.nbytes());
  return stage.finish(std::move(w));
}

WorkPtr ProcessGroup::recv(Tensor& tensor, int src) {
  check_tensor("recv", "tensor", tensor);
  detail::check_peer("recv", "source rank", src, *this);
  HostStage stage(stages(tensor));
  Tensor t = stage.output(tensor);
  WorkPtr w = do_recv(t, src, p2p_description(P2POp::recv(tensor, src)));
  count(OpType::Recv, tensor.nbytes());
  return stage.finish(std::move(w));
}

// Every op is checked before any is issued; each is counted as the send or recv it is.
WorkPtr ProcessGroup::batch_send_recv(std::span<const P2POp> ops) {
  if (ops.empty()) return std::make_unique<detail::WorkList>(std::vector<WorkPtr>{});  // nothing to wait for
  for (const P2POp& op : ops) {
    const char* name = is_send(op) ? "send" : "recv";
    check_tensor(name, "tensor", op.tensor);
    detail::check_peer(name, is_send(op) ? "destination rank" : "source rank", op.peer, *this);
  }
  const OpDescription desc = batch_description(ops);
  bool staged = false;
  for (const P2POp& op : ops) staged = staged || stages(op.tensor);
  HostStage stage(staged);
  std::vector<P2POp> host_ops;
  host_ops.reserve(ops.size());
  for (const P2POp& op : ops)
    host_ops.push_back({op.kind, is_send(op) ? stage.input(op.tensor) : stage.output(op.tensor), op.peer});
  WorkPtr w = do_batch_send_recv(host_ops, desc);
  for (const P2POp& op : ops) count(is_send(op) ? OpType::Send : OpType::Recv, op.tensor.nbytes());
  return stage.finish(std::move(w));
}

WorkPtr ProcessGroup::do_batch_send_recv(std::span<const P2POp> ops, const OpDescription&) {
  std::vector<WorkPtr> works;
  works.reserve(ops.size());
  for (const P2POp& op : ops) {
    Tensor t = op.tensor;
    works.push_back(is_send(op) ? do_send(t, op.peer, p2p_description(op)) : do_recv(t, op.peer, p2p_description(op)));
  }
  return std::make_unique<detail::WorkList>(std::move(works));
}

// ------------------------------------------------------------------ split

std::unique_ptr<ProcessGroup> ProcessGroup::split(std::span<const int> ranks, const std::string& name) {
  const SplitPlan plan = detail::plan_split(*this, ranks, name);
  std::unique_ptr<ProcessGroup> group =
      do_split(plan, {"split", "new group '" + plan.name + "'", detail::split_signature()});
  if (group) group->set_timeout(timeout_);
  return group;
}

}  // namespace strata::dist
