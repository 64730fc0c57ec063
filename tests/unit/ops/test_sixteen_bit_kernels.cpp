// Kernels that read and write bfloat16/float16 themselves (strata_kernels/common/storage16.h):
// each widens its 16-bit loads exactly, runs the float32 kernel's arithmetic and rounds once
// on store, so on the CPU executor (which runs the GPU's kernel source) its output and
// gradients equal the float32 op on the widened inputs, rounded once: bit for bit, for both
// 16-bit dtypes. None runs a separate conversion (autocast::counters() stays still).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "strata/strata.h"

namespace strata {
namespace {

Tensor wide(const Tensor& t) { return t.to(DType::Float32); }

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(wide(got).to_vector<float>(), wide(want).to_vector<float>()) << what;
}

// A gradient in `dtype`: the float32 reference rounded once (or itself, for float32).
Tensor rounded(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

struct Case {
  std::string name;
  // The op on its input; the parameters (float32 leaves) come from `params`.
  std::function<Tensor(const Tensor&, const std::vector<Tensor>&)> op;
  std::vector<Tensor> params;
};

// op(x_in) with x_in in `in` dtype (the op giving `out`; under a 16-bit-activation scope of
// `out` when `scoped`) against op(widened x_in) outside any scope, rounded to `out`; input
// gradients likewise (rounded to `in`), parameter gradients float32 and equal.
void check_against_widened(const Case& c, const Tensor& x32, const Tensor& g32, DType in, DType out,
                           bool scoped = false) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(in)) + " -> " + std::string(dtype_name(out)));
  auto fresh = [&] {
    std::vector<Tensor> p;
    for (const Tensor& t : c.params) p.push_back(t.clone().set_requires_grad(true));
    return p;
  };
  const std::vector<Tensor> p16 = fresh(), p32 = fresh();
  const Tensor x = x32.to(in).detach().set_requires_grad(true);
  const Tensor xw = wide(x.detach()).set_requires_grad(true);
  autocast::reset_counters();
  Tensor y;
  {
    autocast::Scope scope(out, {.activations = true}, scoped);
    y = c.op(x, p16);
  }
  ASSERT_EQ(y.dtype(), out);
  const Tensor g = g32.to(out);
  y.backward(g);
  EXPECT_EQ(autocast::counters().conversions, 0u) << "a conversion ran outside the kernel";
  const Tensor yw = c.op(xw, p32);
  yw.backward(wide(g));
  expect_same_bits(y, rounded(yw.detach(), out), "output");
  expect_same_bits(x.grad(), rounded(xw.grad(), in), "input gradient");
  for (size_t i = 0; i < p16.size(); ++i) expect_same_bits(p16[i].grad(), p32[i].grad(), "parameter gradient");
}

const DType kSixteen[] = {DType::BFloat16, DType::Float16};

// layer_norm and rms_norm: a 16-bit x gives its own dtype; a float32 x under 16-bit
// activations gives the scope's.
TEST(SixteenBitKernels, NormsReadAndWrite16Bit) {
  Generator gen(61);
  // Values well inside float16's range (no overflow in x or the output).
  const Tensor x = add(mul(randn({9, 72}, {}, &gen), 3.0), 1.5), g = randn({9, 72}, {}, &gen);
  const Tensor w = add(randn({72}, {}, &gen), 1.0), b = randn({72}, {}, &gen);
  const Case ln{
      "layer_norm", [](const Tensor& t, const std::vector<Tensor>& p) { return layer_norm(t, p[0], p[1]); }, {w, b}};
  const Case ln_plain{"layer_norm without parameters",
                      [](const Tensor& t, const std::vector<Tensor>&) { return layer_norm(t, Tensor(), Tensor()); },
                      {}};
  const Case rms{"rms_norm", [](const Tensor& t, const std::vector<Tensor>& p) { return rms_norm(t, p[0]); }, {w}};
  const Case rms_plain{
      "rms_norm without weight", [](const Tensor& t, const std::vector<Tensor>&) { return rms_norm(t, Tensor()); }, {}};
  for (const DType dt : kSixteen) {
    for (const Case* c : {&ln, &ln_plain, &rms, &rms_plain}) check_against_widened(*c, x, g, dt, dt);
    check_against_widened(ln, x, g, DType::Float32, dt, /*scoped=*/true);
    check_against_widened(rms, x, g, DType::Float32, dt, /*scoped=*/true);
  }
}

