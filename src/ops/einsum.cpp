// einsum: the equation becomes one label per operand dimension; then diagonals, sums over
// labels no one else uses, and a left-to-right chain of matmuls over views of the operands.
// All of these are differentiable, so einsum needs no backward of its own.
#include "strata/ops/einsum.h"

#include <algorithm>
#include <array>
#include <map>

#include "strata/ops/elementwise.h"
#include "strata/ops/linalg.h"
#include "strata/ops/reduce.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

// A dimension's label: 0-25 'A'-'Z' and 26-51 'a'-'z' (so label order is torch's implicit
// output order), kEllipsis + k the k-th dimension of the broadcast "..." from its left.
constexpr int kLetters = 52;
constexpr int kEllipsis = kLetters;

char letter_of(int label) { return static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)); }

std::string label_name(int label) {
  if (label < kLetters) return std::string("index '") + letter_of(label) + "'";
  return "dimension " + std::to_string(label - kEllipsis) + " of \"...\"";
}

// One term of the equation: its letters (and their positions in the equation) and where
// "..." stands among them.
struct Term {
  std::vector<int> letters;
  std::vector<size_t> positions;
  bool has_ellipsis = false;
  size_t ellipsis_at = 0;  // the number of letters before "..."
  std::string text;
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

[[noreturn]] void malformed(const std::string& eq, size_t pos, const std::string& what) {
  STRATA_FAIL("einsum: equation \"", eq, "\" is malformed at position ", pos, ": ", what);
}

Term parse_term(const std::string& eq, size_t begin, size_t end) {
  Term t;
  t.text = eq.substr(begin, end - begin);
  for (size_t i = begin; i < end; ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
      t.letters.push_back(c <= 'Z' ? c - 'A' : 26 + (c - 'a'));
      t.positions.push_back(i);
    } else if (c == '.') {
      if (i + 2 >= end || eq[i + 1] != '.' || eq[i + 2] != '.') malformed(eq, i, "'.' outside \"...\"");
      if (t.has_ellipsis) malformed(eq, i, "a second \"...\" in one term");
      t.has_ellipsis = true;
      t.ellipsis_at = t.letters.size();
      i += 2;
    } else {
      malformed(eq, i, std::string("unexpected character '") + c + "' (expected a-z, A-Z, \"...\", ',' or \"->\")");
    }
  }
  return t;
}

Equation parse(const std::string& eq) {
  Equation e;
  const size_t arrow = eq.find("->");
  const size_t lhs_end = arrow == std::string::npos ? eq.size() : arrow;
  size_t begin = 0;
  for (size_t i = 0; i <= lhs_end; ++i) {
    if (i == lhs_end || eq[i] == ',') {
      e.inputs.push_back(parse_term(eq, begin, i));
      begin = i + 1;
    }
  }
  if (arrow != std::string::npos) {  // a second "->" fails in parse_term at its '-'
    e.explicit_output = true;
    e.output = parse_term(eq, arrow + 2, eq.size());
  }
  return e;
}

// An operand with one label per dimension.
struct Labelled {
  Tensor t;
  std::vector<int> labels;
};

// The size of each label and the operand that gave it (for messages).
struct Seen {
  int64_t size;
  size_t operand;
};
using Sizes = std::map<int, Seen>;

// The number of dimensions "..." stands for in operand i.
int64_t ellipsis_rank(const std::string& eq, const Term& term, const Tensor& t, size_t i) {
  const auto named = static_cast<int64_t>(term.letters.size());
  STRATA_CHECK(term.has_ellipsis ? t.dim() >= named : t.dim() == named, "einsum: operand ", i, " of \"", eq,
               "\" has shape ", t.shape(), " (", t.dim(), " dimensions) but its term \"", term.text, "\" names ", named,
               term.has_ellipsis ? " besides \"...\"" : "");
  return term.has_ellipsis ? t.dim() - named : 0;
}

// The term's labels with its "..." standing for `rank` dimensions, aligned to the right of
// the widest "..." (`widest` dimensions), as broadcasting aligns shapes.
std::vector<int> expand_labels(const Term& term, int64_t rank, int64_t widest) {
  const auto at = term.letters.begin() + static_cast<std::ptrdiff_t>(term.ellipsis_at);
  std::vector<int> labels(term.letters.begin(), at);
  for (int64_t k = 0; k < rank; ++k) labels.push_back(kEllipsis + static_cast<int>(widest - rank + k));
  labels.insert(labels.end(), at, term.letters.end());
  return labels;
}

// Records every label's size: a letter must have one size everywhere, "..." dimensions
// broadcast (1 against n).
void record_sizes(const std::string& eq, const std::vector<Labelled>& ops, Sizes* sizes) {
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t d = 0; d < ops[i].labels.size(); ++d) {
      const int l = ops[i].labels[d];
      const int64_t n = ops[i].t.size(static_cast<int64_t>(d));
      auto [it, fresh] = sizes->try_emplace(l, Seen{n, i});
      Seen& s = it->second;
      if (fresh || s.size == n) continue;
      STRATA_CHECK(l >= kEllipsis && (s.size == 1 || n == 1), "einsum: ", label_name(l), " of \"", eq, "\" has size ",
                   s.size, " in operand ", s.operand, " (shape ", ops[s.operand].t.shape(), ") but size ", n,
                   " in operand ", i, " (shape ", ops[i].t.shape(), ")", l >= kEllipsis ? " and neither is 1" : "");
      if (s.size == 1) s = Seen{n, i};
    }
  }
}

