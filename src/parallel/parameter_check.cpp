#include "parallel/parameter_check.h"

#include <algorithm>
#include <sstream>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/core/hash.h"
#include "strata/tensor/factory.h"

namespace strata::detail {
namespace {

// Every rank's int64 values (the same count on every rank), gathered.
std::vector<int64_t> gather(dist::ProcessGroup& group, const std::vector<int64_t>& mine) {
  const int64_t k = static_cast<int64_t>(mine.size());
  const Device device = group.tensor_device();
  Tensor all = empty({k * group.size()}, {.dtype = DType::Int64, .device = device});
  group.all_gather(all, from_vector(mine, {k}).to(device))->wait();
  return all.to_vector<int64_t>();
}

// The first parameter index at which a rank's hash differs from rank 0's (`most` when none).
int64_t first_difference(const std::vector<int64_t>& hashes, int64_t most, int n) {
  for (int64_t i = 0; i < most; ++i)
    for (int r = 1; r < n; ++r)
      if (hashes[static_cast<size_t>(r * most + i)] != hashes[static_cast<size_t>(i)]) return i;
  return most;
}

// Every rank's text (padded or cut to a fixed width so that every rank sends as much).
std::vector<std::string> gather_text(dist::ProcessGroup& group, std::string text) {
  constexpr int64_t kChars = 160;
  text.resize(kChars, ' ');
  std::vector<int64_t> codes(text.begin(), text.end());
  for (int64_t& c : codes) c = static_cast<unsigned char>(c);
  const std::vector<int64_t> all = gather(group, codes);
  std::vector<std::string> out;
  for (int r = 0; r < group.size(); ++r) {
    std::string s;
    for (int64_t c = 0; c < kChars; ++c) s += static_cast<char>(all[static_cast<size_t>(r * kChars + c)]);
    s.erase(s.find_last_not_of(' ') + 1);
    out.push_back(s);
  }
  return out;
}

}  // namespace

std::string describe_parameter(const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << "'" << name << "' " << t.shape() << " " << t.dtype();
  return os.str();
}

void check_same_parameters(dist::ProcessGroup& group, const std::vector<std::string>& descriptions,
                           std::string_view owner) {
  const int n = group.size();
  if (n == 1) return;
  std::vector<uint64_t> each;
  each.reserve(descriptions.size());
  for (const std::string& d : descriptions) each.push_back(fnv1a(d));
  const uint64_t h = fnv1a_words(std::span<const uint64_t>(each));
  const std::vector<int64_t> a = gather(group, {static_cast<int64_t>(h), static_cast<int64_t>(each.size())});
  bool same = true;
  int64_t most = 0;
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    same = same && a[2 * r] == a[0] && a[2 * r + 1] == a[1];
    most = std::max(most, a[2 * r + 1]);
  }
  if (same) return;
  // Per-parameter hashes (0 past a rank's last parameter) find the first difference.
  std::vector<int64_t> hashes(static_cast<size_t>(most), 0);
  std::copy(each.begin(), each.end(), hashes.begin());
  const std::vector<int64_t> ah = gather(group, hashes);
  const int64_t first = first_difference(ah, most, n);
  // Then every rank contributes its description of that parameter.
  const bool have = first < static_cast<int64_t>(descriptions.size());
  const std::vector<std::string> text = gather_text(group, have ? descriptions[static_cast<size_t>(first)] : "(none)");
  std::ostringstream os;
  os << owner << ": the ranks of group '" << group.name() << "' hold different parameters: parameter #" << first
     << " is " << text[0] << " on rank 0";
  for (int r = 1; r < n; ++r)
    if (ah[static_cast<size_t>(r * most + first)] != ah[static_cast<size_t>(first)])
      os << ", " << text[static_cast<size_t>(r)] << " on rank " << r;
  os << " (parameter counts by rank:";
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) os << " " << a[2 * r + 1];
  os << ")";
  throw Error(os.str());
}

void broadcast_from_rank0(dist::ProcessGroup& group, std::vector<Tensor> tensors, nn::Module* module,
                          std::string_view owner) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  if (module != nullptr)
    for (auto& [name, b] : module->named_buffers()) {
      STRATA_CHECK(b.is_contiguous(), owner, ": buffer '", name, "' is not contiguous");
      tensors.push_back(b);
    }
  std::vector<dist::WorkPtr> works;
  works.reserve(tensors.size());
  for (Tensor& t : tensors) works.push_back(group.broadcast(t, 0));
  for (auto& w : works) w->wait();
}

}  // namespace strata::detail
