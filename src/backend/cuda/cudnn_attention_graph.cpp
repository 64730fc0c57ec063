#include "backend/cuda/cudnn_attention_graph.h"

#include <string>
#include <utility>

namespace strata::cudnn {
namespace {

using Dims = std::vector<int64_t>;

// Grows one graph: tensors get uids (virtual ones from 100 up), operations are appended.
class Builder {
 public:
  explicit Builder(const AttentionGeometry& g) : g_(g) {}

  Desc real(int64_t uid, cudnnDataType_t type, Dims dims, Dims strides, const std::string& name) {
    graph_.uids.push_back(uid);
    return keep(make_tensor({uid, type, std::move(dims), std::move(strides), false, false}, name));
  }
  // A host scalar passed by value at execution.
  Desc scalar(int64_t uid, const std::string& name) {
    graph_.uids.push_back(uid);
    return keep(make_tensor({uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true}, name));
  }
  Desc virt(Dims dims, const std::string& name, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    Dims strides = packed_strides(dims);
    return virt_strided(std::move(dims), std::move(strides), name, type);
  }
  Desc virt_strided(Dims dims, Dims strides, const std::string& name, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return keep(make_tensor({next_uid_++, type, std::move(dims), std::move(strides), true, false}, name));
  }

  // y = mode(x[, b]) into a new tensor of `dims` (float32 unless `type`).
  Desc pw(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Dims& dims, const std::string& name,
          cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    Desc y = virt(dims, name, type);
    add(pointwise(mode, CUDNN_DATA_FLOAT, x, b, nullptr, y, name));
    return y;
  }
  void pw_into(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y, const std::string& name) {
    add(pointwise(mode, CUDNN_DATA_FLOAT, x, b, nullptr, y, name));
  }
  Desc reduce(cudnnReduceTensorOp_t op, const Desc& x, const std::string& name) {
    Desc y = virt(rows(), name);
    add(reduction(op, CUDNN_DATA_FLOAT, x, y, name));
    return y;
  }
  // y: the same elements as x under other dims and strides (a transposed view).
  void reshape_into(const Desc& x, const Desc& y, const std::string& name) { add(reshape(x, y, name)); }
  void mm(const Desc& a, const Desc& b, const Desc& c, const std::string& name) {
    add(matmul(a, b, c, CUDNN_DATA_FLOAT, name));
  }

  // Where the causal mask hides a score: keys after the query (row < column) become -inf.
  Desc causal_mask(const Desc& s, const Desc& neg_inf) {
    Desc row = virt(scores(), "row index", CUDNN_DATA_INT32);
    add(pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, nullptr, nullptr, row, "row index", 2));
    Desc col = virt(scores(), "column index", CUDNN_DATA_INT32);
    add(pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, nullptr, nullptr, col, "column index", 3));
    Desc keep_mask = virt(scores(), "row >= column", CUDNN_DATA_BOOLEAN);
    add(pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, nullptr, keep_mask, "row >= column"));
    Desc masked = virt(scores(), "masked scores");
    add(pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, &neg_inf, &keep_mask, masked, "causal select"));
    return masked;
  }

  Dims scores() const { return {g_.batch, g_.heads, g_.tq, g_.tk}; }
  Dims rows() const { return {g_.batch, g_.heads, g_.tq, 1}; }
  Dims qshape() const { return {g_.batch, g_.heads, g_.tq, g_.dim}; }
  Dims kshape() const { return {g_.batch, g_.heads, g_.tk, g_.dim}; }
  // [B, H, D, Tk]: a key or value tensor read transposed, in its own memory.
  Dims transposed_kshape() const { return {g_.batch, g_.heads, g_.dim, g_.tk}; }
  static Dims swap_last(Dims s) {
    std::swap(s[2], s[3]);
    return s;
  }

  AttentionGraph take() { return std::move(graph_); }

 private:
  Desc keep(Desc d) {
    graph_.tensors.push_back(d);
    return d;
  }
  void add(Desc op) { graph_.ops.push_back(std::move(op)); }

  const AttentionGeometry& g_;
  AttentionGraph graph_;
  int64_t next_uid_ = 100;
};

}  // namespace

AttentionGraph attention_forward_graph(const AttentionGeometry& g) {
  Builder b(g);
  const Desc q = b.real(kQ, g.io, b.qshape(), g.q_strides, "Q");
  const Desc kt = b.real(kK, g.io, b.transposed_kshape(), Builder::swap_last(g.k_strides), "K^T");
  const Desc v = b.real(kV, g.io, b.kshape(), g.v_strides, "V");
  const Desc o = b.real(kO, g.io, b.qshape(), g.o_strides, "O");
  const Desc stats = b.real(kStats, CUDNN_DATA_FLOAT, b.rows(), packed_strides(b.rows()), "Stats");
  const Desc scale = b.scalar(kScale, "scale");

  const Desc s = b.virt(b.scores(), "Q K^T");
  b.mm(q, kt, s, "Q K^T");
  Desc scaled = b.pw(CUDNN_POINTWISE_MUL, s, &scale, b.scores(), "scaled scores");
  if (g.causal) scaled = b.causal_mask(scaled, b.scalar(kNegInf, "-inf"));
  const Desc max = b.reduce(CUDNN_REDUCE_TENSOR_MAX, scaled, "row max");
  const Desc shifted = b.pw(CUDNN_POINTWISE_SUB, scaled, &max, b.scores(), "scores - max");
  const Desc e = b.pw(CUDNN_POINTWISE_EXP, shifted, nullptr, b.scores(), "exp");
  const Desc sum = b.reduce(CUDNN_REDUCE_TENSOR_ADD, e, "row sum");
  const Desc log_sum = b.pw(CUDNN_POINTWISE_LOG, sum, nullptr, b.rows(), "log sum");
  b.pw_into(CUDNN_POINTWISE_ADD, max, &log_sum, stats, "stats");
  // A product's operands share one type (cuDNN's fused engines take no float32 operand on
  // Hopper): P is rounded to the input type before P V, as flash attention does.
  const Desc p = b.pw(CUDNN_POINTWISE_DIV, e, &sum, b.scores(), "probabilities", g.io);
  b.mm(p, v, o, "P V");
  return b.take();
}

