// The GEMMs of one GPT training step (the model of benchmarks/gpt_step.cpp) through every
// GEMM library found at configure time, side by side: OpenBLAS (cblas_sgemm, always), BLIS
// (native bli_sgemm) and oneDNN (dnnl_sgemm, and a matmul primitive made once per shape).
// Each shape is called exactly as strata calls it (row-major, transposes as flags, beta 1
// where a bias was copied into the output first). Prints GFLOP/s per shape and library and
// the step's total GEMM time per library (each shape's time times its count per step).
// Attention's per-head products run as strata runs them: one single-threaded call per
// (batch, head) in an OpenMP loop.
// benchmarks/run_gemm_shapes.sh runs it at 1 and 2 threads.
#include <cblas.h>
#include <dlfcn.h>
#ifndef OPENBLAS_VERSION
#error "cblas.h is not OpenBLAS's: the OpenBLAS include directory must come before BLIS's"
#endif
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"

#ifdef STRATA_BENCH_HAS_BLIS
#include <blis.h>
#endif
#ifdef STRATA_BENCH_HAS_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

using strata::bench::Clock;
using strata::bench::median;
using strata::bench::ms_since;

namespace {

// C[m, n] = op(A)[m, k] op(B)[k, n] + beta C, all row-major; op(X) = X^T when t is set.
struct Gemm {
  std::string name;
  bool ta, tb;
  int64_t m, n, k;
  float beta;
  int count;          // calls (or loops over the heads) per training step
  int64_t units = 1;  // > 1: that many single-threaded calls in an OpenMP loop, one per head
  int64_t lda() const { return ta ? m : k; }
  int64_t ldb() const { return tb ? k : n; }
  double flop() const { return 2.0 * double(m) * double(n) * double(k) * double(units); }
};

// The step's linear layers: forward y = x W^T (+ bias: beta 1), backward dx = dy W and
// dW = dy^T x, over B*T rows.
std::vector<Gemm> step_gemms(int64_t rows, int64_t c, int64_t vocab, int layers) {
  struct Layer {
    const char* name;
    int64_t in, out;
    bool bias;
    int count;
  };
  const Layer ls[] = {{"c_attn", c, 3 * c, true, layers},
                      {"attn.c_proj", c, c, true, layers},
                      {"c_fc", c, 4 * c, true, layers},
                      {"mlp.c_proj", 4 * c, c, true, layers},
                      {"head", c, vocab, false, 1}};
  std::vector<Gemm> g;
  for (const Layer& l : ls) {
    const std::string n = l.name;
    g.push_back({n + " fwd", false, true, rows, l.out, l.in, l.bias ? 1.0f : 0.0f, l.count});
    g.push_back({n + " dX", false, false, rows, l.in, l.out, 0.0f, l.count});
    g.push_back({n + " dW", true, false, l.out, l.in, rows, 0.0f, l.count});
  }
  return g;
}

// Causal attention per (batch, head), T <= 128 (one block of rows): scores Q K^T, output
// P V; backward dP = dO V^T, dQ = dS K, dV = P^T dO, dK = dS^T Q.
std::vector<Gemm> attention_gemms(int64_t batch, int64_t t, int64_t heads, int64_t d, int layers) {
  const int64_t u = batch * heads;
  return {{"attn QK^T", false, true, t, t, d, 0.0f, layers, u},  {"attn PV", false, false, t, d, t, 0.0f, layers, u},
          {"attn dP", false, true, t, t, d, 0.0f, layers, u},    {"attn dQ", false, false, t, d, t, 0.0f, layers, u},
          {"attn dV,dK", true, false, t, d, t, 0.0f, 2 * layers, u}};
}

// One product of g into c (A and B are shared by all units, each unit has its own C).
using Run = std::function<void(const Gemm& g, const float* a, const float* b, float* c)>;

struct Library {
  std::string name;
  std::function<Run(const Gemm&)> prepare;  // per-shape setup (a primitive), outside the timing
};

// Which shared object a function pointer resolves to: two BLAS libraries in one process
// both export cblas_sgemm, and link order decides which one we call.
std::string library_of(const void* fn) {
  Dl_info info{};
  return dladdr(fn, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
}

std::vector<Library> libraries(int threads) {
  std::vector<Library> libs;
  libs.push_back({"openblas", [](const Gemm&) -> Run {
                    return [](const Gemm& g, const float* a, const float* b, float* c) {
                      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                                  int(g.m), int(g.n), int(g.k), 1.0f, a, int(g.lda()), b, int(g.ldb()), g.beta, c,
                                  int(g.n));
                    };
                  }});
  std::printf("openblas: cblas_sgemm from %s\n", library_of(reinterpret_cast<const void*>(&cblas_sgemm)).c_str());
#ifdef STRATA_BENCH_HAS_BLIS
  bli_thread_set_num_threads(threads);
  std::printf("blis: %s, kernels for %s, %d threads\n", bli_info_get_version_str(),
              bli_arch_string(bli_arch_query_id()), threads);
  libs.push_back({"blis", [](const Gemm&) -> Run {
                    return [](const Gemm& g, const float* a, const float* b, float* c) {
                      // Row-major operands as BLIS (row stride, column stride) pairs; one
                      // thread per call inside the per-head loop, as BLIS would nest otherwise.
                      float one = 1.0f, beta = g.beta;
                      const inc_t lda = g.lda(), ldb = g.ldb();
                      rntm_t rntm = BLIS_RNTM_INITIALIZER;
                      if (g.units > 1) bli_rntm_set_num_threads(1, &rntm);
                      bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, g.m, g.n, g.k, &one, const_cast<float*>(a),
                                   g.ta ? 1 : lda, g.ta ? lda : 1, const_cast<float*>(b), g.tb ? 1 : ldb,
                                   g.tb ? ldb : 1, &beta, c, g.n, 1, nullptr, g.units > 1 ? &rntm : nullptr);
                    };
                  }});
#else
  (void)threads;
  std::printf("blis: not found at configure time (apt-get install libblis-openmp-dev), skipped\n");
#endif
#ifdef STRATA_BENCH_HAS_DNNL
  const dnnl_version_t* v = dnnl_version();
  std::printf("onednn: %d.%d.%d, %s threads\n", v->major, v->minor, v->patch,
              v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
  libs.push_back({"dnnl_sgemm", [](const Gemm&) -> Run {
                    return [](const Gemm& g, const float* a, const float* b, float* c) {
                      dnnl_sgemm(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, 1.0f, a, g.lda(), b, g.ldb(),
                                 g.beta, c, g.n);
                    };
                  }});
  libs.push_back({"dnnl_matmul", [](const Gemm& g) -> Run {
                    using namespace dnnl;
                    using dims = memory::dims;
                    auto eng = std::make_shared<engine>(engine::kind::cpu, 0);
                    const memory::desc a({g.m, g.k}, memory::data_type::f32,
                                         g.ta ? dims{1, g.lda()} : dims{g.lda(), 1});
                    const memory::desc b({g.k, g.n}, memory::data_type::f32,
                                         g.tb ? dims{1, g.ldb()} : dims{g.ldb(), 1});
                    const memory::desc c({g.m, g.n}, memory::data_type::f32, dims{g.n, 1});
                    primitive_attr attr;
                    if (g.beta != 0.0f) {
                      post_ops po;
                      po.append_sum(g.beta);
                      attr.set_post_ops(po);
                    }
#if DNNL_VERSION_MAJOR >= 3
                    auto prim = std::make_shared<matmul>(matmul::primitive_desc(*eng, a, b, c, attr));
#else
                    auto prim = std::make_shared<matmul>(matmul::primitive_desc(matmul::desc(a, b, c), attr, *eng));
#endif
                    return [eng, prim, a, b, c](const Gemm&, const float* pa, const float* pb, float* pc) {
                      stream s(*eng);
                      memory ma(a, *eng, const_cast<float*>(pa)), mb(b, *eng, const_cast<float*>(pb)),
                          mc(c, *eng, pc);
                      prim->execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
                      s.wait();
                    };
                  }});
#else
  std::printf("onednn: not found at configure time (apt-get install libdnnl-dev), skipped\n");
#endif
  return libs;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 8, context = 128, width = 256, vocab = 256;
  int64_t heads = 4;
  int layers = 4, reps = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (k == "--batch") batch = v;
    if (k == "--context") context = v;
    if (k == "--width") width = v;
    if (k == "--vocab") vocab = v;
    if (k == "--layers") layers = int(v);
    if (k == "--heads") heads = v;
    if (k == "--reps") reps = int(v);
  }
  const int threads = omp_get_max_threads();
  std::vector<Gemm> gemms = step_gemms(batch * context, width, vocab, layers);
  if (context <= 128) {
    for (const Gemm& g : attention_gemms(batch, context, heads, width / heads, layers)) gemms.push_back(g);
  }
  const std::vector<Library> libs = libraries(threads);

  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // rates[shape][library]: median GFLOP/s. The libraries take turns inside each repetition,
  // so all of them see the machine in about the same state.
  std::vector<std::vector<double>> rates(gemms.size());
  for (size_t s = 0; s < gemms.size(); ++s) {
    const Gemm& g = gemms[s];
    std::vector<float> a(size_t(g.m * g.k)), b(size_t(g.k * g.n)), c(size_t(g.m * g.n * g.units));
    for (auto* v : {&a, &b, &c})
      for (float& e : *v) e = dist(rng);
    std::vector<Run> runs;
    for (const Library& l : libs) runs.push_back(l.prepare(g));
    // Calls per sample: about 20 ms of work at 100 GFLOP/s, so timer and noise stay small.
    const int calls = std::max(1, int(2e9 / g.flop()));
    std::vector<std::vector<double>> samples(libs.size());
    for (int r = 0; r < reps + 1; ++r) {
      for (size_t i = 0; i < libs.size(); ++i) {
        const size_t l = (i + size_t(r)) % libs.size();  // each library leads in turn
        const auto t0 = Clock::now();
        for (int i = 0; i < calls; ++i) {
          const Run& run = runs[l];
#pragma omp parallel for if (g.units > 1) schedule(static)
          for (int64_t u = 0; u < g.units; ++u) run(g, a.data(), b.data(), c.data() + u * g.m * g.n);
        }
        if (r > 0) samples[l].push_back(g.flop() * calls / (ms_since(t0) * 1e6));  // r = 0 warms up
      }
    }
    for (auto& v : samples) rates[s].push_back(median(v));
  }

