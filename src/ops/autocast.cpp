#include "strata/ops/autocast.h"

#include "strata/core/error.h"

namespace strata::autocast {
namespace {

thread_local std::optional<DType> current;

}  // namespace

Scope::Scope(DType dtype, bool enabled) : previous_(current) {
  STRATA_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16, "autocast::Scope: dtype ", dtype,
               " is not a 16-bit floating type (bfloat16 or float16)");
  if (enabled) current = dtype;
}

Scope::~Scope() { current = previous_; }

std::optional<DType> active() { return current; }

}  // namespace strata::autocast
