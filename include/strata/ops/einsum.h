#pragma once
// Einstein summation, as torch.einsum. Composed of differentiable views, sums and matmul, so
// every operand gets its gradient and each contraction runs as one (batched) GEMM.
#include <string>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

// `equation` names each operand's dimensions by letters (a-z, A-Z), terms separated by
// commas, optionally followed by "->" and the output's letters: "ij,jk->ik", "bhqd,bhkd->bhqk",
// "ij->ji", "i,i->". Without "->" the output is the letters used exactly once, in
// alphabetical order (uppercase first). A letter repeated within one operand takes its
// diagonal ("ii->i"); letters missing from the output are summed over. "..." stands for the
// remaining leading dimensions of an operand; these broadcast across operands (size 1
// against n) and, in implicit mode, lead the output. Operands are contracted left to right,
// each pair as one matmul whose batch is the letters both share and the output keeps.
// Errors name the equation and the position of a malformed character, a count of terms
// unlike the number of operands, and a letter whose sizes differ (the letter and both sizes).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace strata