  std::printf("threads=%d rows=%lld width=%lld vocab=%lld layers=%d; GFLOP/s, median of %d\n", threads,
              static_cast<long long>(batch * context), static_cast<long long>(width), static_cast<long long>(vocab),
              layers, reps);
  std::printf("%-18s %-3s %5s %5s %5s %5s", "gemm", "op", "m", "n", "k", "calls");
  for (const Library& l : libs) std::printf(" %12s", l.name.c_str());
  std::printf("\n");
  // Per library: the step's GEMM time in the linear layers and in attention, ms.
  std::vector<double> linear_ms(libs.size(), 0.0), attention_ms(libs.size(), 0.0);
  for (size_t s = 0; s < gemms.size(); ++s) {
    const Gemm& g = gemms[s];
    std::printf("%-18s %c%c  %5lld %5lld %5lld %5lld", g.name.c_str(), g.ta ? 'T' : 'N', g.tb ? 'T' : 'N',
                static_cast<long long>(g.m), static_cast<long long>(g.n), static_cast<long long>(g.k),
                static_cast<long long>(g.count * g.units));
    for (size_t l = 0; l < libs.size(); ++l) {
      std::printf(" %12.1f", rates[s][l]);
      (g.units > 1 ? attention_ms : linear_ms)[l] += g.count * g.flop() / (rates[s][l] * 1e6);
    }
    std::printf("\n");
  }
  auto row = [&](const char* name, const std::vector<double>& ms) {
    std::printf("%-43s", name);
    for (double v : ms) std::printf(" %12.2f", v);
    std::printf("\n");
  };
  row("step's linear GEMMs, ms", linear_ms);
  row("step's attention GEMMs, ms", attention_ms);
  for (size_t l = 0; l < libs.size(); ++l) {
    std::printf("linear_ms_%s=%.2f attention_ms_%s=%.2f%s", libs[l].name.c_str(), linear_ms[l], libs[l].name.c_str(),
                attention_ms[l], l + 1 < libs.size() ? " " : "\n");
  }
  return 0;
}
