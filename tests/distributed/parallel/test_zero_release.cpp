// ZeroOptimizer frees memory as soon as it is no longer used, checked from autograd hooks
// during backward through observable state (Storage::released(), cpu_allocator::stats()),
// never through timing:
//  - stage 3 frees a unit once all of its gradients are in, not at the end of backward;
//  - stages 2-3 free a full gradient bucket at the first gradient hook after its
//    reduce_scatter has completed;
//  - stage 1 reduce-scatters into a chunk-sized output, so the process group need not clone
//    the whole bucket (MPI forbids aliased send and receive buffers).
// The process group is wrapped to see each reduce_scatter (its input is the bucket's full
// gradient) and, optionally, to complete it before ZeRO gets its Work back, which makes
// "completed" deterministic.
#include <map>
#include <memory>
#include <set>
#include <string>

#include "distributed/zero_test_util.h"

namespace strata::test {
namespace {

// Forwards to a shared Work so that the recording group can ask whether it has completed
// after ZeRO has dropped its handle.
class SharedWork : public dist::Work {
 public:
  explicit SharedWork(std::shared_ptr<dist::Work> inner) : inner_(std::move(inner)) {}
  bool is_completed() override { return inner_->is_completed(); }
  void wait() override { inner_->wait(); }
  void synchronize(std::chrono::milliseconds timeout) override { inner_->synchronize(timeout); }
  void synchronize() override { inner_->synchronize(); }

 private:
  std::shared_ptr<dist::Work> inner_;
};

// A process group over another one that records every reduce_scatter: its input (the full
// gradient bucket), its Work, and what the call itself allocated from the CPU allocator.
// With `complete_at_once`, each reduce_scatter is waited on before ZeRO gets its Work.
class RecordingGroup : public dist::ProcessGroup {
 public:
  struct ReduceScatter {
    Tensor in;
    Tensor out;
    std::shared_ptr<dist::Work> work;
    uint64_t allocations = 0;  // cpu_allocator requests made by the call
    int64_t peak_growth = 0;   // peak in-use bytes during the call, above in-use before it
  };

  RecordingGroup(dist::ProcessGroup& inner, bool complete_at_once)
      : dist::ProcessGroup(inner.rank(), inner.size(), inner.name(), inner.global_ranks()),
        inner_(inner),
        complete_at_once_(complete_at_once) {}

  std::vector<ReduceScatter> calls;

  Device tensor_device() const override { return inner_.tensor_device(); }

 protected:
  // The inner group stages and checks again.
  Placement placement() const override { return Placement::Any; }
  dist::WorkPtr do_reduce_scatter(Tensor& out, const Tensor& in, dist::ReduceOp op,
                                  const dist::OpDescription&) override {
    const AllocatorStats before = cpu_allocator::stats();
    cpu_allocator::reset_peak();
    std::shared_ptr<dist::Work> work = inner_.reduce_scatter(out, in, op);
    const AllocatorStats after = cpu_allocator::stats();
    calls.push_back({in, out, work, after.requests - before.requests,
                     static_cast<int64_t>(after.peak_in_use_bytes) - static_cast<int64_t>(before.in_use_bytes)});
    if (complete_at_once_) work->wait();
    return std::make_unique<SharedWork>(work);
  }
  dist::WorkPtr do_all_reduce(Tensor& t, dist::ReduceOp op, const dist::OpDescription&) override {
    return inner_.all_reduce(t, op);
  }
  dist::WorkPtr do_broadcast(Tensor& t, int root, const dist::OpDescription&) override {
    return inner_.broadcast(t, root);
  }
  dist::WorkPtr do_all_gather(Tensor& out, const Tensor& in, const dist::OpDescription&) override {
    return inner_.all_gather(out, in);
  }
  dist::WorkPtr do_all_to_all(Tensor& out, const Tensor& in, const dist::OpDescription&) override {
    return inner_.all_to_all(out, in);
  }
  dist::WorkPtr do_send(const Tensor& t, int dst, const dist::OpDescription&) override { return inner_.send(t, dst); }
  dist::WorkPtr do_recv(Tensor& t, int src, const dist::OpDescription&) override { return inner_.recv(t, src); }
  dist::WorkPtr do_barrier(const dist::OpDescription&) override { return inner_.barrier(); }
  std::unique_ptr<dist::ProcessGroup> do_split(const dist::SplitPlan& plan, const dist::OpDescription&) override {
    return inner_.split(plan.ranks, plan.name);
  }

