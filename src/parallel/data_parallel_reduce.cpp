// The data-parallel path's gradients (data_parallel_state.h): each parameter's hook puts its
// gradient in its bucket slot; a complete bucket's all_reduce (stage 0) or reduce_scatter
// (stages 1-3) starts at once, overlapping the rest of backward, in bucket order on every
// rank; the end-of-backward callback reduces what is left and waits for all of it.
#include <exception>
#include <sstream>

#include "parallel/data_parallel_state.h"
#include "strata/autograd/engine.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/ops/elementwise.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

bool arithmetic(DType d) { return d == DType::Float32 || d == DType::Float64; }

// Names the parameters that received no gradient (DistributedDataParallel's error).
std::string unused_message(const DataParallelState& s, const std::vector<int>& unused) {
  std::ostringstream os;
  os << s.dp.owner << ": parameter '" << s.params[static_cast<size_t>(unused.front())].name
     << "' received no gradient in this backward pass on rank " << s.rank;
  if (unused.size() > 1) {
    os << " (" << unused.size() << " parameters had none:";
    for (size_t k = 0; k < unused.size() && k < 8; ++k)
      os << " '" << s.params[static_cast<size_t>(unused[k])].name << "'";
    if (unused.size() > 8) os << " ...";
    os << ")";
  }
  os << "; it was reduced as zero, so the ranks' gradients for it are not the average. If parameters "
        "are legitimately unused, pass find_unused_parameters = true";
  return os.str();
}

}  // namespace

void ensure_full_gradient(FlatBuffer& grad, Device device) {
  if (!grad.allocated()) {
    grad.allocate(device);
  } else if (grad.released()) {
    grad.reallocate();
    grad.data().zero_();
  }
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  Tensor d = dst;
  if (arithmetic(dst.dtype())) {
    add_(d, src);
    return;
  }
  STRATA_CHECK(dst.dtype() == DType::BFloat16 || dst.dtype() == DType::Float16, "data parallel: gradients of dtype ",
               dst.dtype(), " cannot be accumulated");
  d.copy_(add(dst.to(DType::Float32), src.to(DType::Float32)));
}

// Stages 0-1: the parameter's gradient lands in its slot of the gradient bucket. The slot
// stays .grad() (AccumulateGrad then adds in place); with an optimizer, 16-bit gradients are
// added here instead and .grad() is cleared. A gradient that is no longer the slot
// (zero_grad(set_to_none), set_grad) holds the whole gradient: it is copied in. No gradient
// (set to none, and none arrived) contributes zero, whatever the slot held before.
void DataParallelState::gradient_into_bucket(Param& p, Bucket& b) {
  Tensor g = p.tensor.grad();
  Tensor view = b.grad->view(p.entry);
  if (!dp.has_optimizer || arithmetic(b.dtype)) {
    if (!g.defined()) {
      view.zero_();
    } else if (!(g.data_ptr() == view.data_ptr() && g.is_contiguous())) {
      view.copy_(g);
    }
    p.tensor.set_grad(view);
  } else if (g.defined()) {
    accumulate_into(view, g);
    p.tensor.set_grad(Tensor());
  }
}

void DataParallelState::on_ready(int index) {
  NoGradGuard no_grad;
  Param& p = params[static_cast<size_t>(index)];
  Bucket& b = buckets[static_cast<size_t>(p.bucket)];
  STRATA_CHECK(!(options.stage == 1 && reduced_in_place), dp.owner,
               ": a second backward pass without zero_grad() "
               "at stage 1 (the gradient buckets were reduced in place by the first; stages 0, 2 and 3 accumulate)");
  if (no_sync && !pass_active) {
    accumulate_locally(p, b);
    return;
  }
  if (!pass_active) begin_pass();
  STRATA_CHECK(!p.ready, dp.owner, ": parameter '", p.name,
               "' was marked ready twice in one backward pass (is it registered twice?)");
  mark_ready(p);
  // Stage 3: the unit's backward is over once all its gradients are in; free its parameters
  // now rather than at the end of backward (a unit is gathered for its own backward only).
  if (options.stage == 3 && b.pending == 0 && !pinned) release_unit(p.bucket);
  if (dp.overlap) launch_in_order(false);
  reclaim_completed();
}

// A synchronised pass starts on this state and its partner; one end-of-backward callback
// (which keeps them alive even if the public object goes away mid-backward) finalizes both.
void DataParallelState::begin_pass() {
  if (auto lead = leader.lock()) {
    lead->begin_pass();
    return;
  }
  for (DataParallelState* s : {this, follower.get()}) {
    if (s == nullptr) continue;
    s->pass_active = true;
    if (!s->rebuilt) s->ready_order.clear();
  }
  autograd::queue_final_callback([self = shared_from_this()] { self->finalize_all(); });
}