AttentionGraph attention_backward_graph(const AttentionGeometry& g) {
  Builder b(g);
  const Dims qs = b.qshape(), ks = b.kshape();
  const Desc q = b.real(kQ, g.io, qs, g.q_strides, "Q");
  const Desc kt = b.real(kK, g.io, b.transposed_kshape(), Builder::swap_last(g.k_strides), "K^T");
  const Desc vt = b.real(kV, g.io, b.transposed_kshape(), Builder::swap_last(g.v_strides), "V^T");
  const Desc o = b.real(kO, g.io, qs, g.o_strides, "O");
  const Desc d_o = b.real(kDo, g.io, qs, g.do_strides, "dO");
  const Desc stats = b.real(kStats, CUDNN_DATA_FLOAT, b.rows(), packed_strides(b.rows()), "Stats");
  const Desc dq = b.real(kDq, g.io, qs, packed_strides(qs), "dQ");
  const Desc dk = b.real(kDk, g.io, ks, packed_strides(ks), "dK");
  const Desc dv = b.real(kDv, g.io, ks, packed_strides(ks), "dV");
  const Desc softmax_sum = b.real(kSoftmaxSum, CUDNN_DATA_FLOAT, b.rows(), packed_strides(b.rows()), "rowsum(dO O)");
  const Desc dq_accum = b.real(kDqAccum, CUDNN_DATA_FLOAT, qs, packed_strides(qs), "dQ (float32)");
  const Desc scale = b.scalar(kScale, "scale");
  const Desc one = b.scalar(kOne, "one");

  // sum_i = rowsum(dO * O), stored for the engine's second pass.
  const Desc d_o_o = b.pw(CUDNN_POINTWISE_MUL, d_o, &o, qs, "dO * O");
  const Desc row_sum = b.reduce(CUDNN_REDUCE_TENSOR_ADD, d_o_o, "rowsum(dO * O)");
  b.pw_into(CUDNN_POINTWISE_MUL, row_sum, &one, softmax_sum, "store rowsum");

  // P = exp(scale * Q K^T - Stats), masked.
  const Desc s = b.virt(b.scores(), "Q K^T");
  b.mm(q, kt, s, "Q K^T");
  const Desc scaled = b.pw(CUDNN_POINTWISE_MUL, s, &scale, b.scores(), "scaled scores");
  Desc centered = b.pw(CUDNN_POINTWISE_SUB, scaled, &stats, b.scores(), "scores - stats");
  if (g.causal) centered = b.causal_mask(centered, b.scalar(kNegInf, "-inf"));
  const Desc p = b.pw(CUDNN_POINTWISE_EXP, centered, nullptr, b.scores(), "probabilities");

  // dV = P^T dO, P^T read as the transposed view of P's memory, in the input type.
  const Desc pt =
      b.virt_strided({g.batch, g.heads, g.tk, g.tq}, Builder::swap_last(packed_strides(b.scores())), "P^T", g.io);
  b.reshape_into(p, pt, "P^T");
  b.mm(pt, d_o, dv, "P^T dO");

  // dS = scale * P * (dO V^T - sum).
  const Desc dp = b.virt(b.scores(), "dO V^T");
  b.mm(d_o, vt, dp, "dO V^T");
  const Desc dp_centered = b.pw(CUDNN_POINTWISE_SUB, dp, &softmax_sum, b.scores(), "dP - rowsum");
  const Desc dp_p = b.pw(CUDNN_POINTWISE_MUL, dp_centered, &p, b.scores(), "P * (dP - rowsum)");
  const Desc ds = b.pw(CUDNN_POINTWISE_MUL, dp_p, &scale, b.scores(), "dS", g.io);

  // dK = dS^T Q.
  const Desc dst =
      b.virt_strided({g.batch, g.heads, g.tk, g.tq}, Builder::swap_last(packed_strides(b.scores())), "dS^T", g.io);
  b.reshape_into(ds, dst, "dS^T");
  b.mm(dst, q, dk, "dS^T Q");

  // dQ = dS K, accumulated in float32, then converted.
  const Desc k = b.virt_strided(ks, g.k_strides, "K", g.io);
  b.reshape_into(kt, k, "K from K^T");
  b.mm(ds, k, dq_accum, "dS K");
  b.pw_into(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, dq, "dQ to the input type");
  return b.take();
}

}  // namespace strata::cudnn
