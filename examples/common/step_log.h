#pragma once
// What an example reports after each training step: a progress line on rank 0 every
// --log-every steps (and at the last step), and a JSONL record per step.
#include <cstdint>

#include "common/data_parallel.h"
#include "strata/core/device.h"
#include "strata/train/metrics.h"
#include "strata/train/progress.h"

namespace strata::examples {

// Records completed step `step` + 1 of `total_steps`; `lead` is rank 0 (other ranks pass a
// disabled MetricsWriter and print nothing). The progress line (train::Progress: step, loss,
// lr, tokens/s, ETA) gets the fp16 loss scale and, on CUDA (`device`), the peak GPU memory
// appended: "... | ETA 1m52s | loss scale 32768 (2 overflow steps skipped) | peak GPU memory
// 1.23 GiB".
void log_step(train::Progress& progress, train::MetricsWriter& metrics, int64_t step, int64_t total_steps,
              int64_t log_every, bool lead, const StepResult& r, Device device);

}  // namespace strata::examples
