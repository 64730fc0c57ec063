#include "strata/parallel/pipeline.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <sstream>
#include <string>

#include "strata/autograd/engine.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The training schedule's forwards and activation transfers alone (evaluation). Dropping the
// backwards and gradient transfers on both sides of every pair keeps the matching order of
// what is left, and adds no wait that the full schedule did not have.
PipelineSchedule forwards_only(const PipelineSchedule& full) {
  PipelineSchedule out = full;
  auto keep = [](const PipelineAction& a) {
    return a.kind == PipelineActionKind::Forward || a.kind == PipelineActionKind::SendActivation ||
           a.kind == PipelineActionKind::RecvActivation;
  };
  for (auto& actions : out.actions) {
    std::vector<PipelineAction> kept;
    for (PipelineAction& a : actions) {
      if (a.kind != PipelineActionKind::CommBatch) {
        if (keep(a)) kept.push_back(std::move(a));
        continue;
      }
      std::vector<PipelineAction> batch;
      for (PipelineAction& t : a.batch)
        if (keep(t)) batch.push_back(std::move(t));
      if (batch.size() == 1) {
        kept.push_back(std::move(batch.front()));
      } else if (!batch.empty()) {
        a.batch = std::move(batch);
        kept.push_back(std::move(a));
      }
    }
    actions = std::move(kept);
  }
  return out;
}

// One micro-batch's forwards through the p*v stages in order (forward_logits): each rank
// receives a stage's input, runs it and sends its output on. One micro-batch cannot deadlock.
PipelineSchedule forward_chain(int ranks, int chunks) {
  PipelineSchedule out;
  out.kind = PipelineScheduleKind::GPipe;
  out.shape = {.ranks = ranks, .micro_batches = 1, .chunks = chunks};
  out.actions.resize(static_cast<size_t>(ranks));
  const int S = ranks * chunks;
  for (int s = 0; s < S; ++s) {
    const int r = s % ranks, c = s / ranks;
    auto& a = out.actions[static_cast<size_t>(r)];
    if (s > 0)
      a.push_back({.kind = PipelineActionKind::RecvActivation, .micro_batch = 0, .chunk = c, .peer = (s - 1) % ranks});
    a.push_back({.kind = PipelineActionKind::Forward, .micro_batch = 0, .chunk = c});
    if (s + 1 < S)
      a.push_back({.kind = PipelineActionKind::SendActivation, .micro_batch = 0, .chunk = c, .peer = (s + 1) % ranks});
  }
  return out;
}

// What two neighbouring stages must agree on before the first transfer of a batch shape.
struct Agreement {
  int64_t schedule, micro_batches, chunks, batch_rows, seq_len, hidden, dtype;
  static constexpr int64_t kMagic = 0x5049504531;  // "PIPE1": not garbage from a stray send

  Tensor pack() const {
    Tensor t = empty({8}, {.dtype = DType::Int64});
    int64_t* d = t.data<int64_t>();
    const int64_t v[8] = {kMagic, schedule, micro_batches, chunks, batch_rows, seq_len, hidden, dtype};
    std::copy(v, v + 8, d);
    return t;
  }
  // Differences from `other` (what the neighbour sent), as "m 4 vs 8; ...".
  std::string differences(const Tensor& other) const {
    const int64_t* o = other.data<int64_t>();
    if (o[0] != kMagic) return "the neighbour sent no pipeline agreement (is it running a pipeline step?)";
    std::ostringstream os;
    auto field = [&](const char* name, int64_t mine, int64_t theirs) {
      if (mine != theirs) os << (os.tellp() > 0 ? "; " : "") << name << " " << mine << " here vs " << theirs;
    };
    field("schedule (kind)", schedule, o[1]);
    field("micro-batches", micro_batches, o[2]);
    field("chunks per rank", chunks, o[3]);
    field("micro-batch rows", batch_rows, o[4]);
    field("activation sequence length", seq_len, o[5]);
    field("hidden size", hidden, o[6]);
    field("activation dtype (code)", dtype, o[7]);
    return os.str();
  }
};

// Transfers' tensors kept for the life of the process (see ~StepState), never freed.
std::vector<std::vector<Tensor>>& abandoned_transfers() {
  static auto* kept = new std::vector<std::vector<Tensor>>();
  return *kept;
}

}  // namespace

