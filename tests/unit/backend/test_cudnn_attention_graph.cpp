// The cuDNN graphs of the fused attention (src/backend/cuda/cudnn_attention_graph.h), on the
// CPU. Without a GPU cuDNN still builds operation graphs and, for a described device, runs
// its engine heuristics and its support checks: whether a fused engine accepts the graph's
// pattern, types, shapes and strides. Only the last step, loading the driver to compile the
// engine's kernels, needs a GPU. So for an H100 every graph here must be turned down for that
// reason alone (or accepted, on a machine with a driver), never for its content; a float32
// graph, which the Hopper engines refuse, shows that the checks did run. Running the plans
// is tests/gpu/test_attention_gpu.cpp's part.
#include <gtest/gtest.h>

#include <cstdlib>

#include <set>
#include <string>
#include <vector>

#include "ops/attention_fused.h"
#include "strata/strata.h"

#if STRATA_HAS_CUDNN
#include "backend/cuda/cudnn_attention_graph.h"
#include "backend/cuda/cudnn_plan.h"
#endif

namespace strata {
namespace {

#if STRATA_HAS_CUDNN
using namespace strata::cudnn;

// An H100 SXM as cuDNN's device-properties schema describes a GPU (public figures).
constexpr const char* kH100 =
    R"({"deviceName": "NVIDIA H100 80GB HBM3", "deviceVer": 900, "cudaDeviceId": 0, "pciDeviceId": 0,
        "maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64], "regsPerBlock": 65536,
        "multiProcessorCount": 132, "warpSize": 32, "maxSharedMemoryPerBlock": 49152,
        "maxSharedMemoryPerBlockOptin": 232448, "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536,
        "maxCtasPerSM": 32, "maxThreadsPerBlock": 1024, "maxThreadsPerSM": 2048, "isTccDriver": 0,
        "supportCoopLaunch": 1, "smClockRateKHz": 1980000, "memClockRateKHz": 2619000, "l2CacheSize": 52428800,
        "totalGlobalMem": 85520809984, "driverVer": 13000})";

AttentionGeometry packed(int64_t b, int64_t h, int64_t t, int64_t d, bool causal, cudnnDataType_t io) {
  AttentionGeometry g;
  g.batch = b;
  g.heads = h;
  g.tq = g.tk = t;
  g.dim = d;
  g.causal = causal;
  g.io = io;
  g.q_strides = g.k_strides = g.v_strides = g.o_strides = g.do_strides = packed_strides({b, h, t, d});
  return g;
}

// q, k, v as GPT splits them from one [B, T, 3, H, D] projection: [B, H, T, D] views.
AttentionGeometry split_from_qkv(int64_t b, int64_t h, int64_t t, int64_t d) {
  AttentionGeometry g = packed(b, h, t, d, true, CUDNN_DATA_BFLOAT16);
  g.q_strides = g.k_strides = g.v_strides = {t * 3 * h * d, d, 3 * h * d, 1};
  return g;
}

// cuDNN's warnings while `fn` runs, one string per message.
template <class Fn>
std::vector<std::string> warnings_during(Fn&& fn) {
  static std::vector<std::string>* sink = nullptr;
  std::vector<std::string> got;
  sink = &got;
  check(cudnnSetCallback(CUDNN_SEV_WARNING_EN, nullptr,
                         [](cudnnSeverity_t, void*, const cudnnDebug_t*, const char* msg) {
                           // A message is a run of NUL-terminated lines ending with an empty one.
                           std::string text;
                           for (const char* p = msg; *p; p += std::char_traits<char>::length(p) + 1)
                             text.append(p).push_back('\n');
                           sink->push_back(text);
                         }),
        "cudnnSetCallback");
  fn();
  (void)cudnnSetCallback(0, nullptr, nullptr);
  sink = nullptr;
  return got;
}

// The statuses cuDNN gave for turning proposed configurations down.
std::set<std::string> rejection_statuses(const std::vector<std::string>& warnings) {
  std::set<std::string> statuses;
  for (const std::string& w : warnings) {
    for (size_t at = w.find("Warning: CUDNN_STATUS_"); at != std::string::npos;
         at = w.find("Warning: CUDNN_STATUS_", at + 1)) {
      const size_t begin = at + 9, end = w.find(';', begin);
      statuses.insert(w.substr(begin, end - begin));
    }
  }
  return statuses;
}

struct Verdict {
  size_t proposed = 0;
  std::set<std::string> statuses;
  bool planned = false;
};

Verdict judge_on_h100(const AttentionGraph& graph) {
  const Desc device = described_device(kH100);
  const Desc op_graph = operation_graph(graph.ops, nullptr, "attention");
  Verdict v;
  const auto warnings = warnings_during([&] {
    v.proposed = proposed_configs(op_graph, {nullptr, &device}).size();
    std::string why;
    v.planned = make_plan(op_graph, {nullptr, &device}, &why).has_value();
  });
  v.statuses = rejection_statuses(warnings);
  return v;
}

// Accepted by every check cuDNN can run without a driver.
void expect_accepted(const AttentionGraph& graph, const std::string& what) {
  const Verdict v = judge_on_h100(graph);
  if (v.planned) return;  // a machine with a driver compiled the kernels too
  EXPECT_EQ(v.statuses, std::set<std::string>{"CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING"})
      << what << ": cuDNN turned the graph down for its content";
}

