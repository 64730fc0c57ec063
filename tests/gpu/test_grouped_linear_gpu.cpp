// grouped_linear on CUDA: cuBLAS's grouped GEMM (one call per product) against the CPU's loop
// of linear's GEMMs, output and gradients, float64, float32 and bfloat16 autocast, idle groups
// included; the grouped call is the one issued (the profiler's launch count); and nn::MoE
// through it against its one-expert-after-another path on the GPU.
//
// Bounds (derived_bounds.h): each side computes every entry as a dot product of length k
// (k = in for the output, out for the input gradient, the group's rows for its weight
// gradient), in any order, so each is within gamma(k) m of the
// exact value, m = sum |a||b| over the dot product (Higham (3.5)), and the two within
// 2 gamma(k) m. Under autocast both sides read the same bfloat16 operands, accumulate in
// float32 and round once to bfloat16 (unit roundoff 2^-8): each rounding moves a value of
// size at most m (1 + gamma) by at most 2^-8 of it, so the two within
// 2 gamma32(k) m + 2 * 2^-8 m (1 + gamma32(k)).
#include <map>
#include <numeric>
#include <string>

#include "gpu/derived_bounds.h"
#include "gpu/gpu_test.h"

namespace strata::testing {
namespace {

using GroupedLinearGpu = GpuTest;

struct Run {
  Tensor y, gx;
  std::vector<Tensor> gw;
};

// Forward with grouped_linear on `device`, backward of sum(y * gy); results on the CPU.
Run run(const Tensor& x0, const std::vector<int64_t>& rows, const std::vector<Tensor>& w0, const Tensor& gy,
        Device device) {
  Tensor x = x0.to(device).set_requires_grad(true);
  std::vector<Tensor> w;
  for (const Tensor& t : w0) w.push_back(t.to(device).set_requires_grad(true));
  Tensor y = grouped_linear(x, rows, w);
  y.backward(gy.to(device).to(y.dtype()));
  Run r{y.to(Device::cpu()).to(DType::Float64), x.grad().to(Device::cpu()).to(DType::Float64), {}};
  for (const Tensor& t : w)
    r.gw.push_back(t.grad().defined() ? t.grad().to(Device::cpu()).to(DType::Float64) : Tensor());
  return r;
}

// The magnitudes m of the three products, from float64 |operands| on the CPU.
Run magnitudes(const Tensor& x, const std::vector<int64_t>& rows, const std::vector<Tensor>& w, const Tensor& gy) {
  std::vector<Tensor> aw;
  for (const Tensor& t : w) aw.push_back(abs(t.to(DType::Float64)));
  const Tensor ax = abs(x.to(DType::Float64)), ag = abs(gy.to(DType::Float64));
  return run(ax, rows, aw, ag, Device::cpu());
}

std::vector<double> scaled(const Tensor& m, double factor) {
  std::vector<double> out = m.to_vector<double>();
  for (double& v : out) v *= factor;
  return out;
}

void expect_within(const Tensor& got, const Tensor& want, const Tensor& m, double per_m, const std::string& what) {
  EXPECT_LE(worst_over_bound(got, want, scaled(m, per_m)), 1.0) << what;
}

// Checks the GPU against the CPU for the given dtype; `autocast16` runs both under a bfloat16
// autocast scope with float32 tensors.
void check(DType dtype, bool autocast16) {
  const std::vector<int64_t> rows{37, 0, 5, 64, 1};
  const int64_t S = std::accumulate(rows.begin(), rows.end(), int64_t{0}), K = 96, N = 80;
  Generator gen(11);
  const Tensor x = randn({S, K}, {.dtype = dtype}, &gen), gy = randn({S, N}, {.dtype = dtype}, &gen);
  std::vector<Tensor> w;
  for (size_t g = 0; g < rows.size(); ++g) w.push_back(randn({N, K}, {.dtype = dtype}, &gen));
  std::optional<autocast::Scope> scope;
  if (autocast16) scope.emplace(DType::BFloat16);
  const Run gpu_run = run(x, rows, w, gy, Device::cuda(0)), cpu_run = run(x, rows, w, gy, Device::cpu());
  scope.reset();
  const Run m = magnitudes(x, rows, w, gy);
  const double u = autocast16 ? 0x1p-24 : unit_roundoff(dtype);
  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  const auto per_m = [&](int64_t k) {
    const double g = gamma_k(static_cast<double>(k), u);
    return autocast16 ? 2 * g + 2 * 0x1p-8 * (1 + g) : 2 * g;
  };
  const std::string name = std::string(dtype_name(dtype)) + (autocast16 ? " under bfloat16 autocast" : "");
  expect_within(gpu_run.y, cpu_run.y, m.y, per_m(K), name + " output");
  expect_within(gpu_run.gx, cpu_run.gx, m.gx, per_m(N), name + " input gradient");
  for (size_t g = 0; g < rows.size(); ++g) {
    ASSERT_EQ(gpu_run.gw[g].defined(), rows[g] > 0) << name << " group " << g;
    if (rows[g] > 0) {
      expect_within(gpu_run.gw[g], cpu_run.gw[g], m.gw[g], per_m(max_rows), name + " weight gradient");
    }
  }
}

TEST_F(GroupedLinearGpu, Float64MatchesTheCpuWithinTheDerivedBound) { check(DType::Float64, false); }
TEST_F(GroupedLinearGpu, Float32MatchesTheCpuWithinTheDerivedBound) { check(DType::Float32, false); }
TEST_F(GroupedLinearGpu, BFloat16AutocastMatchesTheCpuWithinTheDerivedBound) { check(DType::Float32, true); }

// One grouped call per product: the forward's launches are the address table's write and the
// cuBLAS call (a loop would launch one GEMM per group, 4 here).
TEST_F(GroupedLinearGpu, EachProductIsOneGroupedCall) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = randn({40, 32}, {.dtype = dtype}).to(gpu);
    std::vector<Tensor> w;
    for (int g = 0; g < 4; ++g) w.push_back(randn({24, 32}, {.dtype = dtype}).to(gpu));
    cuda::synchronize();
    profiler::Session session;
    (void)grouped_linear(x, {10, 10, 10, 10}, w);
    std::map<std::string, profiler::Row> by_name;
    for (const auto& r : session.rows()) by_name[r.name] = r;
    ASSERT_TRUE(by_name.count("grouped_linear")) << session.table();
    EXPECT_EQ(by_name.at("grouped_linear").launches, 2) << dtype_name(dtype) << "\n" << session.table();
  }
}