 private:
  dist::ProcessGroup& inner_;
  bool complete_at_once_;
};

bool released(const Tensor& t) { return t.storage()->released(); }

nn::GPTConfig three_block_gpt() {
  nn::GPTConfig c = tiny_gpt(DType::Float32);
  c.n_layer = 3;
  return c;
}

Batch rank_batch(int step, const nn::GPTConfig& c) {
  auto& world = dist::world();
  return rank_slice(global_batch(step, world.size() * kZeroPerRank, c), world.rank(), kZeroPerRank);
}

// Stage 3: when the gradient hook of a parameter of block i runs (after ZeRO's own hook),
// every later block (i+1, ...: backward is done with them) must already be freed, and at
// most two blocks (this one and the prefetched one before it) may be gathered. When the
// last gradient arrives (the tied wte), no block is gathered any more.
TEST(ZeroRelease, Stage3FreesEachUnitOnceItsGradientsAreIn) {
  auto& world = dist::world();
  nn::GPT model(three_block_gpt());
  ZeroOptimizer zero(model, sgd(), world, zero_options(3));
  const int blocks = static_cast<int>(model.config().n_layer);
  // Block i's parameters, from the names ("h.<i>.").
  std::vector<std::vector<Tensor>> block_params(static_cast<size_t>(blocks));
  std::map<std::string, Tensor> by_name;
  for (auto& [name, t] : model.named_parameters()) by_name[name] = t;
  for (auto& [name, t] : by_name) {
    if (name.rfind("h.", 0) != 0) continue;
    block_params[static_cast<size_t>(std::stoi(name.substr(2)))].push_back(t);
  }
  auto gathered = [&](int i) {
    bool any = false;
    for (const Tensor& t : block_params[static_cast<size_t>(i)]) any = any || !released(t);
    return any;
  };
  int checked = 0;
  int most_gathered = 0;
  std::vector<std::string> failures;
  for (auto& [name, t] : by_name) {
    const std::string n = name;
    const int block = n.rfind("h.", 0) == 0 ? std::stoi(n.substr(2)) : -1;
    t.register_post_accumulate_grad_hook([&, n, block](Tensor&) {
      ++checked;
      int count = 0;
      for (int j = 0; j < blocks; ++j) {
        if (!gathered(j)) continue;
        ++count;
        const bool done_with_j = block >= 0 ? j > block : n == "wte.weight";
        if (done_with_j) failures.push_back("block " + std::to_string(j) + " still gathered at the gradient of " + n);
      }
      most_gathered = std::max(most_gathered, count);
    });
  }
  for (int step = 0; step < 2; ++step) {
    Batch b = rank_batch(step, model.config());
    failures.clear();
    most_gathered = 0;
    checked = 0;
    model.loss(b.inputs, b.targets).backward();
    EXPECT_EQ(checked, static_cast<int>(by_name.size())) << "step " << step;
    EXPECT_TRUE(failures.empty()) << "step " << step << ": " << failures.size()
                                  << " failures, first: " << (failures.empty() ? "" : failures.front());
    EXPECT_LE(most_gathered, 2) << "step " << step << ": blocks gathered at once during backward";
    for (int j = 0; j < blocks; ++j) EXPECT_FALSE(gathered(j)) << "block " << j << " after backward";
    zero.step();
    zero.zero_grad();
  }
}

// Stages 2-3 with every reduce_scatter completed before ZeRO sees its Work: the hook that
// launches a bucket frees its full gradient at once, so after ZeRO's hook no launched bucket
// holds a full gradient any more.
TEST(ZeroRelease, Stage2And3FreeAFullGradientBucketAsSoonAsItsReductionIsDone) {
  auto& world = dist::world();
  for (int stage : {2, 3}) {
    RecordingGroup group(world, /*complete_at_once=*/true);
    nn::GPT model(three_block_gpt());
    ZeroOptimizer zero(model, sgd(), group, zero_options(stage));
    ASSERT_GE(zero.bucket_bytes().size(), 3u) << "stage " << stage << ": the test needs several buckets";
    size_t hooks = 0, checked = 0;
    std::vector<std::string> failures;
    for (auto& [name, t] : model.named_parameters()) {
      const std::string n = name;
      t.register_post_accumulate_grad_hook([&, n](Tensor&) {
        ++hooks;
        checked += group.calls.size();
        for (size_t k = 0; k < group.calls.size(); ++k)
          if (!released(group.calls[k].in))
            failures.push_back("bucket launched " + std::to_string(k) + " still full at the gradient of " + n);
      });
    }
    for (int step = 0; step < 2; ++step) {
      const std::string where = "stage " + std::to_string(stage) + " step " + std::to_string(step);
      group.calls.clear();
      failures.clear();
      hooks = 0;
      Batch b = rank_batch(step, model.config());
      model.loss(b.inputs, b.targets).backward();
      EXPECT_EQ(hooks, model.named_parameters().size()) << where;
      EXPECT_GT(checked, 0u) << where << ": no bucket was launched before the last gradient hook";
      EXPECT_GE(group.calls.size(), zero.bucket_bytes().size()) << where;
      EXPECT_TRUE(failures.empty()) << where << ": " << failures.size()
                                    << " failures, first: " << (failures.empty() ? "" : failures.front());
      for (size_t k = 0; k < group.calls.size(); ++k)
        EXPECT_TRUE(released(group.calls[k].in)) << where << " bucket " << k;
      zero.step();
      zero.zero_grad();
    }
  }
}

// The same with reductions completing whenever they do (a loaded machine: possibly none
// before backward ends): a hook registered before ZeRO's notes which reductions have
// completed, and after ZeRO's hook each of those buckets must have been freed.
TEST(ZeroRelease, Stage2And3FreeEveryBucketWhoseReductionCompletedBeforeTheHook) {
  auto& world = dist::world();
  for (int stage : {2, 3}) {
    RecordingGroup group(world, /*complete_at_once=*/false);
    nn::GPT model(three_block_gpt());
    std::vector<size_t> completed;  // calls whose Work had completed when the hook started
    for (auto& [name, t] : model.named_parameters()) {
      t.register_post_accumulate_grad_hook([&](Tensor&) {
        completed.clear();
        for (size_t k = 0; k < group.calls.size(); ++k)
          if (group.calls[k].work->is_completed()) completed.push_back(k);
      });
    }
    ZeroOptimizer zero(model, sgd(), group, zero_options(stage));  // its hooks run after those above
    std::vector<std::string> failures;
    for (auto& [name, t] : model.named_parameters()) {
      const std::string n = name;
      t.register_post_accumulate_grad_hook([&, n](Tensor&) {
        for (size_t k : completed)
          if (!released(group.calls[k].in))
            failures.push_back("bucket launched " + std::to_string(k) + " (reduced) still full at the gradient of " +
                               n);
      });
    }
    for (int step = 0; step < 2; ++step) {
      const std::string where = "stage " + std::to_string(stage) + " step " + std::to_string(step);
      group.calls.clear();
      failures.clear();
      Batch b = rank_batch(step, model.config());
      model.loss(b.inputs, b.targets).backward();
      EXPECT_TRUE(failures.empty()) << where << ": " << failures.size()
                                    << " failures, first: " << (failures.empty() ? "" : failures.front());
      for (size_t k = 0; k < group.calls.size(); ++k)
        EXPECT_TRUE(released(group.calls[k].in)) << where << " bucket " << k;
      zero.step();
      zero.zero_grad();
    }
  }
}

// Stage 1: each reduce_scatter writes into a chunk-sized tensor of its own, so the call
// allocates nothing (an output inside the input bucket would make the process group clone
// the whole bucket), and the peak during the call stays far below the bucket's bytes.
TEST(ZeroRelease, Stage1ReduceScattersIntoAChunkSizedOutputWithoutCloningTheBucket) {
  auto& world = dist::world();
  const int n = world.size();
  RecordingGroup group(world, /*complete_at_once=*/false);
  nn::GPT model(three_block_gpt());
  ZeroOptimizer zero(model, sgd(), group, zero_options(1));
  const std::vector<int64_t> bucket_bytes = zero.bucket_bytes();
  ASSERT_GE(bucket_bytes.size(), 3u);
  for (int step = 0; step < 2; ++step) {
    group.calls.clear();
    Batch b = rank_batch(step, model.config());
    model.loss(b.inputs, b.targets).backward();
    ASSERT_EQ(group.calls.size(), bucket_bytes.size()) << "step " << step;
    for (size_t k = 0; k < group.calls.size(); ++k) {
      const auto& c = group.calls[k];
      const std::string where = "step " + std::to_string(step) + " bucket " + std::to_string(k);
      const int64_t bytes = bucket_bytes[k];
      EXPECT_EQ(static_cast<int64_t>(c.in.nbytes()), bytes) << where;
      EXPECT_EQ(c.out.numel() * n, c.in.numel()) << where;
      EXPECT_NE(c.out.storage().get(), c.in.storage().get()) << where << ": the output lies in the input bucket";
      EXPECT_EQ(c.allocations, 0u) << where << ": the reduce_scatter call allocated (a clone of the bucket?)";
      EXPECT_LT(c.peak_growth, bytes / 2) << where << ": a clone of the " << bytes << "-byte bucket";
    }
    zero.step();
    zero.zero_grad();
  }
}

}  // namespace
}  // namespace strata::test