// gelu, silu, softmax, log_softmax (last dimension) and dropout: one pass over 16-bit memory each
// way; values across GELU's and SiLU's curved range (|x| up to ~9), the tails included.
TEST(SixteenBitKernels, ActivationsAndSoftmaxReadAndWrite16Bit) {
  Generator gen(62);
  const Tensor x = mul(randn({7, 130}, {}, &gen), 3.0), g = randn({7, 130}, {}, &gen);
  const std::vector<Case> cases = {
      {"gelu", [](const Tensor& t, const std::vector<Tensor>&) { return gelu(t); }, {}},
      {"silu", [](const Tensor& t, const std::vector<Tensor>&) { return silu(t); }, {}},
      {"softmax", [](const Tensor& t, const std::vector<Tensor>&) { return softmax(t, -1); }, {}},
      {"log_softmax", [](const Tensor& t, const std::vector<Tensor>&) { return log_softmax(t, 1); }, {}},
      // The same (seed, offset) each call, so both runs drop the same elements.
      {"dropout",
       [](const Tensor& t, const std::vector<Tensor>&) {
         Generator drop(7);
         return dropout(t, 0.3, true, &drop);
       },
       {}},
  };
  for (const Case& c : cases)
    for (const DType dt : kSixteen) check_against_widened(c, x, g, dt, dt);
}

// a op b with a in `da`, b in `db` (float32 or the 16-bit dt; a mixed pair under an autocast
// scope, which gives float32) against the float32 op of the widened operands, rounded once
// to the result's dtype; each gradient likewise, rounded to its operand's dtype.
void check_binary(const std::function<Tensor(const Tensor&, const Tensor&)>& op, const std::string& name,
                  const Tensor& a32, const Tensor& b32, const Tensor& g32, DType da, DType db, DType dt) {
  SCOPED_TRACE(name + " " + std::string(dtype_name(da)) + ", " + std::string(dtype_name(db)));
  const Tensor a = a32.to(da).detach().set_requires_grad(true), b = b32.to(db).detach().set_requires_grad(true);
  const Tensor aw = wide(a.detach()).set_requires_grad(true), bw = wide(b.detach()).set_requires_grad(true);
  const DType out = da == db ? da : DType::Float32;
  autocast::reset_counters();
  Tensor y;
  {
    autocast::Scope scope(dt, {.activations = true}, da != db);
    y = op(a, b);
  }
  ASSERT_EQ(y.dtype(), out);
  y.backward(g32.to(out));
  // Only a float32 output's gradient handed to a 16-bit addend changes dtype by itself.
  const bool rounds_grad = name == "add" && da != db;
  EXPECT_EQ(autocast::counters().conversions, rounds_grad ? 1u : 0u);
  const Tensor yw = op(aw, bw);
  yw.backward(wide(g32.to(out)));
  expect_same_bits(y, rounded(yw.detach(), out), "output");
  expect_same_bits(a.grad(), rounded(aw.grad(), da), "a's gradient");
  expect_same_bits(b.grad(), rounded(bw.grad(), db), "b's gradient");
}

// Same-shape add and mul with 16-bit operands: both 16-bit (16-bit out) or one float32 (the
// residual add: float32 out), either order.
TEST(SixteenBitKernels, AddAndMulRead16BitOperands) {
  Generator gen(63);
  const Tensor a = randn({5, 66}, {}, &gen), b = mul(randn({5, 66}, {}, &gen), 4.0), g = randn({5, 66}, {}, &gen);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
  };
  for (const auto& [name, op] : ops) {
    for (const DType dt : kSixteen) {
      check_binary(op, name, a, b, g, dt, dt, dt);
      check_binary(op, name, a, b, g, DType::Float32, dt, dt);
      check_binary(op, name, a, b, g, dt, DType::Float32, dt);
    }
  }
}

