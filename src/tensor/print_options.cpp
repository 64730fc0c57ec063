// The process-wide print options (strata/tensor/print_options.h); read by src/ops/print.cpp.
#include "strata/tensor/print_options.h"

#include <mutex>

#include "strata/core/error.h"

namespace strata {
namespace {

std::mutex& options_mutex() {
  static std::mutex mutex;
  return mutex;
}

PrintOptions& current_options() {
  static PrintOptions options;
  return options;
}

}  // namespace

void set_print_options(const PrintOptions& options) {
  STRATA_CHECK(options.precision >= 1, "set_print_options: precision ", options.precision, " must be at least 1");
  STRATA_CHECK(options.threshold >= 0, "set_print_options: threshold ", options.threshold, " must not be negative");
  STRATA_CHECK(options.edgeitems >= 1, "set_print_options: edgeitems ", options.edgeitems, " must be at least 1");
  STRATA_CHECK(options.linewidth >= 1, "set_print_options: linewidth ", options.linewidth, " must be at least 1");
  std::lock_guard<std::mutex> lock(options_mutex());
  current_options() = options;
}

PrintOptions print_options() {
  std::lock_guard<std::mutex> lock(options_mutex());
  return current_options();
}

}  // namespace strata