struct Pipeline::StepState {
  bool training = true;
  Device device;  // where this stage computes: received activations and gradients land here
  int64_t rows = 0, seq_len = 0, local_seq_len = 0;
  std::vector<Tensor> tokens, targets;                        // per micro-batch
  std::vector<double> weights;                                // each micro-batch's share of the batch's loss
  std::vector<int64_t> counts;                                // each micro-batch's targets on this rank
  struct Slot {                                               // one (micro-batch, chunk)
    Tensor input;                                             // received activation (the leaf whose gradient goes back)
    Tensor output;                                            // the chunk's output, graph attached (not the last stage)
    Tensor loss;                                              // the weighted loss (last stage)
    Tensor grad_out;                                          // received gradient of output
    Tensor grad_in;                                           // input's gradient, to send
    std::shared_ptr<dist::Work> input_arrival, grad_arrival;  // the batch that brings input, grad_out
  };
  std::map<std::pair<int, int>, Slot> slots;
  std::deque<Tensor> self_mailbox;  // p == 1: chunk c's output waiting for chunk c+1
  std::vector<std::pair<std::shared_ptr<dist::Work>, std::vector<Tensor>>> posted;  // with the tensors they use
  double loss = 0;
  bool keep_logits = false;  // forward_logits: the last stage keeps the full logits
  Tensor logits;
  int held = 0;
  double compute_seconds = 0;

  Slot& slot(int micro_batch, int chunk) { return slots[{micro_batch, chunk}]; }

  // After a failure mid-step (a timeout, a disagreeing rank) transfers may still be posted,
  // and MPI writes a receive buffer whenever its message lands: their tensors are kept for
  // the life of the process rather than freed under it (the group is unusable by then).
  ~StepState() {
    for (auto& [work, tensors] : posted)
      if (work && !work->is_completed()) abandoned_transfers().push_back(std::move(tensors));
  }
};

Pipeline::Pipeline(nn::CausalLM& model, dist::ProcessGroup& group, PipelinePartition partition, PipelineOptions options)
    : model_(model), group_(group), partition_(std::move(partition)), options_(options) {
  const int p = group.size(), v = options.chunks;
  STRATA_CHECK(options.ddp == nullptr || options.zero == nullptr,
               "Pipeline: give data parallelism as ddp or as zero, not both");
  STRATA_CHECK(options.zero == nullptr || options.zero->stage() <= 2, "Pipeline: ZeRO stage ",
               options.zero == nullptr ? 0 : options.zero->stage(),
               " cannot run under pipeline parallelism (its per-unit parameter gathers would interleave with the "
               "schedule's micro-batches); use stage 1 or 2 over the data group");
  STRATA_CHECK(
      !model.has_auxiliary_loss(),
      "Pipeline: the model's blocks add auxiliary losses (a mixture of experts' load-balancing or z-loss), which ",
      "pipeline stages do not carry into the loss; set their coefficients to 0 to pipeline it");
  STRATA_CHECK(options.micro_batches >= 1, "Pipeline: micro_batches must be at least 1, got ", options.micro_batches);
  schedule_ =
      make_pipeline_schedule(options.schedule, {.ranks = p, .micro_batches = options.micro_batches, .chunks = v});
  forward_schedule_ = forwards_only(schedule_);
  chain_schedule_ = forward_chain(p, v);
  check_partition(partition_, model.num_layers(), p, v);
  const nn::ModelPart expected = stage_part(partition_, p, group.rank());
  const nn::ModelPart& have = model.part();
  STRATA_CHECK(have.embedding == expected.embedding && have.head == expected.head && *have.blocks == *expected.blocks,
               "Pipeline: the model on pipeline rank ", group.rank(), " of group ", group.name(),
               " was not built as its stage (nn::ModelPart from parallel::stage_part(partition, ", p, ", ",
               group.rank(), ") with partition ", partition_.to_string(), ")");
  if (p > 1 && !model.tied_parameters().empty()) {
    // Every rank takes part in the split: the first and last stage's ranks together, the others alone.
    std::vector<int> ranks;
    if (group.rank() == 0 || group.rank() == p - 1) {
      ranks = {0, p - 1};
    } else {
      ranks = {group.rank()};
    }
    auto split = group.split(ranks, "tied(" + group.name() + ")");
    if (ranks.size() == 2) tied_group_ = std::move(split);
  }
}

