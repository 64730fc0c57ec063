#include "backend/cpu/sort.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "strata/tensor/factory.h"
#include "strata_kernels/common/sort_key.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

// One row: (key, position) pairs sorted by key with ties by position, which is a total
// order, so std::sort gives the one stable answer.
template <class T>
void sort_row(const T* x, int64_t n, bool descending, T* values, int64_t* indices,
              std::vector<std::pair<strata_kernels::SortKey<T>, int64_t>>* lane) {
  for (int64_t j = 0; j < n; ++j) (*lane)[static_cast<size_t>(j)] = {strata_kernels::sort_key(x[j]), j};
  std::sort(lane->begin(), lane->end(), [descending](const auto& a, const auto& b) {
    return strata_kernels::sorts_before(a.first, a.second, b.first, b.second, descending);
  });
  for (int64_t j = 0; j < n; ++j) {
    const int64_t at = (*lane)[static_cast<size_t>(j)].second;
    indices[j] = at;
    values[j] = x[at];
  }
}

}  // namespace

void sort_rows(const Tensor& x_in, bool descending, Tensor* values, Tensor* indices) {
  const Tensor x = x_in.contiguous();
  *values = empty(x.shape(), {.dtype = x.dtype()});
  *indices = empty(x.shape(), {.dtype = DType::Int64});
  if (x.numel() == 0) return;
  const int64_t n = x.size(-1), rows = x.numel() / n;
  detail::dispatch_arith(x.dtype(), "sort", [&]<class T>() {
    const T* p = x.data<T>();
    T* v = values->data<T>();
    int64_t* ix = indices->data<int64_t>();
#pragma omp parallel if (x.numel() > 32768 && rows > 1)
    {
      std::vector<std::pair<strata_kernels::SortKey<T>, int64_t>> lane(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) sort_row(p + r * n, n, descending, v + r * n, ix + r * n, &lane);
    }
  });
}

}  // namespace strata::cpu