TEST(CudnnAttentionGraph, BuildsAndFinalizesWithoutAGpu) {
  for (bool causal : {false, true}) {
    for (cudnnDataType_t io : {CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF}) {
      const AttentionGeometry g = packed(2, 3, 40, 64, causal, io);
      const AttentionGraph fwd = attention_forward_graph(g), bwd = attention_backward_graph(g);
      EXPECT_EQ(fwd.ops.size(), causal ? 14u : 10u);
      EXPECT_EQ(bwd.ops.size(), causal ? 22u : 18u);
      // The variant pack's tensors: the mask's -inf only with the mask, the scratch only backward.
      const std::set<int64_t> fwd_uids(fwd.uids.begin(), fwd.uids.end()), bwd_uids(bwd.uids.begin(), bwd.uids.end());
      std::set<int64_t> want_fwd{kQ, kK, kV, kO, kStats, kScale};
      std::set<int64_t> want_bwd{kQ, kK, kV, kO, kStats, kScale, kDo, kOne, kDq, kDk, kDv, kSoftmaxSum, kDqAccum};
      if (causal) {
        want_fwd.insert(kNegInf);
        want_bwd.insert(kNegInf);
      }
      EXPECT_EQ(fwd_uids, want_fwd);
      EXPECT_EQ(bwd_uids, want_bwd);
      EXPECT_NO_THROW(operation_graph(fwd.ops, nullptr, "forward"));
      EXPECT_NO_THROW(operation_graph(bwd.ops, nullptr, "backward"));
    }
  }
}

TEST(CudnnAttentionGraph, AnH100AcceptsTheForwardAndBackwardGraphs) {
  expect_accepted(attention_forward_graph(packed(2, 4, 128, 64, true, CUDNN_DATA_BFLOAT16)), "causal bf16 forward");
  expect_accepted(attention_backward_graph(packed(2, 4, 128, 64, true, CUDNN_DATA_BFLOAT16)), "causal bf16 backward");
  expect_accepted(attention_forward_graph(packed(1, 2, 96, 128, false, CUDNN_DATA_HALF)), "fp16 forward, D 128");
  expect_accepted(attention_backward_graph(packed(1, 2, 96, 128, false, CUDNN_DATA_HALF)), "fp16 backward, D 128");
  // GPT-2 124M's shape, q/k/v read in place from the fused projection.
  expect_accepted(attention_forward_graph(split_from_qkv(4, 12, 1024, 64)), "GPT-2 forward");
  expect_accepted(attention_backward_graph(split_from_qkv(4, 12, 1024, 64)), "GPT-2 backward");
}

TEST(CudnnAttentionGraph, TheChecksRunAndTurnDownWhatHopperCannotFuse) {
  const Verdict v = judge_on_h100(attention_forward_graph(packed(2, 4, 128, 64, true, CUDNN_DATA_FLOAT)));
  EXPECT_FALSE(v.planned);
  EXPECT_GT(v.proposed + v.statuses.size(), 0u);
  EXPECT_TRUE(v.statuses.count("CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH") > 0)
      << "float32 operands should be refused on sm_90; statuses seen: " << ::testing::PrintToString(v.statuses);
}

TEST(CudnnAttentionGraph, AnUnknownDeviceDescriptionIsAClearError) {
  try {
    (void)described_device(R"({"deviceName": "no such GPU"})");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device properties"), std::string::npos) << e.what();
  }
}

#endif  // STRATA_HAS_CUDNN

// Which calls the fused attention takes, decided without a GPU.
TEST(FusedAttentionChoice, RefusesWhatCuDnnCannotTake) {
  const Tensor q = zeros({2, 4, 8, 64}, {.dtype = DType::BFloat16});
  if (std::getenv("STRATA_FUSED_ATTENTION") == nullptr) {
    EXPECT_TRUE(cuda::fused_attention()) << "on by default";
  }
  cuda::set_fused_attention(false);
  EXPECT_EQ(detail::fused_attention_refusal(q, q, Tensor(), true), "cuda::fused_attention() is off");
  cuda::set_fused_attention(true);
  EXPECT_EQ(detail::fused_attention_refusal(q.to(DType::Float32), q, Tensor(), true),
            "dtype is not bfloat16/float16 (nor float32 under a 16-bit autocast scope)");
  {
    autocast::Scope bf16;
    EXPECT_EQ(detail::fused_attention_refusal(q.to(DType::Float32), q, Tensor(), true), "not on CUDA");
  }
  EXPECT_EQ(detail::fused_attention_refusal(q, q, zeros({8, 8}), false), "a mask is given");
  EXPECT_EQ(detail::fused_attention_refusal(q, zeros({2, 2, 8, 64}, {.dtype = DType::BFloat16}), Tensor(), false),
            "fewer kv heads than query heads");
  EXPECT_EQ(detail::fused_attention_refusal(q, zeros({2, 4, 9, 64}, {.dtype = DType::BFloat16}), Tensor(), true),
            "causal with Tq != Tk");
  EXPECT_EQ(detail::fused_attention_refusal(q, zeros({2, 4, 9, 64}, {.dtype = DType::BFloat16}), Tensor(), false),
            "not on CUDA");
  for (int64_t d : {60, 136}) {
    const Tensor qd = zeros({2, 4, 8, d}, {.dtype = DType::BFloat16});
    EXPECT_EQ(detail::fused_attention_refusal(qd, qd, Tensor(), true), "head dimension not a multiple of 8 up to 128");
  }
  const Tensor empty_q = zeros({0, 4, 8, 64}, {.dtype = DType::BFloat16});
  EXPECT_EQ(detail::fused_attention_refusal(empty_q, empty_q, Tensor(), true), "empty");
  EXPECT_EQ(detail::fused_attention_refusal(q, q, Tensor(), true), "not on CUDA");
}

}  // namespace
}  // namespace strata
