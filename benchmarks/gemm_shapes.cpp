// The GEMMs of one GPT training step (the model of benchmarks/gpt_step.cpp) through every
// GEMM library found at configure time, side by side: OpenBLAS (cblas_sgemm, always), BLIS
// (native bli_sgemm) and oneDNN (dnnl_sgemm, and a matmul primitive made once per shape).
// Each shape is called exactly as strata calls it (row-major, transposes as flags, beta 1
// where a bias was copied into the output first). Prints GFLOP/s per shape and library and
// the step's total GEMM time per library (each shape's time times its count per step).
// Attention's per-head products run as strata runs them: in blocks of query rows, one
// single-threaded call per (batch, head) in an OpenMP loop; their rows show the largest
// block's m, n, k and the rate over all blocks.
// benchmarks/run_gemm_shapes.sh runs it at 1 and 2 threads.
#include <cblas.h>
#include <dlfcn.h>
#ifndef OPENBLAS_VERSION
#error "cblas.h is not OpenBLAS's: the OpenBLAS include directory must come before BLIS's"
#endif
#include <omp.h>

#include <algorithm>
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
struct Product {
  bool ta, tb;
  int64_t m, n, k;
  float beta;
  int64_t lda() const { return ta ? m : k; }
  int64_t ldb() const { return tb ? k : n; }
  double flop() const { return 2.0 * double(m) * double(n) * double(k); }
};

// One row of the table: products run one after another, `count` times per training step.
struct Gemm {
  std::string name;
  std::vector<Product> products;  // one for a linear layer; one per row block in attention
  int count;                      // per training step
  int64_t units = 1;  // > 1: each product as that many single-threaded calls in an OpenMP loop, one per head
  double flop() const {
    double f = 0;
    for (const Product& p : products) f += p.flop();
    return f * double(units);
  }
  // What the table's m, n, k columns show: the largest product.
  const Product& largest() const { return products.back(); }
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
    g.push_back({n + " fwd", {{false, true, rows, l.out, l.in, l.bias ? 1.0f : 0.0f}}, l.count});
    g.push_back({n + " dX", {{false, false, rows, l.in, l.out, 0.0f}}, l.count});
    g.push_back({n + " dW", {{true, false, l.out, l.in, rows, 0.0f}}, l.count});
  }
  return g;
}

// Causal attention per (batch, head) in blocks of `block` query rows, as cpu/attention.cpp
// runs it (32 rows up to T 256): rows [i0, i1) see keys [0, i1). Scores Q K^T and output P V
// per row block; backward dP = dO V^T and dQ = dS K per row block, dV = P^T dO and
// dK = dS^T Q per block of keys over the rows that see them. Operands here are compact;
// strata reads q, k and v in place from the qkv projection (leading dimension 3C).
std::vector<Gemm> attention_gemms(int64_t batch, int64_t t, int64_t heads, int64_t d, int layers, int64_t block) {
  std::vector<Product> qk, pv, dq, dkv;
  for (int64_t i0 = 0; i0 < t; i0 += block) {
    const int64_t m = std::min(block, t - i0), keys = i0 + m;
    qk.push_back({false, true, m, keys, d, 0.0f});
    pv.push_back({false, false, m, d, keys, 0.0f});
    dq.push_back({false, false, m, d, keys, 0.0f});
    dkv.push_back({true, false, m, d, t - (keys - m), 0.0f});  // keys [i0, i1) over rows [i0, t)
  }
  std::reverse(dkv.begin(), dkv.end());  // largest last, like the others
  const int64_t u = batch * heads;
  return {{"attn QK^T", qk, layers, u},
          {"attn PV", pv, layers, u},
          {"attn dP", qk, layers, u},
          {"attn dQ", dq, layers, u},
          {"attn dV,dK", dkv, 2 * layers, u}};
}

// Product i of g into c (A and B are shared by all units, each unit has its own C).
using Run = std::function<void(size_t i, const float* a, const float* b, float* c)>;

struct Library {
  std::string name;
  std::function<Run(const Gemm&)> prepare;  // per-shape setup (primitives), outside the timing
};

