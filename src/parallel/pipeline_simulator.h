#pragma once
// Runs every rank's action list of a PipelineSchedule together, without tensors, to check it
// before anyone trusts it with a process group: that it cannot deadlock, that transfers match,
// that each computation has its inputs, and what it costs in time and activation memory.
//
// Model. Each rank executes its actions in order. A transfer, single or in a CommBatch, is
// posted when the rank reaches it; the rank waits until every transfer of that action has met
// its partner. Sends and receives meet in issue order per ordered pair of ranks (src, dst),
// whatever their kind, as ProcessGroup send/recv do (one tag); a meeting of two transfers
// that do not describe the same message (kind, micro-batch, stages) is an error. Sends complete
// only when received (rendezvous, as large MPI messages and NCCL): the strictest model, so a
// schedule that passes here cannot deadlock on a transport that buffers. Transfers take no time;
// a forward takes `forward` units and a backward `backward` units.
#include <cstdint>
#include <vector>

#include "strata/parallel/pipeline_schedule.h"

namespace strata::parallel {

struct SimulationCosts {
  int64_t forward = 1;
  int64_t backward = 2;  // about twice a forward, as in the papers' bubble analysis
};

struct ComputeSpan {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
  int64_t start = 0;
  int64_t end = 0;
};

struct PipelineSimulation {
  int64_t makespan = 0;                            // when the last rank finishes (all start at 0)
  std::vector<int64_t> busy;                       // per rank: time spent computing
  std::vector<int> peak_in_flight;                 // per rank: most (micro-batch, chunk) forwards
                                                   // done whose backward was not
  std::vector<std::vector<ComputeSpan>> timeline;  // per rank, in execution order

  // Idle time of `rank` within the step over its compute time, the papers' "bubble fraction"
  // ((p-1)/m for GPipe and 1F1B, (p-1)/(v*m) for interleaved 1F1B when everything divides).
  double bubble_fraction(int rank) const;
  double bubble_fraction() const;  // the largest over ranks (all equal when ranks do equal work)
};

// Throws strata::Error when the schedule is wrong: a deadlock (naming every rank that cannot
// progress, the action it is at and the transfers it waits for), transfers that meet but
// differ, a transfer to a rank that is not the neighbouring stage, a computation without its
// input (forward before its activation arrived, backward before its forward or gradient), or
// a (micro-batch, chunk) whose forward or backward is missing or repeated.
PipelineSimulation simulate_pipeline(const PipelineSchedule& schedule, SimulationCosts costs = {});

}  // namespace strata::parallel
