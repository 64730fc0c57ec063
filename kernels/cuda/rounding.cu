// round/floor/ceil/trunc/sign and isnan/isinf/isfinite on the GPU: common/rounding_ops.h's
// functors (which the CPU loops instantiate too) run by the elementwise executor
// (cuda/map_executor.cuh).
#include "cuda/map_executor.cuh"
#include "strata_kernels/common/rounding_ops.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/rounding.h"

namespace {

using namespace strata_kernels;

template <class T>
cudaError_t rounding(int32_t op, void* out, const void* in, const void* index, int64_t n, cudaStream_t s) {
#define STRATA_ROUNDING(C) \
  case RoundingCode::C: return launch_map<1, T, T>(RoundingFn<T, RoundingCode::C>{}, out, index, n, s, in)
  switch (static_cast<RoundingCode>(op)) {
    STRATA_ROUNDING(Round);
    STRATA_ROUNDING(Floor);
    STRATA_ROUNDING(Ceil);
    STRATA_ROUNDING(Trunc);
    STRATA_ROUNDING(Sign);
  }
#undef STRATA_ROUNDING
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t classify(int32_t op, void* out, const void* in, const void* index, int64_t n, cudaStream_t s) {
#define STRATA_CLASSIFY(C) \
  case ClassifyCode::C: return launch_map<1, bool, T>(ClassifyFn<T, ClassifyCode::C>{}, out, index, n, s, in)
  switch (static_cast<ClassifyCode>(op)) {
    STRATA_CLASSIFY(IsNan);
    STRATA_CLASSIFY(IsInf);
    STRATA_CLASSIFY(IsFinite);
  }
#undef STRATA_CLASSIFY
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" cudaError_t strata_rounding(int32_t op, int32_t type, void* out, const void* in, const void* index,
                                       int64_t n, cudaStream_t s) {
  switch (type) {
    case STRATA_ELEMENT_F32: return rounding<float>(op, out, in, index, n, s);
    case STRATA_ELEMENT_F64: return rounding<double>(op, out, in, index, n, s);
    case STRATA_ELEMENT_I32: return rounding<int32_t>(op, out, in, index, n, s);
    case STRATA_ELEMENT_I64: return rounding<int64_t>(op, out, in, index, n, s);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t strata_classify(int32_t op, int32_t type, void* out, const void* in, const void* index,
                                       int64_t n, cudaStream_t s) {
  switch (type) {
    case STRATA_ELEMENT_F32: return classify<float>(op, out, in, index, n, s);
    case STRATA_ELEMENT_F64: return classify<double>(op, out, in, index, n, s);
    case STRATA_ELEMENT_I32: return classify<int32_t>(op, out, in, index, n, s);
    case STRATA_ELEMENT_I64: return classify<int64_t>(op, out, in, index, n, s);
    case STRATA_ELEMENT_BOOL: return classify<bool>(op, out, in, index, n, s);
    default: return cudaErrorInvalidValue;
  }
}
