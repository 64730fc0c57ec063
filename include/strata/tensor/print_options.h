#pragma once
// How Tensor::to_string and operator<< print values, as torch.set_printoptions: a tensor of
// more than `threshold` elements is summarized (the first and last `edgeitems` entries of
// each dimension, with "..." between); floating values get `precision` significant digits;
// a row of values wraps before `linewidth` characters. Process-wide, like torch's.
#include <cstdint>

namespace strata {

struct PrintOptions {
  int precision = 4;
  int64_t threshold = 1000;
  int64_t edgeitems = 3;
  int64_t linewidth = 80;
};

// Checks each field (precision >= 1, threshold >= 0, edgeitems >= 1, linewidth >= 1).
void set_print_options(const PrintOptions& options);
PrintOptions print_options();

}  // namespace strata