Pipeline::~Pipeline() = default;

std::function<bool(const std::string&)> duplicate_parameters(const nn::CausalLM& stage,
                                                             const dist::ProcessGroup& pipeline) {
  std::vector<std::string> copies;
  // The first stage counts them; the last one holds the copies.
  if (pipeline.size() > 1 && pipeline.rank() == pipeline.size() - 1) copies = stage.tied_parameters();
  return [copies](const std::string& name) { return std::find(copies.begin(), copies.end(), name) != copies.end(); };
}

std::function<bool(const std::string&)> Pipeline::duplicate_parameters() const {
  return parallel::duplicate_parameters(model_, group_);
}

Device Pipeline::model_device() const {
  const std::vector<Tensor> parameters = model_.parameters();
  return parameters.empty() ? Device::cpu() : parameters.front().device();
}

double Pipeline::train_step(const Tensor& tokens, const Tensor& targets) {
  const Device device = model_device();
  return run(tokens.to(device), targets.to(device), Mode::Train).item();
}

double Pipeline::eval_loss(const Tensor& tokens, const Tensor& targets) {
  NoGradGuard no_grad;
  const Device device = model_device();
  return run(tokens.to(device), targets.to(device), Mode::Eval).item();
}

Tensor Pipeline::forward_logits(const Tensor& tokens) {
  NoGradGuard no_grad;
  const Tensor here = tokens.to(model_device());
  return run(here, here, Mode::Logits);
}

void Pipeline::agree_shapes(int64_t batch, int64_t seq_len) {
  if (agreed_shape_ == std::pair{batch, seq_len}) return;
  const int p = group_.size(), r = group_.rank(), v = options_.chunks;
  model_.layer_factory().begin_forward(seq_len);
  const Agreement mine{static_cast<int64_t>(options_.schedule),
                       options_.micro_batches,
                       v,
                       batch / options_.micro_batches,
                       model_.layer_factory().local_sequence_length(seq_len),
                       model_.hidden_size(),
                       static_cast<int64_t>(model_.compute_dtype())};
  if (p > 1) {
    // Activations go r -> r+1, and p-1 -> 0 between chunks when v > 1.
    const bool sends = r + 1 < p || v > 1;
    const bool receives = r > 0 || v > 1;
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    Tensor out = mine.pack(), in = empty({8}, {.dtype = DType::Int64});
    std::vector<dist::P2POp> ops;
    if (sends) ops.push_back(dist::P2POp::send(out, next));
    if (receives) ops.push_back(dist::P2POp::recv(in, prev));
    group_.batch_send_recv(ops)->wait();
    if (receives) {
      const std::string diff = mine.differences(in);
      STRATA_CHECK(diff.empty(), "Pipeline: pipeline rank ", r, " (global rank ", group_.global_ranks()[r],
                   ") and the stage before it, pipeline rank ", prev, " (global rank ", group_.global_ranks()[prev],
                   ") of group ", group_.name(), " disagree: ", diff,
                   "; every rank of a pipeline must run the same schedule, micro-batches, batch and model width");
    }
  }
  agreed_shape_ = {batch, seq_len};
}

