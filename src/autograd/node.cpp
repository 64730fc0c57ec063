#include "strata/autograd/node.h"

#include <atomic>

#include "autograd/accumulate_grad.h"
#include "autograd/anomaly_check.h"
#include "backend/dispatch/accumulate.h"
#include "strata/autograd/anomaly_mode.h"
#include "strata/autograd/engine.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"

namespace strata {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_next_sequence_nr{0};

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::vector<autograd::SavedTensor> saved, autograd::BackwardFn fn)
      : name_(std::move(name)), saved_(std::move(saved)), fn_(std::move(fn)) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    STRATA_CHECK(fn_ != nullptr, "backward through ", name_,
                 " a second time: its saved tensors were freed by the first backward; pass retain_graph=true to "
                 "the first backward() to keep them");
    for (const autograd::SavedTensor& s : saved_) autograd::check_unmodified(s, name_);
    autograd::BackwardContext ctx;
    ctx.grads = std::move(grad_outputs);
    ctx.needs_input_grad.reserve(next_edges_.size());
    for (const Edge& e : next_edges_) ctx.needs_input_grad.push_back(e.node != nullptr);
    return fn_(ctx);
  }
  std::string_view name() const override { return name_; }
  void release() override {
    fn_ = nullptr;
    saved_.clear();
  }

 private:
  std::string name_;
  std::vector<autograd::SavedTensor> saved_;  // what fn_ reads, with its version when saved
  autograd::BackwardFn fn_;
};

AutogradMeta& ensure_meta(const Tensor& t) {
  auto& meta = t.impl()->autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  return *meta;
}

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1)) {}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  for (Edge& e : next_edges_)
    if (e.node) stack.push_back(std::move(e.node));
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n.use_count() == 1) {  // we hold the last reference: take its edges before it dies
      for (Edge& e : n->next_edges_)
        if (e.node) stack.push_back(std::move(e.node));
      n->next_edges_.clear();
    }
  }
}

namespace autograd {

bool is_16bit_float(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

void accumulate_gradient_(Tensor& dst, const Tensor& src) {
  if (!is_16bit_float(dst.dtype())) {
    backend::add_into(dst, src, "gradient accumulation");
    return;
  }
  STRATA_CHECK(src.dtype() == dst.dtype(), "gradient accumulation: a ", src.dtype(), " gradient of shape ", src.shape(),
               " cannot be added to a ", dst.dtype(), " gradient");
  // float32 holds the sum of two 16-bit values exactly (or within far less than a 16-bit
  // ulp), so copy_'s rounding is the only one.
  dst.copy_(backend::add_same_shape(dst.to(DType::Float32), src.to(DType::Float32), "gradient accumulation"));
}

Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  if (!is_16bit_float(a.dtype())) return backend::add_same_shape(a, b, "gradient accumulation");
  STRATA_CHECK(b.dtype() == a.dtype(), "gradient accumulation: a ", b.dtype(), " gradient of shape ", b.shape(),
               " cannot be added to a ", a.dtype(), " gradient");
  return backend::add_same_shape(a.to(DType::Float32), b.to(DType::Float32), "gradient accumulation").to(a.dtype());
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {
  sequence_nr_ = kPriority;
  output_meta_.push_back({leaf_->shape, leaf_->dtype, leaf_->storage->device()});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor leaf(leaf_);
  AutogradMeta& meta = *leaf_->autograd;
  Tensor& incoming = grad_outputs[0];
  if (meta.grad_hooks) incoming = meta.grad_hooks->run(std::move(incoming), output_meta_[0], "a leaf");
  if (meta.grad.defined()) {
    accumulate_gradient_(meta.grad, incoming);
  } else if (incoming.impl_ptr().use_count() == 1 && incoming.storage().use_count() == 1 && incoming.is_contiguous() &&
             incoming.offset() == 0) {
    meta.grad = std::move(incoming);  // nobody else sees it: adopt without a copy
  } else {
    meta.grad = incoming.clone();
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(leaf);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta& meta = ensure_meta(t);
  if (meta.grad_fn) return Edge{meta.grad_fn, meta.output_nr};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void check_unmodified(const SavedTensor& saved, std::string_view saved_by) {
  const Tensor& t = saved.tensor;
  if (!t.defined()) return;
  STRATA_CHECK(t.version() == saved.version,
               "one of the variables needed for gradient computation has been modified by an inplace operation: [",
               t.dtype(), " ", t.shape(), "] is at version ", t.version(), "; expected version ", saved.version,
               " instead (saved by ", saved_by,
               "). Hint: clone() the tensor before changing it in place, or change it after backward");
}

// A saved handle must not own autograd state: an output's own handle would own the node that
// keeps it (a cycle), an input's would keep its graph alive. Call sites pass the detached
// handles their lambdas capture, so this copies only when one passes the tensor itself.
void own_saved_handles(std::vector<SavedTensor>& saved, const std::vector<Tensor>& outputs) {
  for (SavedTensor& s : saved) {
    if (!s.tensor.defined()) continue;
    bool is_output = false;
    for (const Tensor& out : outputs) is_output = is_output || out.is_same(s.tensor);
    if (is_output || s.tensor.impl()->autograd) s.tensor = s.tensor.detach();
  }
}

void record(std::string name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            std::vector<SavedTensor> saved, BackwardFn fn) {
  if (anomaly_mode_enabled()) check_forward_outputs(name, outputs);  // before any history is attached
  own_saved_handles(saved, outputs);
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(saved), std::move(fn));
  auto& edges = node->mutable_next_edges();
  edges.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    edges.push_back(in.defined() && in.requires_grad() ? gradient_edge(in) : Edge{});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    AutogradMeta& meta = ensure_meta(out);
    STRATA_CHECK(!meta.grad_fn && !meta.requires_grad, "autograd: output ", i, " of ", node->name(),
                 " already has a history; ops must return new tensors");
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
    node->mutable_output_meta().push_back({out.shape(), out.dtype(), out.device()});
  }
}

}  // namespace autograd

// --- Tensor's autograd methods ---

bool Tensor::requires_grad() const {
  const auto& meta = checked("requires_grad()").autograd;
  return meta && meta->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  STRATA_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can be marked (this one comes from ", grad_fn()->name(),
               "); use detach() first");
  STRATA_CHECK(!requires_grad || is_floating(dtype()), "set_requires_grad: a ", dtype(),
               " tensor cannot require grad (floating dtypes only)");
  ensure_meta(*this).requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const {
  const auto& meta = checked("is_leaf()").autograd;
  return !meta || !meta->grad_fn;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> kNone;
  const auto& meta = checked("grad_fn()").autograd;
  return meta ? meta->grad_fn : kNone;
}

Tensor Tensor::grad() const {
  const auto& meta = checked("grad()").autograd;
  return meta ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) {
    STRATA_CHECK(grad.shape() == shape() && grad.dtype() == dtype(), "set_grad: gradient of shape ", grad.shape(),
                 " and dtype ", grad.dtype(), " does not match tensor of shape ", shape(), " and dtype ", dtype());
  }
  ensure_meta(*this).grad = grad;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>(checked("detach()"));
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  Tensor roots[1] = {*this};
  Tensor grads[1] = {grad};
  autograd::backward(roots, grads, retain_graph);
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) {
  STRATA_CHECK(is_leaf() && requires_grad(),
               "register_post_accumulate_grad_hook: only leaf tensors that require grad accumulate gradients");
  ensure_meta(*this).post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace strata