// The output's labels: explicit, or "..." then the letters used exactly once, in order.
std::vector<int> output_labels(const std::string& eq, const Equation& e, int64_t widest) {
  std::array<int, kLetters> count{};
  for (const Term& t : e.inputs)
    for (int l : t.letters) ++count[static_cast<size_t>(l)];
  if (!e.explicit_output) {
    std::vector<int> out;
    for (int64_t k = 0; k < widest; ++k) out.push_back(kEllipsis + static_cast<int>(k));
    for (int l = 0; l < kLetters; ++l)
      if (count[static_cast<size_t>(l)] == 1) out.push_back(l);
    return out;
  }
  std::array<bool, kLetters> used{};
  const Term& o = e.output;
  for (size_t j = 0; j < o.letters.size(); ++j) {
    const auto l = static_cast<size_t>(o.letters[j]);
    if (count[l] == 0) malformed(eq, o.positions[j], "output " + label_name(o.letters[j]) + " appears in no input");
    if (used[l]) malformed(eq, o.positions[j], "output " + label_name(o.letters[j]) + " appears twice");
    used[l] = true;
  }
  return expand_labels(o, o.has_ellipsis ? widest : 0, widest);
}

// Each operand's labels, its "..." aligned to the right of the widest one (`widest`).
std::vector<Labelled> labelled_operands(const std::string& eq, const Equation& e, const std::vector<Tensor>& operands,
                                        int64_t* widest) {
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < operands.size(); ++i) ranks.push_back(ellipsis_rank(eq, e.inputs[i], operands[i], i));
  *widest = 0;
  for (int64_t r : ranks) *widest = std::max(*widest, r);
  std::vector<Labelled> ops;
  for (size_t i = 0; i < operands.size(); ++i)
    ops.push_back({operands[i], expand_labels(e.inputs[i], ranks[i], *widest)});
  return ops;
}

bool contains(const std::vector<int>& labels, int l) {
  return std::find(labels.begin(), labels.end(), l) != labels.end();
}

// x's diagonal over dimensions p < q of one size, kept at p: x times an identity mask,
// summed over q (differentiable, and exact: every other term of the sum is a zero).
Tensor take_diagonal(const Tensor& x, int64_t p, int64_t q) {
  const int64_t n = x.size(p);
  std::vector<double> eye(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) eye[static_cast<size_t>(i * n + i)] = 1.0;
  std::vector<int64_t> mask_shape(static_cast<size_t>(x.dim()), 1);
  mask_shape[static_cast<size_t>(p)] = n;
  mask_shape[static_cast<size_t>(q)] = n;
  const Tensor mask = from_vector(eye, Shape(mask_shape), {.dtype = DType::Float64}).to(x.dtype()).to(x.device());
  return sum(mul(x, mask), {q});
}

// Folds every label repeated within the operand into its diagonal.
void take_diagonals(Labelled* op) {
  for (size_t q = 1; q < op->labels.size(); ++q) {
    for (size_t p = 0; p < q; ++p) {
      if (op->labels[p] != op->labels[q]) continue;
      op->t = take_diagonal(op->t, static_cast<int64_t>(p), static_cast<int64_t>(q));
      op->labels.erase(op->labels.begin() + static_cast<std::ptrdiff_t>(q));
      --q;
      break;
    }
  }
}

// Drops "..." dimensions of size 1 that broadcast against a larger size elsewhere: the
// label then belongs to the other operands only, and no operand is ever expanded.
void drop_broadcast_dims(Labelled* op, const Sizes& sizes) {
  for (size_t d = op->labels.size(); d-- > 0;) {
    const int l = op->labels[d];
    if (l < kEllipsis || op->t.size(static_cast<int64_t>(d)) != 1 || sizes.at(l).size == 1) continue;
    op->t = op->t.squeeze(static_cast<int64_t>(d));
    op->labels.erase(op->labels.begin() + static_cast<std::ptrdiff_t>(d));
  }
}

