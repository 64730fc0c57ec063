#include "strata/ops/autocast.h"

#include <unordered_map>
#include <utility>

#include "ops/autocast_cast.h"
#include "strata/autograd/function.h"
#include "strata/core/error.h"

namespace strata::autocast {
namespace {

struct ActiveState {
  DType dtype;
  Options options;
};

// One cast copy of a parameter; valid while the parameter keeps its storage, its version
// and the dtype it was cast to. `source` keeps the TensorImpl (the key) alive, so the
// address cannot be reused by another tensor while the entry exists.
struct CacheEntry {
  Tensor source;
  const void* data = nullptr;
  uint64_t version = 0;
  DType dtype = DType::Float32;
  Tensor cast;
};

thread_local std::optional<ActiveState> current;
thread_local int enabled_depth = 0;
thread_local std::unordered_map<const void*, CacheEntry> cache;
thread_local Counters totals;

}  // namespace

Scope::Scope(DType dtype, bool enabled) : Scope(dtype, Options{}, enabled) {}

Scope::Scope(DType dtype, Options options, bool enabled) : enabled_(enabled) {
  STRATA_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16, "autocast::Scope: dtype ", dtype,
               " is not a 16-bit floating type (bfloat16 or float16)");
  if (current) previous_ = State{current->dtype, current->options};
  if (enabled) {
    current = ActiveState{dtype, options};
    ++enabled_depth;
  }
}

Scope::~Scope() {
  if (!enabled_) return;
  current = previous_ ? std::optional<ActiveState>(ActiveState{previous_->dtype, previous_->options}) : std::nullopt;
  // As torch: the cast copies live until the outermost scope ends (one step's forward);
  // the products' backward nodes hold the copies they saved.
  if (--enabled_depth == 0) cache.clear();
}

std::optional<DType> active() { return current ? std::optional<DType>(current->dtype) : std::nullopt; }
bool activations() { return current && current->options.activations; }
bool weight_cache() { return current && current->options.weight_cache; }

Counters counters() { return totals; }
void reset_counters() { totals = Counters{}; }

namespace {

bool is_parameter(const Tensor& t) { return t.dtype() == DType::Float32 && t.is_leaf() && t.requires_grad(); }

// t converted to `dtype` on its device, keeping a transposed matrix transposed.
Tensor converted(const Tensor& t, DType dtype) {
  if (!t.is_contiguous() && t.dim() >= 2 && t.transpose(-1, -2).is_contiguous())
    return t.transpose(-1, -2).to(dtype).transpose(-1, -2);
  return t.contiguous().to(dtype);
}

Tensor cached_parameter(const Tensor& param, DType dtype) {
  CacheEntry& e = cache[param.impl()];
  if (e.source.defined() && e.data == param.data_ptr() && e.version == param.version() && e.dtype == dtype) {
    ++totals.cache_hits;
    return e.cast;
  }
  ++totals.parameter_casts;
  e = CacheEntry{param, param.data_ptr(), param.version(), dtype, converted(param.detach(), dtype)};
  return e.cast;
}

}  // namespace
}  // namespace strata::autocast

namespace strata::detail {

Tensor autocast_operand(const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t.defined() ? t.detach() : t;
  if (autocast::is_parameter(t)) {
    if (autocast::weight_cache()) return autocast::cached_parameter(t, dtype);
    ++autocast::totals.parameter_casts;
  } else {
    ++autocast::totals.conversions;
  }
  return autocast::converted(t.detach(), dtype);
}

// Tensor::to's arithmetic, with the conversion of the gradient counted too.
Tensor autocast_convert(const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t;
  ++autocast::totals.conversions;
  Tensor out = t.detach().to(dtype);
  if (autograd::needs_grad({t})) {
    autograd::record("AutocastConvertBackward", {t}, {out}, {}, [source = t.dtype()](autograd::BackwardContext& ctx) {
      ++autocast::totals.conversions;
      return std::vector<Tensor>{ctx.grad(0).to(source)};
    });
  }
  return out;
}

std::optional<DType> activation_dtype() { return autocast::activations() ? autocast::active() : std::nullopt; }

}  // namespace strata::detail