Tensor Pipeline::run(const Tensor& tokens, const Tensor& targets, Mode mode) {
  const auto step_start = Clock::now();
  const bool training = mode == Mode::Train;
  auto step_span = profile::Timeline::span(options_.timeline, training ? "pipeline step" : "pipeline forward", "step");
  const int m = mode == Mode::Logits ? 1 : options_.micro_batches;
  STRATA_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::Int64,
               "Pipeline: tokens must be int64 [batch, time], got ", tokens.dtype(), " ", tokens.shape());
  STRATA_CHECK(targets.shape() == tokens.shape() && targets.dtype() == DType::Int64, "Pipeline: targets ",
               targets.dtype(), " ", targets.shape(), " must be int64 of the tokens' shape ", tokens.shape());
  // T: this rank's tokens of each sequence (all of them, or its chunks under a context split).
  const int64_t B = tokens.size(0), T = tokens.size(1);
  STRATA_CHECK(B % m == 0, "Pipeline: the batch of ", B, " rows does not divide into ", m, " micro-batches");
  STRATA_CHECK(T * model_.context_degree() <= model_.context_length(), "Pipeline: sequence length ",
               T * model_.context_degree(), " exceeds the context of ", model_.context_length());
  if (mode != Mode::Logits) agree_shapes(B, T);
  cpu_allocator::reset_peak();
  stats_.peak_in_flight = 0;
  const int64_t bytes_at_start = static_cast<int64_t>(cpu_allocator::stats().in_use_bytes);

  StepState st;
  st.training = training;
  st.device = tokens.device();  // the callers moved tokens to model_device()
  st.keep_logits = mode == Mode::Logits;
  st.rows = B / m;
  st.seq_len = T;
  model_.layer_factory().begin_forward(T);
  st.local_seq_len = model_.layer_factory().local_sequence_length(T);
  int64_t counted = 0;
  std::vector<int64_t> per_micro_batch(static_cast<size_t>(m), 0);
  for (int i = 0; i < m; ++i) {
    st.tokens.push_back(tokens.narrow(0, i * st.rows, st.rows).contiguous());
    st.targets.push_back(targets.narrow(0, i * st.rows, st.rows).contiguous());
    for (int64_t t : st.targets.back().to_vector<int64_t>()) per_micro_batch[static_cast<size_t>(i)] += t != -100;
  }
  st.counts = per_micro_batch;
  // Under a context split each rank counts its own chunks: the shares are of the whole
  // sequences' targets, summed over the split's ranks.
  if (nn::ContextSplit* split = model_.context_split())
    per_micro_batch = split->sum_over_ranks(from_vector(per_micro_batch, {m})).to_vector<int64_t>();
  for (int64_t c : per_micro_batch) counted += c;
  // Mean over the batch's counted targets = sum over micro-batches of (their mean x their share).
  for (int i = 0; i < m; ++i)
    st.weights.push_back(counted > 0 ? static_cast<double>(per_micro_batch[static_cast<size_t>(i)]) / counted
                                     : 1.0 / m);

  {
    // Data parallelism accumulates locally until finish_gradients().
    std::optional<DistributedDataParallel::NoSyncGuard> ddp_guard;
    std::optional<ZeroOptimizer::NoSyncGuard> zero_guard;
    if (training && options_.ddp != nullptr) ddp_guard.emplace(*options_.ddp);
    if (training && options_.zero != nullptr) zero_guard.emplace(*options_.zero);
    const PipelineSchedule& schedule = training ? schedule_ : mode == Mode::Eval ? forward_schedule_ : chain_schedule_;
    for (const PipelineAction& action : schedule.actions[static_cast<size_t>(group_.rank())]) {
      if (action.kind == PipelineActionKind::Forward) {
        forward(st, action.micro_batch, action.chunk);
      } else if (action.kind == PipelineActionKind::Backward) {
        backward(st, action.micro_batch, action.chunk);
      } else {
        post_transfers(st, action);
      }
    }
    auto wait_span = profile::Timeline::span(options_.timeline, "send wait (end of step)", "comm");
    for (auto& [work, tensors] : st.posted) work->wait();
  }
  if (training) finish_gradients();

  // The loss (or logits) is known on the last stage; every rank returns it.
  Tensor result = mode == Mode::Logits ? st.logits : full({1}, st.loss, {.dtype = DType::Float64});
  if (mode == Mode::Logits && !is_last_stage())
    result = empty({B, T, model_.vocab_size()}, {.dtype = model_.compute_dtype()});
  if (group_.size() > 1) {
    auto span = profile::Timeline::span(options_.timeline, "broadcast result", "comm");
    group_.broadcast(result, group_.size() - 1)->wait();
  }
  stats_.step_seconds = seconds_since(step_start);
  stats_.compute_seconds = st.compute_seconds;
  stats_.peak_activation_bytes = static_cast<int64_t>(cpu_allocator::stats().peak_in_use_bytes) - bytes_at_start;
  return result;
}