// Sums op over the dimensions whose labels `keep` lacks.
void sum_except(Labelled* op, const std::vector<int>& keep) {
  std::vector<int64_t> dims;
  std::vector<int> left;
  for (size_t d = 0; d < op->labels.size(); ++d) {
    if (contains(keep, op->labels[d])) left.push_back(op->labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return;
  op->t = sum(op->t, dims);
  op->labels = std::move(left);
}

std::vector<int64_t> dims_of(const Labelled& x, const std::vector<int>& labels) {
  std::vector<int64_t> dims;
  dims.reserve(labels.size());
  for (int l : labels) dims.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
  return dims;
}

int64_t numel_of(const Labelled& x, const std::vector<int>& labels) {
  int64_t n = 1;
  for (int64_t d : dims_of(x, labels)) n *= x.t.size(d);
  return n;
}

std::vector<int64_t> joined(std::vector<int64_t> a, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

// x as [batch, rows, cols] matrices ([rows, cols] when `batch` is empty), each group of
// labels merged into one dimension: a view when a permutation lines them up contiguously,
// a transposed view (the GEMM reads it with a flag) when the other order does, else a copy.
Tensor as_matrices(const Labelled& x, const std::vector<int>& batch, const std::vector<int>& rows,
                   const std::vector<int>& cols) {
  std::vector<int64_t> shape;
  if (!batch.empty()) shape.push_back(numel_of(x, batch));
  const int64_t r = numel_of(x, rows), c = numel_of(x, cols);
  const Tensor p = x.t.permute(joined(dims_of(x, batch), dims_of(x, rows), dims_of(x, cols)));
  if (!p.is_contiguous()) {
    const Tensor q = x.t.permute(joined(dims_of(x, batch), dims_of(x, cols), dims_of(x, rows)));
    if (q.is_contiguous()) {
      shape.insert(shape.end(), {c, r});
      return q.reshape(Shape(shape)).transpose(-1, -2);
    }
  }
  shape.insert(shape.end(), {r, c});
  return p.reshape(Shape(shape));
}

// a and b contracted into one operand that keeps the labels in `keep`: labels both have
// and `keep` needs are the matmul's batch, labels both have and `keep` does not are summed
// by the product, the rest are its rows (a) and columns (b).
Labelled contract_pair(Labelled a, Labelled b, const std::vector<int>& keep) {
  std::vector<int> keep_a = keep, keep_b = keep;
  keep_a.insert(keep_a.end(), b.labels.begin(), b.labels.end());
  keep_b.insert(keep_b.end(), a.labels.begin(), a.labels.end());
  sum_except(&a, keep_a);
  sum_except(&b, keep_b);
  std::vector<int> batch, summed, rows, cols;
  for (int l : a.labels) {
    if (!contains(b.labels, l)) rows.push_back(l);
    else (contains(keep, l) ? batch : summed).push_back(l);
  }
  for (int l : b.labels)
    if (!contains(a.labels, l)) cols.push_back(l);
  const Tensor product = matmul(as_matrices(a, batch, rows, summed), as_matrices(b, batch, summed, cols));
  Labelled out;
  std::vector<int64_t> shape;
  for (const auto* group : {&batch, &rows}) {
    for (int l : *group) {
      out.labels.push_back(l);
      shape.push_back(a.t.size(dims_of(a, {l})[0]));
    }
  }
  for (int l : cols) {
    out.labels.push_back(l);
    shape.push_back(b.t.size(dims_of(b, {l})[0]));
  }
  out.t = product.reshape(Shape(shape));
  return out;
}

// Diagonals and private sums per operand, then the chain of products, then the output's
// order.
Tensor contract_all(std::vector<Labelled> ops, const std::vector<int>& output, const Sizes& sizes) {
  for (Labelled& op : ops) {
    take_diagonals(&op);
    drop_broadcast_dims(&op, sizes);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<int> keep = output;
    for (size_t j = 0; j < ops.size(); ++j)
      if (j != i) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    sum_except(&ops[i], keep);
  }
  Labelled acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::vector<int> keep = output;
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    acc = contract_pair(std::move(acc), ops[i], keep);
  }
  sum_except(&acc, output);
  const std::vector<int64_t> order = dims_of(acc, output);
  bool identity = true;
  for (size_t d = 0; d < order.size(); ++d) identity = identity && order[d] == static_cast<int64_t>(d);
  return identity ? acc.t : acc.t.permute(order);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  STRATA_CHECK(!operands.empty(), "einsum: no operands given for \"", equation, "\"");
  const Equation e = parse(equation);
  STRATA_CHECK(e.inputs.size() == operands.size(), "einsum: equation \"", equation, "\" has ", e.inputs.size(),
               " operand term(s) but ", operands.size(), " operand(s) were given");
  for (size_t i = 0; i < operands.size(); ++i) {
    STRATA_CHECK(operands[i].defined(), "einsum: operand ", i, " of \"", equation, "\" is undefined");
    STRATA_CHECK(is_floating(operands[i].dtype()), "einsum: operand ", i, " (shape ", operands[i].shape(),
                 ") has dtype ", operands[i].dtype(), "; a floating-point dtype is required");
    STRATA_CHECK(operands[i].dtype() == operands[0].dtype() && operands[i].device() == operands[0].device(),
                 "einsum: operand ", i, " is ", operands[i].dtype(), " on ", operands[i].device(), " but operand 0 is ",
                 operands[0].dtype(), " on ", operands[0].device(), " (all operands need one dtype and device)");
  }
  int64_t widest = 0;
  std::vector<Labelled> ops = labelled_operands(equation, e, operands, &widest);
  Sizes sizes;
  record_sizes(equation, ops, &sizes);
  return contract_all(std::move(ops), output_labels(equation, e, widest), sizes);
}

}  // namespace strata