// finalize() of the leader, then of the follower even when the leader's failed (its ranks
// still issue the follower's collectives, so the others are not left waiting).
void DataParallelState::finalize_all() {
  std::exception_ptr failure;
  try {
    finalize();
  } catch (...) {
    failure = std::current_exception();
  }
  if (follower) {
    try {
      follower->finalize();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// The parameter's gradient joins its bucket (stages 2-3: the full gradient bucket, and only
// the shard is kept) and the bucket counts it.
void DataParallelState::mark_ready(Param& p) {
  Bucket& b = buckets[static_cast<size_t>(p.bucket)];
  note_gradient(p);
  p.ready = true;
  if (!rebuilt) ready_order.push_back(static_cast<int>(&p - params.data()));
  if (options.stage <= 1) {
    gradient_into_bucket(p, b);
  } else {
    ensure_full_gradient(*b.grad, device);
    Tensor g = p.tensor.grad();
    if (g.defined()) {
      if (b.local_sums) {
        accumulate_into(b.grad->view(p.entry), g);  // onto the no_sync() micro-batches' sum
      } else {
        b.grad->view(p.entry).copy_(g);
      }
    }
    p.tensor.set_grad(Tensor());
  }
  --b.pending;
}

// no_sync(): the gradient joins this rank's local sum, nothing is launched. Stages 0-1 sum in
// the gradient buckets as a synchronised pass does; stages 2-3 keep the full bucket.
void DataParallelState::accumulate_locally(Param& p, Bucket& b) {
  note_gradient(p);
  unsynced = true;
  if (options.stage <= 1) {
    gradient_into_bucket(p, b);
    return;
  }
  ensure_full_gradient(*b.grad, device);
  Tensor g = p.tensor.grad();
  if (g.defined()) accumulate_into(b.grad->view(p.entry), g);
  p.tensor.set_grad(Tensor());
  b.local_sums = true;
  if (options.stage == 3 && !local_pass_active) {
    // No finalize() runs for this pass: free the units at its end instead.
    local_pass_active = true;
    autograd::queue_final_callback([self = shared_from_this()] {
      self->local_pass_active = false;
      if (!self->pinned)
        for (size_t u = 0; u < self->buckets.size(); ++u) self->release_unit(static_cast<int>(u));
    });
  }
}

// Before the gradient moves into its bucket: does this rank hold one for the parameter?
void DataParallelState::note_gradient(Param& p) {
  const bool has = p.tensor.grad().defined();
  p.holds_grad = dp.has_optimizer ? (p.holds_grad || has) : has;
}

// Which parameters some rank holds a gradient for: the max over the ranks of this rank's
// flags, started after the buckets (every rank issues it at the same point).
dist::WorkPtr DataParallelState::share_gradient_flags(Tensor& flags) {
  std::vector<int64_t> mine(params.size());
  for (size_t i = 0; i < params.size(); ++i) mine[i] = params[i].holds_grad ? 1 : 0;
  flags = from_vector(mine, {static_cast<int64_t>(mine.size())}).to(group->tensor_device());
  return group->all_reduce(flags, dist::ReduceOp::Max);
}

// A parameter no rank held a gradient for keeps none (PyTorch's DDP leaves it untouched), so
// that the step skips it as a single process would; the others keep their averaged slots.
void DataParallelState::apply_gradient_flags(const Tensor& flags) {
  const std::vector<int64_t> any = flags.to_vector<int64_t>();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].any_rank_grad = any[i] != 0;
    if (!params[i].any_rank_grad) params[i].tensor.set_grad(Tensor());
  }
}

// Buckets start in index order on every rank (a bucket complete early waits for the ones
// before it), so the ranks issue the same collectives in the same order.
void DataParallelState::launch_in_order(bool force) {
  while (next_launch < buckets.size() && (force || buckets[next_launch].pending == 0)) {
    launch(buckets[next_launch]);
    ++next_launch;
    // HSDP: the bucket before this one has had a bucket's backward to finish its
    // reduce_scatter; its replicas' all_reduce starts now, in the same order on every rank.
    if (options.replicate != nullptr) replicate_up_to(next_launch - 1);
  }
}

// Waits for b's reduction; a failure is kept in reclaim_error (the first one) and drops the
// work: false then.
bool DataParallelState::wait_keeping_error(Bucket& b) {
  try {
    b.work->wait();
    return true;
  } catch (const Error& e) {
    if (reclaim_error.empty()) reclaim_error = e.what();
    b.work.reset();
    return false;
  }
}

// HSDP: for buckets [next_replicate, end), waits for the shard's reduce_scatter and starts
// its average over the replicate group (in place: the shard then holds the average over
// shard x replicate ranks). Issued in bucket order only, never on completion, so that every
// rank issues the shard and replicate groups' ops in one order (NCCL needs it).
void DataParallelState::replicate_up_to(size_t end) {
  const dist::ReduceOp op = dp.average ? dist::ReduceOp::Avg : dist::ReduceOp::Sum;
  for (; next_replicate < end; ++next_replicate) {
    Bucket& b = buckets[next_replicate];
    if (!b.work) continue;  // its reduce_scatter failed already (reclaim_error holds why)
    if (!wait_keeping_error(b)) continue;
    b.work = options.replicate->all_reduce(b.reduce_out, op);
  }
}

void DataParallelState::launch(Bucket& b) {
  const dist::ReduceOp op = dp.average ? dist::ReduceOp::Avg : dist::ReduceOp::Sum;
  if (options.stage == 0) {
    Tensor full = b.grad->data();
    b.work = hook ? hook(full, *group) : group->all_reduce(full, op);
  } else if (options.stage == 1) {
    // Not into grad_shard itself: it is a chunk of the input, and the process group would
    // send from a clone of the whole bucket (MPI forbids aliased buffers); a chunk-sized
    // output costs 1/N of that. finalize() copies it into the shard.
    b.reduce_out = empty({b.own_numel}, {.dtype = b.dtype, .device = device});
    b.work = group->reduce_scatter(b.reduce_out, b.grad->data(), op);
  } else {
    ensure_full_gradient(*b.grad, device);  // no gradient reached this bucket: zero
    b.reduce_out = b.shard_clean ? b.grad_shard : empty({b.own_numel}, {.dtype = b.dtype, .device = device});
    b.work = group->reduce_scatter(b.reduce_out, b.grad->data(), op);
  }
  b.launched = true;
}

// Stages 2-3: a bucket's full gradient is needed only until its reduce_scatter is done. Each
// gradient hook frees the buckets whose reduce_scatter has completed (without blocking), so
// that at most the buckets still in flight hold full gradients; finalize() does the rest.
// Stage 1: the same for the chunk-sized outputs.
void DataParallelState::reclaim_completed() {
  if (options.stage < 1) return;
  // HSDP: a bucket is reduced once its replicate all_reduce (not its reduce_scatter) is done.
  const size_t reduced = options.replicate != nullptr ? next_replicate : next_launch;
  for (size_t i = 0; i < reduced; ++i) {
    Bucket& b = buckets[i];
    if (!b.work || !b.work->is_completed()) continue;
    if (!wait_keeping_error(b)) continue;
    b.work.reset();
    finish_reduced_bucket(b);
  }
}

// Stages 1-3, once a bucket's reduce_scatter is done: its result joins the gradient shard
// (stage 1: replaces it) and, at stages 2-3, the full gradient is freed.
void DataParallelState::finish_reduced_bucket(Bucket& b) {
  if (options.stage == 1) {
    if (b.reduce_out.defined()) b.grad_shard.copy_(b.reduce_out);
    b.reduce_out = Tensor();
    return;
  }
  if (!b.reduce_out.is_same(b.grad_shard) && b.reduce_out.defined()) accumulate_into(b.grad_shard, b.reduce_out);
  b.reduce_out = Tensor();
  b.shard_clean = false;
  b.local_sums = false;  // no_sync() sums, if any, were part of this reduction
  if (b.grad->allocated() && !b.grad->released()) b.grad->release();
}

// The parameters that received no gradient in this pass, marked ready. Without
// unused_is_error they are reduced with what their slot holds (zero after zero_grad); with
// it, their slot is zeroed (the error comes after the reduction, which every rank still runs).
std::vector<int> DataParallelState::settle_unready() {
  std::vector<int> unused;
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = params[i];
    if (p.ready) continue;
    unused.push_back(static_cast<int>(i));
    if (dp.unused_is_error && options.stage <= 1) {
      Tensor view = buckets[static_cast<size_t>(p.bucket)].grad->view(p.entry);
      view.zero_();
      p.tensor.set_grad(view);
      p.ready = true;
      if (!rebuilt) ready_order.push_back(static_cast<int>(i));
      --buckets[static_cast<size_t>(p.bucket)].pending;
    } else if (options.stage <= 1) {
      mark_ready(p);
    } else {
      p.ready = true;
      if (!rebuilt) ready_order.push_back(static_cast<int>(i));
      --buckets[static_cast<size_t>(p.bucket)].pending;
    }
  }
  return unused;
}

