#include "strata/parallel/pipeline_partition.h"

#include <limits>
#include <sstream>
#include <utility>

#include "strata/core/error.h"

namespace strata::parallel {

std::string PipelinePartition::to_string() const {
  std::ostringstream os;
  for (size_t s = 0; s < stage_blocks.size(); ++s) {
    const auto& b = stage_blocks[s];
    if (s > 0) os << ' ';
    if (b.empty()) {
      os << "[]";
    } else if (b.size() == 1) {
      os << '[' << b.front() << ']';
    } else {
      os << '[' << b.front() << '-' << b.back() << ']';
    }
  }
  return os.str();
}

PipelinePartition balanced_partition(const nn::ParameterCounts& counts, int64_t num_blocks, int ranks, int chunks) {
  STRATA_CHECK(ranks >= 1 && chunks >= 1, "pipeline partition: ranks (", ranks, ") and chunks per rank (", chunks,
               ") must be at least 1");
  const int64_t S = int64_t{ranks} * chunks;
  STRATA_CHECK(S <= num_blocks, "pipeline partition: ", S, " stages (", ranks, " ranks x ", chunks,
               " chunks) need at least one block each, but the model has ", num_blocks, " blocks");
  STRATA_CHECK(chunks == 1 || num_blocks % chunks == 0, "pipeline partition: ", chunks,
               " chunks per rank (interleaved) must divide the ", num_blocks, " blocks");
  // cost of stage s holding blocks [a, b)
  auto cost = [&](int64_t s, int64_t a, int64_t b) {
    return (b - a) * counts.block + (s == 0 ? counts.embedding : 0) + (s == S - 1 ? counts.head : 0);
  };
  // best[s][i]: the first s+1 stages over blocks [0, i): the largest stage's cost, then the sum
  // of squared costs (which prefers even splits among equally good ones).
  using Score = std::pair<int64_t, double>;
  const Score worst{std::numeric_limits<int64_t>::max(), 0.0};
  const auto L = static_cast<size_t>(num_blocks);
  std::vector<std::vector<Score>> best(static_cast<size_t>(S), std::vector<Score>(L + 1, worst));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(S), std::vector<int64_t>(L + 1, -1));
  for (int64_t i = 1; i <= num_blocks; ++i) {
    const double c = static_cast<double>(cost(0, 0, i));
    best[0][static_cast<size_t>(i)] = {cost(0, 0, i), c * c};
    cut[0][static_cast<size_t>(i)] = 0;
  }
  for (int64_t s = 1; s < S; ++s) {
    for (int64_t i = s + 1; i <= num_blocks; ++i) {
      for (int64_t j = s; j < i; ++j) {
        const Score& prev = best[static_cast<size_t>(s - 1)][static_cast<size_t>(j)];
        if (prev.first == worst.first) continue;
        const int64_t c = cost(s, j, i);
        const Score score{std::max(prev.first, c), prev.second + static_cast<double>(c) * static_cast<double>(c)};
        if (score < best[static_cast<size_t>(s)][static_cast<size_t>(i)]) {
          best[static_cast<size_t>(s)][static_cast<size_t>(i)] = score;
          cut[static_cast<size_t>(s)][static_cast<size_t>(i)] = j;
        }
      }
    }
  }
  PipelinePartition partition;
  partition.stage_blocks.resize(static_cast<size_t>(S));
  int64_t end = num_blocks;
  for (int64_t s = S - 1; s >= 0; --s) {
    const int64_t begin = cut[static_cast<size_t>(s)][static_cast<size_t>(end)];
    for (int64_t b = begin; b < end; ++b) partition.stage_blocks[static_cast<size_t>(s)].push_back(b);
    end = begin;
  }
  return partition;
}

void check_partition(const PipelinePartition& partition, int64_t num_blocks, int ranks, int chunks) {
  const int S = partition.num_stages();
  STRATA_CHECK(S == ranks * chunks, "pipeline partition: ", S, " stages given for ", ranks, " ranks x ", chunks,
               " chunks (", ranks * chunks, " stages)");
  int64_t next = 0;  // the block the next stage must start with
  for (int s = 0; s < S; ++s) {
    const auto& blocks = partition.stage_blocks[static_cast<size_t>(s)];
    STRATA_CHECK(!blocks.empty(), "pipeline partition: stage ", s, " holds no block (", partition.to_string(), ")");
    for (int64_t b : blocks) {
      STRATA_CHECK(b >= 0 && b < num_blocks, "pipeline partition: stage ", s, " lists block ", b,
                   ", which does not exist (the model has ", num_blocks, " blocks)");
      STRATA_CHECK(b >= next, "pipeline partition: block ", b, " is repeated or out of order in stage ", s,
                   " (stages hold consecutive blocks in order: ", partition.to_string(), ")");
      STRATA_CHECK(b == next, "pipeline partition: block ", next, " is in no stage (stage ", s, " continues at ", b,
                   ": ", partition.to_string(), ")");
      ++next;
    }
  }
  STRATA_CHECK(next == num_blocks, "pipeline partition: blocks ", next, " to ", num_blocks - 1, " are in no stage (",
               partition.to_string(), ")");
}

nn::ModelPart stage_part(const PipelinePartition& partition, int ranks, int rank) {
  STRATA_CHECK(ranks >= 1 && partition.num_stages() % ranks == 0, "pipeline partition: ", partition.num_stages(),
               " stages do not divide over ", ranks, " ranks");
  STRATA_CHECK(rank >= 0 && rank < ranks, "pipeline partition: rank ", rank, " is not in [0, ", ranks, ")");
  int64_t num_blocks = 0;
  for (const auto& b : partition.stage_blocks) num_blocks += static_cast<int64_t>(b.size());
  const int chunks = partition.num_stages() / ranks;
  check_partition(partition, num_blocks, ranks, chunks);
  nn::ModelPart part{.embedding = rank == 0, .blocks = std::vector<int64_t>{}, .head = rank == ranks - 1};
  for (int c = 0; c < chunks; ++c) {
    const auto& b = partition.stage_blocks[static_cast<size_t>(c * ranks + rank)];
    part.blocks->insert(part.blocks->end(), b.begin(), b.end());
  }
  return part;
}

}  // namespace strata::parallel
