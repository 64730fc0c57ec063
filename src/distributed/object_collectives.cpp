#include "strata/distributed/object_collectives.h"

#include <algorithm>
#include <cstring>

#include "strata/core/error.h"
#include "strata/tensor/factory.h"

namespace strata::dist {
namespace {

int64_t words_for(size_t bytes) { return static_cast<int64_t>((bytes + 7) / 8); }

}  // namespace

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  const int n = group.size();
  if (n == 1) return {text};
  // Lengths first, then every payload padded to the longest (all_gather takes equal chunks).
  Tensor lengths = zeros({n}, {.dtype = DType::Int64});
  Tensor my_length = full({1}, static_cast<double>(text.size()), {.dtype = DType::Int64});
  group.all_gather(lengths, my_length)->wait();
  const std::vector<int64_t> sizes = lengths.to_vector<int64_t>();
  const int64_t words =
      std::max<int64_t>(words_for(static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()))), 1);
  Tensor payload = zeros({words}, {.dtype = DType::Int64});
  std::memcpy(payload.data<int64_t>(), text.data(), text.size());
  Tensor all = zeros({n * words}, {.dtype = DType::Int64});
  group.all_gather(all, payload)->wait();
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  const char* bytes = reinterpret_cast<const char*>(all.data<int64_t>());
  for (int r = 0; r < n; ++r) {
    const size_t offset = static_cast<size_t>(r) * static_cast<size_t>(words) * sizeof(int64_t);
    out.emplace_back(bytes + offset, static_cast<size_t>(sizes[static_cast<size_t>(r)]));
  }
  return out;
}

std::string broadcast_string(ProcessGroup& group, const std::string& text, int root) {
  if (group.size() == 1) return text;
  Tensor length = full({1}, group.rank() == root ? static_cast<double>(text.size()) : 0.0, {.dtype = DType::Int64});
  group.broadcast(length, root)->wait();
  const auto size = static_cast<size_t>(length.to_vector<int64_t>()[0]);
  Tensor payload = zeros({std::max<int64_t>(words_for(size), 1)}, {.dtype = DType::Int64});
  if (group.rank() == root) std::memcpy(payload.data<int64_t>(), text.data(), text.size());
  group.broadcast(payload, root)->wait();
  return std::string(reinterpret_cast<const char*>(payload.data<int64_t>()), size);
}

void agree_on_success(ProcessGroup& group, const std::string& error, const std::string& what) {
  // Max of (n - rank) over failing ranks picks the lowest failing rank.
  const int n = group.size();
  Tensor flag = full({1}, error.empty() ? 0.0 : static_cast<double>(n - group.rank()), {.dtype = DType::Int64});
  if (n > 1) group.all_reduce(flag, ReduceOp::Max)->wait();
  const auto failed = static_cast<int64_t>(flag.to_vector<int64_t>()[0]);
  if (failed == 0) return;
  STRATA_CHECK(error.empty(), what, ": ", error);
  STRATA_FAIL(what, ": rank ", n - failed, " failed (see its error); nothing was changed here");
}

}  // namespace strata::dist
