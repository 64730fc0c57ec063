#include "common/step_log.h"

#include <cstdio>

namespace strata::examples {

void log_step(train::Progress& progress, train::MetricsWriter& metrics, int64_t step, int64_t total_steps,
              int64_t log_every, bool lead, const StepResult& r) {
  if (lead && ((step + 1) % log_every == 0 || step + 1 == total_steps)) {
    std::printf("%s\n", progress.line(step, r.loss, r.lr).c_str());
    std::fflush(stdout);
  }
  metrics.write({{"step", step + 1},
                 {"loss", r.loss},
                 {"lr", r.lr},
                 {"grad_norm", r.grad_norm},
                 {"tokens_per_second", progress.tokens_per_second(step)}});
}

}  // namespace strata::examples
