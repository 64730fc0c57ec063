#!/usr/bin/env bash
# One GPT training step (benchmarks/gpt_step.cpp) in strata beside PyTorch 1.13 and 2.x at
# 1 and 2 threads, with both ratios; benchmarks/run_step_vs_torch.sh does the work.
#   benchmarks/run_gpt_step.sh [build-dir] [steps]
exec "$(dirname "${BASH_SOURCE[0]}")/run_step_vs_torch.sh" gpt "$@"
