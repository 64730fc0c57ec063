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

// Maps a local element's flat index to its flat index in the whole parameter (-1: padding).
class WholeIndex {
 public:
  WholeIndex(const Shape& local, const PartOfWhole* part) : part_(part) {
    if (part == nullptr) return;
    const auto d = static_cast<size_t>(part->dim);
    STRATA_CHECK(part->whole.size() == local.size() && d < local.size(), "fill_init: a part of shape ", local,
                 " does not fit the whole shape ", part->whole, " along dim ", part->dim);
    for (size_t k = 0; k < local.size(); ++k)
      STRATA_CHECK(k == d || local[k] == part->whole[k], "fill_init: a part of shape ", local,
                   " differs from the whole shape ", part->whole, " outside dim ", part->dim);
    for (size_t k = d + 1; k < local.size(); ++k) inner_ *= local[k];
    along_ = local[d];
    whole_along_ = part->whole[d];
    map_.assign(static_cast<size_t>(along_), -1);
    for (const PartRun& r : part->runs) {
      STRATA_CHECK(r.local_start >= 0 && r.length >= 0 && r.local_start + r.length <= along_ && r.whole_start >= 0 &&
                       r.whole_start + r.length <= whole_along_,
                   "fill_init: a run [", r.local_start, ", +", r.length, ") -> [", r.whole_start, ", +", r.length,
                   ") does not fit sizes ", along_, " (part) and ", whole_along_, " (whole) along dim ", part->dim);
      for (int64_t j = 0; j < r.length; ++j) map_[static_cast<size_t>(r.local_start + j)] = r.whole_start + j;
    }
  }
  int64_t operator()(int64_t i) const {
    if (part_ == nullptr) return i;
    const int64_t outer = i / (inner_ * along_), along = i / inner_ % along_, in = i % inner_;
    const int64_t w = map_[static_cast<size_t>(along)];
    return w < 0 ? -1 : (outer * whole_along_ + w) * inner_ + in;
  }

 private:
  const PartOfWhole* part_;
  int64_t inner_ = 1, along_ = 1, whole_along_ = 1;
  std::vector<int64_t> map_;  // local index along dim -> whole index, -1 for padding
};

}  // namespace

void fill_init(Tensor& t, const ParamInit& init, const PhiloxStream& stream, const PartOfWhole* part) {
  STRATA_CHECK(t.device().is_cpu() && t.is_contiguous(), "fill_init: the tensor must be contiguous on the CPU, got ",
               t.device());
  NoGradGuard no_grad;
  const WholeIndex index(t.shape(), part);
  const DType draw_dtype = is_16bit(t.dtype()) ? DType::Float32 : t.dtype();
  STRATA_CHECK(draw_dtype == DType::Float32 || draw_dtype == DType::Float64, "fill_init: dtype ", t.dtype(),
               " is not floating");
  Tensor drawn = is_16bit(t.dtype()) ? empty(t.shape(), {.dtype = draw_dtype}) : t;
  auto fill = [&]<class T>() {
    T* p = drawn.data<T>();
    const int64_t n = drawn.numel();
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t w = index(i);
      p[i] = w < 0 ? T(0) : draw<T>(init, stream, static_cast<uint64_t>(w));
    }
  };
  if (draw_dtype == DType::Float32) fill.template operator()<float>();
  else fill.template operator()<double>();
  if (drawn.dtype() != t.dtype()) t.copy_(drawn);  // copy_ counts the write
  else t.bump_version();                           // written through its pointer above
}

}  // namespace strata::nn