void Pipeline::forward(StepState& st, int micro_batch, int chunk) {
  const int p = group_.size(), stage = schedule_.stage(group_.rank(), chunk);
  const int last = schedule_.num_stages() - 1;
  StepState::Slot& slot = st.slot(micro_batch, chunk);
  Tensor x;
  if (stage == 0) {
    x = st.tokens[static_cast<size_t>(micro_batch)];
  } else {
    if (slot.input_arrival) {
      auto wait =
          profile::Timeline::span(options_.timeline, "recv wait (activation)", "comm", {{"micro_batch", micro_batch}});
      slot.input_arrival->wait();
    }
    STRATA_CHECK(slot.input.defined(), "Pipeline: internal error: forward(micro-batch ", micro_batch, ", chunk ", chunk,
                 ") on pipeline rank ", group_.rank(), " has no input (", p, " ranks)");
    if (st.training) slot.input.set_requires_grad(true);
    x = slot.input;
  }
  const auto start = Clock::now();
  {
    auto span = profile::Timeline::span(options_.timeline, "forward", "compute",
                                        {{"micro_batch", micro_batch}, {"chunk", chunk}});
    const nn::CausalLM::Positions positions{0, st.seq_len * model_.context_degree()};
    model_.layer_factory().begin_forward(st.seq_len);
    if (stage == 0) x = model_.embed(x, positions);
    const auto& blocks = partition_.stage_blocks[static_cast<size_t>(stage)];
    Tensor y = model_.run_blocks(blocks, x, positions);
    if (stage == last && st.keep_logits) {
      st.logits = model_.layer_factory().gather_logits(model_.head(y), model_.vocab_size()).contiguous();
    } else if (stage == last) {
      Tensor logits = model_.head(y);
      const int64_t N = logits.numel() / logits.size(-1);
      Tensor loss = model_.layer_factory().cross_entropy(logits.reshape({N, logits.size(-1)}),
                                                         st.targets[static_cast<size_t>(micro_batch)].reshape({N}),
                                                         model_.padded_vocab_size(), model_.vocab_size());
      if (nn::ContextSplit* split = model_.context_split())  // the mean over the whole sequences
        loss = split->global_mean(
            loss, full({}, static_cast<double>(st.counts[static_cast<size_t>(micro_batch)]), {.dtype = loss.dtype()}));
      const double weight = st.weights[static_cast<size_t>(micro_batch)];
      st.loss += loss.item() * weight;
      if (st.training) slot.loss = mul(loss, weight * loss_scale_);
    } else {
      slot.output = y;
    }
  }
  st.compute_seconds += seconds_since(start);
  if (!st.training) {
    slot.input = Tensor();
  } else {
    ++st.held;
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, st.held);
  }
}

void Pipeline::backward(StepState& st, int micro_batch, int chunk) {
  const int stage = schedule_.stage(group_.rank(), chunk);
  StepState::Slot& slot = st.slot(micro_batch, chunk);
  if (slot.grad_arrival) {
    auto wait =
        profile::Timeline::span(options_.timeline, "recv wait (gradient)", "comm", {{"micro_batch", micro_batch}});
    slot.grad_arrival->wait();
  }
  const auto start = Clock::now();
  {
    auto span = profile::Timeline::span(options_.timeline, "backward", "compute",
                                        {{"micro_batch", micro_batch}, {"chunk", chunk}});
    model_.layer_factory().begin_forward(st.seq_len);
    if (slot.loss.defined()) {
      autograd::backward(std::vector<Tensor>{slot.loss});
    } else {
      STRATA_CHECK(slot.output.defined() && slot.grad_out.defined(), "Pipeline: internal error: backward(micro-batch ",
                   micro_batch, ", chunk ", chunk, ") on pipeline rank ", group_.rank(),
                   " before its forward or gradient");
      autograd::backward(std::vector<Tensor>{slot.output}, std::vector<Tensor>{slot.grad_out});
    }
  }
  st.compute_seconds += seconds_since(start);
  if (stage > 0) {
    Tensor g = slot.input.grad();
    // A chunk whose output does not depend on its input (it cannot happen with blocks, but
    // the neighbour still waits for a tensor) sends zeros.
    slot.grad_in = g.defined() ? g.contiguous() : zeros_like(slot.input);
  }
  slot.input = Tensor();
  slot.output = Tensor();
  slot.loss = Tensor();
  slot.grad_out = Tensor();
  --st.held;
}

