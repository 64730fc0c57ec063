#include "strata/nn/param_init.h"

#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"

namespace strata::nn {
namespace {

bool is_16bit(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

// The value of the whole parameter's element `i`, computed in T with the roundings of the
// tensor ops the layers used before (randn then mul_; rand then mul and add).
template <class T>
T draw(const ParamInit& init, const PhiloxStream& s, uint64_t i) {
  switch (init.kind) {
    case ParamInit::Kind::Normal: return static_cast<T>(s.normal(i)) * static_cast<T>(init.scale);
    case ParamInit::Kind::Uniform: {
      const T r = static_cast<T>(1.0f - s.uniform(i));  // [0, 1)
      return r * static_cast<T>(2.0 * init.scale) + static_cast<T>(-init.scale);
    }
    case ParamInit::Kind::Constant: return static_cast<T>(init.scale);
  }
  return T(0);
}

// For each local element, its flat index in the whole parameter, or -1 for padding.
std::vector<int64_t> whole_indices(const Shape& local, const PartOfWhole* part) {
  const auto n = static_cast<size_t>(local.numel());
  std::vector<int64_t> out(n);
  if (part == nullptr) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(i);
    return out;
  }
  const auto d = static_cast<size_t>(part->dim);
  STRATA_CHECK(part->whole.size() == local.size() && d < local.size(), "fill_init: a part of shape ", local,
               " does not fit the whole shape ", part->whole, " along dim ", part->dim);
  int64_t inner = 1;
  for (size_t k = d + 1; k < local.size(); ++k) inner *= local[k];
  std::vector<int64_t> map(static_cast<size_t>(local[d]), -1);  // local index along dim -> whole index
  for (const PartRun& r : part->runs)
    for (int64_t j = 0; j < r.length; ++j) map[static_cast<size_t>(r.local_start + j)] = r.whole_start + j;
  for (size_t i = 0; i < n; ++i) {
    const auto li = static_cast<int64_t>(i);
    const int64_t outer = li / (inner * local[d]), along = li / inner % local[d], in = li % inner;
    const int64_t w = map[static_cast<size_t>(along)];
    out[i] = w < 0 ? -1 : (outer * part->whole[d] + w) * inner + in;
  }
  return out;
}

}  // namespace

void fill_init(Tensor& t, const ParamInit& init, const PhiloxStream& stream, const PartOfWhole* part) {
  STRATA_CHECK(t.device().is_cpu() && t.is_contiguous(), "fill_init: the tensor must be contiguous on the CPU, got ",
               t.device());
  NoGradGuard no_grad;
  const std::vector<int64_t> index = whole_indices(t.shape(), part);
  const DType draw_dtype = is_16bit(t.dtype()) ? DType::Float32 : t.dtype();
  STRATA_CHECK(draw_dtype == DType::Float32 || draw_dtype == DType::Float64, "fill_init: dtype ", t.dtype(),
               " is not floating");
  Tensor drawn = is_16bit(t.dtype()) ? empty(t.shape(), {.dtype = draw_dtype}) : t;
  auto fill = [&]<class T>() {
    T* p = drawn.data<T>();
    for (size_t i = 0; i < index.size(); ++i)
      p[i] = index[i] < 0 ? T(0) : draw<T>(init, stream, static_cast<uint64_t>(index[i]));
  };
  if (draw_dtype == DType::Float32) fill.template operator()<float>();
  else fill.template operator()<double>();
  if (drawn.dtype() != t.dtype()) t.copy_(drawn);
}

}  // namespace strata::nn
