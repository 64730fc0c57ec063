#pragma once
// HSDP, hybrid sharded data parallelism (PyTorch FSDP's HYBRID_SHARD, torchtitan's
// dp_replicate x dp_shard): ZeRO shards the model states inside a shard group, by default one
// node's ranks, and the shard groups are replicas of each other. The data group becomes a
// replicate x shard mesh: reduce_scatter and all_gather stay inside a node, and one
// all_reduce of each gradient shard crosses nodes (1/shard size of a bucket per rank).
//
//   auto& world = dist::init();
//   auto hsdp = parallel::make_hybrid_shard_groups(world);  // shard group: this node's ranks
//   ZeroOptimizer zero(model, adamw, *hsdp.shard, {.stage = 3, .replicate = hsdp.replicate.get()});
//   // every rank still trains on its own micro-batch: the gradient is averaged over all ranks
#include <memory>
#include <string>
#include <vector>

#include "strata/distributed/process_group.h"

namespace strata::parallel {

struct HybridShardGroups {
  std::unique_ptr<dist::ProcessGroup> shard;      // ZeroOptimizer's group
  std::unique_ptr<dist::ProcessGroup> replicate;  // ZeroOptions::replicate
  int shard_size = 1;
  int replicas = 1;
};

// The shard size for a data group whose rank r runs on node nodes[r], checked: `shard_size`
// itself, or (0) the number of the group's ranks per node, which must then be the same on
// every node. Data ranks [k*S, (k+1)*S) form shard group k and must share a node; S must
// divide the group's size. Throws, naming the value and the rule, otherwise.
int plan_hybrid_shard_size(const std::vector<std::string>& nodes, int shard_size);

// Collective over `data`: exchanges the ranks' dist::node_name(), checks the shard size as
// plan_hybrid_shard_size (every rank throws the same error, before any other collective),
// then splits `data` into shard group r / S and replicate group r % S (named
// "<data>.shard<k>" and "<data>.replicate<j>").
HybridShardGroups make_hybrid_shard_groups(dist::ProcessGroup& data, int shard_size = 0);

}  // namespace strata::parallel