// Waits for every launched reduction; returns the first failure ("" when none).
std::string DataParallelState::wait_all() {
  if (options.replicate != nullptr) replicate_up_to(next_launch);
  std::string error = std::move(reclaim_error);
  reclaim_error.clear();
  for (Bucket& b : buckets) {
    try {
      if (b.work) b.work->wait();
    } catch (const Error& e) {
      if (error.empty()) error = e.what();
    }
  }
  // A comm hook leaves the sum: average it here.
  if (error.empty() && hook && dp.average && world > 1 && options.stage == 0)
    for (Bucket& b : buckets) {
      Tensor full = b.grad->data();
      mul_(full, 1.0 / world);
    }
  return error;
}

// Ready for the next backward pass (`error`: a reduction failed, its results are unusable).
void DataParallelState::reset_pass(const std::string& error) {
  for (Bucket& b : buckets) {
    const bool pending_result = b.work != nullptr;  // not yet finished by reclaim_completed()
    b.work.reset();
    b.launched = false;
    b.pending = static_cast<int>(b.params.size());
    if (options.stage >= 1) {
      // Done already by reclaim_completed(), or no usable result (a failed reduction).
      if (!pending_result || !error.empty()) b.reduce_out = Tensor();
      finish_reduced_bucket(b);
    }
  }
  for (Param& p : params) p.ready = false;
  next_launch = 0;
  next_replicate = 0;
  pass_active = false;
  if (options.stage == 1) reduced_in_place = true;
  unsynced = false;
  if (options.stage == 3 && !pinned)
    for (size_t b = 0; b < buckets.size(); ++b) release_unit(static_cast<int>(b));
}