void Pipeline::post_transfers(StepState& st, const PipelineAction& action) {
  const Shape hidden{st.rows, st.local_seq_len, model_.hidden_size()};
  const TensorOptions dtype{.dtype = model_.compute_dtype(), .device = st.device};
  std::vector<dist::P2POp> ops;
  std::vector<Tensor> keep;  // alive until the batch completes
  std::vector<std::shared_ptr<dist::Work>*> arrivals;
  auto span = profile::Timeline::span(options_.timeline, "send/recv (post)", "comm");
  // Sends first: with one rank (p == 1), a chunk's output goes to the next chunk through a
  // local mailbox, in the schedule's order.
  std::vector<const PipelineAction*> order;
  for (const PipelineAction& t : action.transfers())
    if (t.is_send()) order.push_back(&t);
  for (const PipelineAction& t : action.transfers())
    if (!t.is_send()) order.push_back(&t);
  for (const PipelineAction* t : order) {
    StepState::Slot& slot = st.slot(t->micro_batch, t->chunk);
    const bool local = t->peer == group_.rank();
    switch (t->kind) {
      case PipelineActionKind::SendActivation: {
        Tensor out = slot.output.detach().contiguous();
        if (!st.training) slot.output = Tensor();
        if (local) {
          st.self_mailbox.push_back(out);
        } else {
          ops.push_back(dist::P2POp::send(out, t->peer));
          keep.push_back(out);
        }
        break;
      }
      case PipelineActionKind::SendGrad: {
        if (local) {
          st.self_mailbox.push_back(slot.grad_in);
        } else {
          ops.push_back(dist::P2POp::send(slot.grad_in, t->peer));
          keep.push_back(slot.grad_in);
        }
        slot.grad_in = Tensor();
        break;
      }
      case PipelineActionKind::RecvActivation:
      case PipelineActionKind::RecvGrad: {
        Tensor& into = t->kind == PipelineActionKind::RecvActivation ? slot.input : slot.grad_out;
        if (local) {
          STRATA_CHECK(!st.self_mailbox.empty(), "Pipeline: internal error: ", to_string(*t),
                       " before the matching send");
          into = st.self_mailbox.front();
          st.self_mailbox.pop_front();
        } else {
          into = empty(hidden, dtype);
          ops.push_back(dist::P2POp::recv(into, t->peer));
          keep.push_back(into);
          arrivals.push_back(t->kind == PipelineActionKind::RecvActivation ? &slot.input_arrival : &slot.grad_arrival);
        }
        break;
      }
      default: STRATA_CHECK(false, "Pipeline: internal error: ", to_string(*t), " is not a transfer");
    }
  }
  if (ops.empty()) return;
  if (options_.timeline != nullptr && options_.timeline->recording()) {
    int64_t bytes = 0, sends = 0;
    for (const dist::P2POp& op : ops) {
      bytes += static_cast<int64_t>(op.tensor.nbytes());
      sends += op.kind == dist::P2POp::Kind::Send;
    }
    span.end();
    span = options_.timeline->span(
        "send/recv (post)", "comm",
        {{"sends", sends}, {"recvs", static_cast<int64_t>(ops.size()) - sends}, {"bytes", bytes}});
  }
  std::shared_ptr<dist::Work> work = group_.batch_send_recv(ops);
  for (auto* arrival : arrivals) *arrival = work;
  st.posted.emplace_back(work, std::move(keep));
}

void Pipeline::finish_gradients() {
  if (tied_group_ != nullptr) {
    // GPT's token embedding on the first stage and its copy as the head on the last: both get
    // the sum of their gradients, as the one tensor of the whole model would.
    auto span = profile::Timeline::span(options_.timeline, "all_reduce tied", "comm");
    const auto params = model_.named_parameters();
    for (const std::string& name : model_.tied_parameters()) {
      Tensor p;
      for (const auto& [n, t] : params)
        if (n == name) p = t;
      STRATA_CHECK(p.defined(), "Pipeline: tied parameter '", name, "' is missing on pipeline rank ", group_.rank());
      Tensor g = options_.zero != nullptr ? options_.zero->local_gradient(name) : p.grad();
      if (!g.defined()) {
        g = zeros_like(p);
        p.set_grad(g);
      }
      tied_group_->all_reduce(g)->wait();
    }
  }
  auto span = profile::Timeline::span(options_.timeline, "data-parallel reduce", "comm");
  if (options_.ddp != nullptr) options_.ddp->sync_gradients();
  if (options_.zero != nullptr) options_.zero->sync_gradients();
}

}  // namespace strata::parallel