// 50 groups with rows: 150 addresses, written in two launches of at most 128; every output
// (float64, k = 16) within the bound of the CPU's.
TEST_F(GroupedLinearGpu, ManyGroupsSpanTwoAddressTableLaunches) {
  std::vector<int64_t> rows;
  std::vector<Tensor> w;
  Generator gen(3);
  for (int g = 0; g < 50; ++g) {
    rows.push_back(1 + g % 7);
    w.push_back(randn({8, 16}, {.dtype = DType::Float64}, &gen));
  }
  const int64_t S = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  const Tensor x = randn({S, 16}, {.dtype = DType::Float64}, &gen);
  std::vector<Tensor> wg;
  for (const Tensor& t : w) wg.push_back(t.to(gpu));
  cuda::synchronize();
  profiler::Session session;
  const Tensor got = grouped_linear(x.to(gpu), rows, wg).to(Device::cpu());
  std::map<std::string, profiler::Row> by_name;
  for (const auto& r : session.rows()) by_name[r.name] = r;
  ASSERT_TRUE(by_name.count("grouped_linear")) << session.table();
  EXPECT_EQ(by_name.at("grouped_linear").launches, 3) << session.table();
  std::vector<Tensor> aw;
  for (const Tensor& t : w) aw.push_back(abs(t));
  const Tensor m = grouped_linear(abs(x), rows, aw);
  expect_within(got, grouped_linear(x, rows, w), m, 2 * gamma_k(16, 0x1p-53), "50 groups");
}

// nn::MoE on the GPU, grouped against one expert after another (float64, capacity dropping):
// the same routing (same router on the same tokens), so the two differ only in how cuBLAS
// orders the experts' products: two computations of one float64 chain, each tensor within
// moe_float64_bound() of the other relative to its largest entry (derived in
// derived_bounds.h for chains of this size: widths C, I <= 8, at most 16 tokens, parameters
// drawn N(0, 0.5^2)).
TEST_F(GroupedLinearGpu, MixtureOfExpertsGroupedEqualsOneByOne) {
  nn::MoEConfig c{.hidden_size = 8, .intermediate_size = 8, .num_experts = 8, .top_k = 2, .capacity_factor = 1.0};
  const auto run_moe = [&](bool grouped) {
    nn::MoEConfig cc = c;
    cc.grouped_experts = grouped;
    Generator gen(5);
    nn::MoE moe(
        cc, nn::InitOptions{.std = 0.5, .dtype = DType::Float64, .gen = &gen, .linear_init = nn::LinearInit::Normal});
    moe.to(gpu);
    EXPECT_EQ(moe.runs_grouped(), grouped);
    Generator xg(6);
    Tensor x = randn({2, 8, 8}, {.dtype = DType::Float64}, &xg).to(gpu).set_requires_grad(true);
    Tensor y = moe.forward(x);
    sum(mul(y, y)).backward();
    std::vector<Tensor> out{y.to(Device::cpu()), x.grad().to(Device::cpu())};
    for (const auto& [name, p] : moe.named_parameters())
      out.push_back(p.grad().defined() ? p.grad().to(Device::cpu()) : Tensor());
    return out;
  };
  const std::vector<Tensor> a = run_moe(true), b = run_moe(false);
  ASSERT_EQ(a.size(), b.size());
  const double tol = moe_float64_bound();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << "tensor " << i;
    if (!a[i].defined()) continue;
    const auto largest = [](const Tensor& t) { return max(abs(t).reshape({-1}), 0).item(); };
    const double scale = std::max(largest(b[i]), 1e-300);
    EXPECT_LE(largest(sub(a[i], b[i])) / scale, tol) << "tensor " << i << " (0 output, 1 input gradient)";
  }
}

}  // namespace
}  // namespace strata::testing