void DataParallelState::finalize() {
  NoGradGuard no_grad;
  const std::vector<int> unused = settle_unready();
  launch_in_order(true);  // every bucket not launched yet (all of them without overlap), in order
  // With unused parameters an error, every parameter has a gradient: nothing to agree on.
  Tensor flags;
  const dist::WorkPtr flags_work = dp.unused_is_error ? nullptr : share_gradient_flags(flags);
  std::string error = wait_all();
  try {
    if (flags_work) flags_work->wait();
    // HSDP: a parameter that some replica's ranks used has a gradient too.
    if (flags_work && options.replicate != nullptr && error.empty())
      options.replicate->all_reduce(flags, dist::ReduceOp::Max)->wait();
  } catch (const Error& e) {
    if (error.empty()) error = e.what();
  }
  const bool first_pass = !rebuilt;
  reset_pass(error);
  STRATA_CHECK(error.empty(), dp.owner, ": gradient reduction failed: ", error);
  // The rebuild's broadcast comes before the unused-parameter error so that a rank that
  // throws has issued exactly the collectives of the ranks that do not.
  if (first_pass) rebuild();
  if (flags_work) apply_gradient_flags(flags);
  if (!unused.empty() && dp.unused_is_error) throw Error(unused_message(*this, unused));
  if (!dp.has_optimizer) return;
  drop_master_grads();
  prepare_master_grads();
}

// The inner optimizer reads the gradient of each piece from master_grad (a view of the
// gradient shard, or its conversion to the master dtype).
void DataParallelState::prepare_master_grads() {
  NoGradGuard no_grad;
  for (Bucket& b : buckets) {
    b.master_grad = b.master_separate ? b.grad_shard.to(master_dtype) : b.grad_shard;
    for (size_t k = 0; k < b.pieces.size(); ++k) {
      Tensor& piece = b.pieces[k];
      if (!params[static_cast<size_t>(b.piece_param[k])].any_rank_grad) {
        piece.set_grad(Tensor());  // no rank had a gradient for it: the inner optimizer skips it
        continue;
      }
      piece.set_grad(b.master_grad.narrow(0, b.piece_begin[k], piece.numel()).view(piece.shape()));
    }
  }
  grads_prepared = true;
}

void DataParallelState::drop_master_grads() {
  for (Bucket& b : buckets) {
    for (Tensor& piece : b.pieces) piece.set_grad(Tensor());
    b.master_grad = Tensor();
  }
  grads_prepared = false;
}

// Zeroes the gradients: the buckets (stages 0-1) or this rank's gradient shard, discarding
// no_sync() sums. set_to_none also clears .grad() and which parameters had gradients.
void DataParallelState::zero_gradients(bool set_to_none) {
  NoGradGuard no_grad;
  for (Bucket& b : buckets) {
    if (options.stage <= 1) {
      b.grad->data().zero_();
    } else {
      b.grad_shard.zero_();
      b.shard_clean = true;
      if (b.local_sums && b.grad->allocated() && !b.grad->released()) b.grad->release();
      b.local_sums = false;
    }
  }
  unsynced = false;
  if (set_to_none || options.stage >= 2 || (dp.has_optimizer && !arithmetic(param_dtype)))
    for (auto& p : params) p.tensor.set_grad(Tensor());
  if (set_to_none)
    for (auto& p : params) p.holds_grad = p.any_rank_grad = false;
  reduced_in_place = false;
  drop_master_grads();
}

}  // namespace strata::parallel
