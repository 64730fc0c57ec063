#pragma once
// The documented order of the additions of each collective path (docs/distributed.md,
// "Algorithms"), computed on one rank from every rank's values, so that tests can check a
// path's result bit for bit (test_collective_paths.cpp, test_hierarchical.cpp).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace strata::test {

enum class Path { Ring, Shm, Hier };

// x[r] is group rank r's input; each returns element i of the result, in the reduction
// type T (float for 16-bit dtypes).

// The ring: chunk j (of ceil(len / n)) is rank j+1's value, plus rank j+2's, ..., plus rank j's.
template <class T>
T ring_order(const std::vector<std::vector<T>>& x, int64_t len, int64_t i) {
  const int n = static_cast<int>(x.size());
  const int64_t c = (len + n - 1) / n;
  const int first = static_cast<int>((i / c + 1) % n);
  T acc = x[static_cast<size_t>(first)][static_cast<size_t>(i)];
  for (int k = 1; k < n; ++k) acc = acc + x[static_cast<size_t>((first + k) % n)][static_cast<size_t>(i)];
  return acc;
}

// Shared memory: ((x0 + x1) + x2) + ... for every element.
template <class T>
T rank_order(const std::vector<std::vector<T>>& x, int64_t i) {
  T acc = x[0][static_cast<size_t>(i)];
  for (size_t r = 1; r < x.size(); ++r) acc = acc + x[r][static_cast<size_t>(i)];
  return acc;
}

// The hierarchical all_reduce's segment length (src/distributed/mpi/hierarchy.h,
// hier_segment_elems): STRATA_MPI_HIER_SEGMENT_BYTES over the element size, at least
// ceil(len / 64); unset or 0: one segment.
inline int64_t hier_segment_elems(int64_t len, int64_t element_bytes) {
  const char* v = std::getenv("STRATA_MPI_HIER_SEGMENT_BYTES");
  const int64_t bytes = v && *v ? std::atoll(v) : 0;
  if (len <= 0 || bytes <= 0) return std::max<int64_t>(len, 1);
  return std::max({bytes / element_bytes, (len + 63) / 64, int64_t{1}});
}

// The hierarchical path on K nodes of `per_node` consecutive group ranks each (node k holds
// ranks k*L .. k*L+L-1, as pretend nodes of consecutive world ranks do): each node sums its
// ranks in order, then the node sums go around the sub-ring starting after node j, where j
// is the node that finishes the piece: for all_reduce, the ring chunk (of ceil(len_l / K))
// within local chunk l (of ceil(len_s / L)) of the segment (of len_s elements,
// hier_segment_elems) that holds i; for reduce_scatter, the node of the rank whose chunk (of
// ceil(len / N)) holds i.
template <class T>
T hier_order(const std::vector<std::vector<T>>& x, int per_node, bool reduce_scatter, int64_t len, int64_t i) {
  const int n = static_cast<int>(x.size()), big_l = per_node, k = n / per_node;
  int j = 0;
  if (reduce_scatter) {
    const int64_t c = (len + n - 1) / n;
    j = static_cast<int>(i / c) / big_l;
  } else {
    const int64_t e = hier_segment_elems(len, static_cast<int64_t>(sizeof(T)));
    const int64_t seg_lo = i / e * e;
    const int64_t len_s = std::min(e, len - seg_lo), at = i - seg_lo;  // within the segment
    const int64_t cl = (len_s + big_l - 1) / big_l;
    const int64_t l = at / cl, o = at - l * cl;
    const int64_t len_l = std::min(cl, len_s - l * cl);
    const int64_t ck = (len_l + k - 1) / k;
    j = static_cast<int>(o / ck);
  }
  auto node_sum = [&](int node) {
    T acc = x[static_cast<size_t>(node * big_l)][static_cast<size_t>(i)];
    for (int l = 1; l < big_l; ++l) acc = acc + x[static_cast<size_t>(node * big_l + l)][static_cast<size_t>(i)];
    return acc;
  };
  const int first = (j + 1) % k;
  T acc = node_sum(first);
  for (int s = 1; s < k; ++s) acc = acc + node_sum((first + s) % k);
  return acc;
}

template <class T>
std::vector<T> path_order_sum(Path path, const std::vector<std::vector<T>>& x, int64_t len, int per_node = 1,
                              bool reduce_scatter = false) {
  std::vector<T> out(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) {
    out[static_cast<size_t>(i)] = path == Path::Ring  ? ring_order(x, len, i)
                                  : path == Path::Shm ? rank_order(x, i)
                                                      : hier_order(x, per_node, reduce_scatter, len, i);
  }
  return out;
}

}  // namespace strata::test