// cross_entropy reads 16-bit logits: the float32 loss of the widened logits exactly, the
// logits' gradient (an ignored row's zeros included) rounded once to their dtype.
TEST(SixteenBitKernels, CrossEntropyReads16BitLogits) {
  Generator gen(64);
  const Tensor logits = mul(randn({6, 41}, {}, &gen), 2.0);
  Tensor targets = randint(0, 41, {6}, {.dtype = DType::Int64}, &gen);
  targets = where(eq(arange(0, 6), 2.0), full({6}, -100, {.dtype = DType::Int64}), targets);
  for (const DType dt : kSixteen) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor l16 = logits.to(dt).detach().set_requires_grad(true);
    const Tensor lw = wide(l16.detach()).set_requires_grad(true);
    autocast::reset_counters();
    const Tensor loss16 = cross_entropy(l16, targets, -100);
    loss16.backward();
    EXPECT_EQ(autocast::counters().conversions, 0u);
    const Tensor loss32 = cross_entropy(lw, targets, -100);
    loss32.backward();
    ASSERT_EQ(loss16.dtype(), DType::Float32);
    EXPECT_EQ(loss16.item(), loss32.item());
    expect_same_bits(l16.grad(), lw.grad().to(dt), "logits gradient");
    EXPECT_EQ(wide(l16.grad()).select(0, 2).abs().sum().item(), 0.0) << "the ignored row's gradient";
  }
}

// Attention on 16-bit q, k, v under 16-bit activations (the CPU's composed path): its
// softmax kernel reads the 16-bit scores and writes 16-bit probabilities, equal bit for
// bit to the float32 softmax of the widened, scaled scores rounded once (non-causal:
// prefix_softmax_row's scale-inside-the-exp is then softmax_row of scale * s exactly), and
// no conversion runs forward or backward.
TEST(SixteenBitKernels, AttentionSoftmaxReads16BitScores) {
  Generator gen(65);
  const Tensor q = randn({2, 2, 6, 8}, {}, &gen), k = randn({2, 2, 9, 8}, {}, &gen), v = randn({2, 2, 9, 8}, {}, &gen);
  const double scale = 0.35;
  for (const DType dt : kSixteen) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor q16 = q.to(dt).detach().set_requires_grad(true), k16 = k.to(dt), v16 = v.to(dt);
    autocast::reset_counters();
    Tensor out, want;
    {
      autocast::Scope scope(dt, {.activations = true});
      out = attention(q16, k16, v16, {.scale = scale});
      const Tensor scores = matmul(q16.detach(), k16.transpose(-1, -2));
      ASSERT_EQ(scores.dtype(), dt);
      want = matmul(softmax(mul(wide(scores), scale), -1).to(dt), v16);
    }
    ASSERT_EQ(out.dtype(), dt);
    expect_same_bits(out, want, "attention output");
    out.backward(ones_like(out));
    EXPECT_EQ(autocast::counters().conversions, 0u);
    EXPECT_EQ(q16.grad().dtype(), dt);
  }
}

// rotary_embedding of 16-bit q/k with float32 tables: rotated in float32, rounded once.
TEST(SixteenBitKernels, RotaryReads16BitWithFloat32Tables) {
  Generator gen(66);
  const Tensor x = mul(randn({2, 3, 5, 16}, {}, &gen), 2.0), g = randn({2, 3, 5, 16}, {}, &gen);
  const RotaryTables tables = rotary_tables(5, 16);
  const Case rope{
      "rotary_embedding",
      [&](const Tensor& t, const std::vector<Tensor>&) { return rotary_embedding(t, tables.cos, tables.sin); },
      {}};
  for (const DType dt : kSixteen) check_against_widened(rope, x, g, dt, dt);
}

}  // namespace
}  // namespace strata
