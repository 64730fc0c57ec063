#include "common/step_log.h"

#include <cstdio>
#include <map>
#include <string>

#include "common/device_setup.h"
#include "strata/tensor/allocator.h"

namespace strata::examples {

namespace {

// " | loss scale 32768 (2 overflow steps skipped)" with --autocast fp16; "" without.
std::string loss_scale_note(const StepResult& r) {
  if (r.loss_scale <= 0) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, " | loss scale %g (%lld overflow step(s) skipped)", r.loss_scale,
                static_cast<long long>(r.overflow_steps));
  return buf;
}

}  // namespace

void log_step(train::Progress& progress, train::MetricsWriter& metrics, int64_t step, int64_t total_steps,
              int64_t log_every, bool lead, const StepResult& r, Device device) {
  if (lead && r.skipped) {  // always said, whatever --log-every
    std::printf(
        "step %lld/%lld skipped: loss %g, gradient norm %g (non-finite); gradients dropped, weights unchanged "
        "(%lld step(s) skipped so far)\n",
        static_cast<long long>(step + 1), static_cast<long long>(total_steps), r.loss, r.grad_norm,
        static_cast<long long>(r.skipped_steps));
    std::fflush(stdout);
  } else if (lead && ((step + 1) % log_every == 0 || step + 1 == total_steps)) {
    std::printf("%s%s%s\n", progress.line(step, r.loss, r.lr).c_str(), loss_scale_note(r).c_str(),
                peak_memory_note(device).c_str());
    std::fflush(stdout);
  }
  std::map<std::string, train::MetricsWriter::Value> record{{"step", step + 1},
                                                            {"loss", r.loss},
                                                            {"lr", r.lr},
                                                            {"grad_norm", r.grad_norm},
                                                            {"tokens_per_second", progress.tokens_per_second(step)}};
  if (r.skipped_steps > 0) {  // runs that skip nothing keep their records as they were
    record["skipped"] = int64_t{r.skipped ? 1 : 0};
    record["skipped_steps"] = r.skipped_steps;
  }
  if (r.loss_scale > 0) {  // --autocast fp16
    record["loss_scale"] = r.loss_scale;
    record["overflow"] = int64_t{r.overflow ? 1 : 0};
  }
  if (device.is_cuda())
    record["peak_gpu_memory_bytes"] = static_cast<int64_t>(cuda_allocator::stats(device.index).peak_in_use_bytes);
  metrics.write(record);
}

}  // namespace strata::examples