// Which shared object a function pointer resolves to: two BLAS libraries in one process
// both export cblas_sgemm, and link order decides which one we call.
std::string library_of(const void* fn) {
  Dl_info info{};
  return dladdr(fn, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
}

std::vector<Library> libraries(int threads) {
  std::vector<Library> libs;
  libs.push_back({"openblas", [](const Gemm& g) -> Run {
                    return [&g](size_t i, const float* a, const float* b, float* c) {
                      const Product& p = g.products[i];
                      cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans,
                                  int(p.m), int(p.n), int(p.k), 1.0f, a, int(p.lda()), b, int(p.ldb()), p.beta, c,
                                  int(p.n));
                    };
                  }});
  std::printf("openblas: cblas_sgemm from %s\n", library_of(reinterpret_cast<const void*>(&cblas_sgemm)).c_str());
#ifdef STRATA_BENCH_HAS_BLIS
  bli_thread_set_num_threads(threads);
  std::printf("blis: %s, kernels for %s, %d threads\n", bli_info_get_version_str(),
              bli_arch_string(bli_arch_query_id()), threads);
  libs.push_back({"blis", [](const Gemm& g) -> Run {
                    return [&g](size_t i, const float* a, const float* b, float* c) {
                      // Row-major operands as BLIS (row stride, column stride) pairs; one
                      // thread per call inside the per-head loop, as BLIS would nest otherwise.
                      const Product& p = g.products[i];
                      float one = 1.0f, beta = p.beta;
                      const inc_t lda = p.lda(), ldb = p.ldb();
                      rntm_t rntm = BLIS_RNTM_INITIALIZER;
                      if (g.units > 1) bli_rntm_set_num_threads(1, &rntm);
                      bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, p.m, p.n, p.k, &one, const_cast<float*>(a),
                                   p.ta ? 1 : lda, p.ta ? lda : 1, const_cast<float*>(b), p.tb ? 1 : ldb,
                                   p.tb ? ldb : 1, &beta, c, p.n, 1, nullptr, g.units > 1 ? &rntm : nullptr);
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
  libs.push_back({"dnnl_sgemm", [](const Gemm& g) -> Run {
                    return [&g](size_t i, const float* a, const float* b, float* c) {
                      const Product& p = g.products[i];
                      dnnl_sgemm(p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.m, p.n, p.k, 1.0f, a, p.lda(), b, p.ldb(),
                                 p.beta, c, p.n);
                    };
                  }});
  libs.push_back(
      {"dnnl_matmul", [](const Gemm& g) -> Run {
         using namespace dnnl;
         using dims = memory::dims;
         struct Prepared {
           memory::desc a, b, c;
           matmul prim;
         };
         auto eng = std::make_shared<engine>(engine::kind::cpu, 0);
         auto prepared = std::make_shared<std::vector<Prepared>>();
         for (const Product& p : g.products) {
           const memory::desc a({p.m, p.k}, memory::data_type::f32, p.ta ? dims{1, p.lda()} : dims{p.lda(), 1});
           const memory::desc b({p.k, p.n}, memory::data_type::f32, p.tb ? dims{1, p.ldb()} : dims{p.ldb(), 1});
           const memory::desc c({p.m, p.n}, memory::data_type::f32, dims{p.n, 1});
           primitive_attr attr;
           if (p.beta != 0.0f) {
             post_ops po;
             po.append_sum(p.beta);
             attr.set_post_ops(po);
           }
#if DNNL_VERSION_MAJOR >= 3
           prepared->push_back({a, b, c, matmul(matmul::primitive_desc(*eng, a, b, c, attr))});
#else
                      prepared->push_back({a, b, c, matmul(matmul::primitive_desc(matmul::desc(a, b, c), attr, *eng))});
#endif
         }
         return [eng, prepared](size_t i, const float* pa, const float* pb, float* pc) {
           const Prepared& p = (*prepared)[i];
           stream s(*eng);
           memory ma(p.a, *eng, const_cast<float*>(pa)), mb(p.b, *eng, const_cast<float*>(pb)), mc(p.c, *eng, pc);
           p.prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
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
  const int64_t block = context <= 256 ? std::min<int64_t>(context, 32) : 64;  // cpu/attention.cpp's block_rows
  for (const Gemm& g : attention_gemms(batch, context, heads, width / heads, layers, block)) gemms.push_back(g);
  const std::vector<Library> libs = libraries(threads);

  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // rates[shape][library]: median GFLOP/s. The libraries take turns inside each repetition,
  // so all of them see the machine in about the same state.
  std::vector<std::vector<double>> rates(gemms.size());
  for (size_t s = 0; s < gemms.size(); ++s) {
    const Gemm& g = gemms[s];
    const Product& big = g.largest();
    std::vector<float> a(size_t(big.m * big.k)), b(size_t(big.k * big.n)), c(size_t(big.m * big.n * g.units));
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
          for (int64_t u = 0; u < g.units; ++u) {
            for (size_t p = 0; p < g.products.size(); ++p) run(p, a.data(), b.data(), c.data() + u * big.m * big.n);
          }
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
    const Product& big = g.largest();
    std::printf("%-18s %c%c  %5lld %5lld %5lld %5lld", g.name.c_str(), big.ta ? 'T' : 'N', big.tb ? 'T' : 'N',
                static_cast<long long>(big.m), static_cast<long long>(big.n), static_cast<long long>(big.k),
                static_cast<long long>(g.count * g.units * int64_t(g.products.size())));
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
