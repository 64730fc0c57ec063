// Parameters that get no gradient in a step (an idle expert of a mixture of experts): the
// optimizer skips them, so a run is the same whether it was interrupted or not, and data
// parallelism equals one process. The model routes each row to one of four experts by a fixed
// table: expert 3 is used at steps 0, 3 and 5 by row 0 only (idle on every rank at the other
// steps, and idle on all ranks but rank 0 when used); expert 2 only by the last row (the last
// rank's). AdamW with weight decay moves a parameter stepped with a zero gradient, so any
// step given to an idle expert shows.
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "distributed/dist_test_util.h"
#include "strata/distributed/init.h"
#include "strata/distributed/object_collectives.h"
#include "strata/nn/layers.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/indexing.h"
#include "strata/ops/reduce.h"
#include "strata/optim/adam.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/zero.h"
#include "strata/train/distributed_checkpoint.h"

namespace strata {
namespace {

constexpr int kExperts = 4;
constexpr int64_t kWidth = 5;
constexpr int64_t kRowsPerRank = 2;
constexpr int kSteps = 6;
constexpr int kSaveAt = 3;  // resumes load the save taken after this many steps

class TinyMoE : public nn::Module {
 public:
  TinyMoE() {
    Generator gen(7);
    const nn::InitOptions init{.dtype = DType::Float64, .gen = &gen};
    proj_ = register_module("proj", std::make_shared<nn::Linear>(kWidth, kWidth, true, init));
    for (int e = 0; e < kExperts; ++e)
      experts_.push_back(
          register_module("expert" + std::to_string(e), std::make_shared<nn::Linear>(kWidth, kWidth, true, init)));
  }

  // Mean over the rows of the squared error of each row's expert; experts no row chose are
  // not run, so they get no gradient.
  // Through the module's hooks, so that ZeRO-3 gathers the parameters (one unit: the root).
  Tensor loss(const Tensor& x, const Tensor& y, const std::vector<int>& route) {
    HookScope hooks = forward_hooks();
    Tensor h = tanh(proj_->forward(x));
    Tensor total = zeros({}, {.dtype = DType::Float64});
    for (int e = 0; e < kExperts; ++e) {
      std::vector<int64_t> rows;
      for (size_t r = 0; r < route.size(); ++r)
        if (route[r] == e) rows.push_back(static_cast<int64_t>(r));
      if (rows.empty()) continue;
      Tensor index = from_vector(rows, {static_cast<int64_t>(rows.size())});
      Tensor diff = experts_[static_cast<size_t>(e)]->forward(index_select(h, 0, index)) - index_select(y, 0, index);
      total = total + sum(diff * diff);
    }
    return hooks.output(total / static_cast<double>(route.size()));
  }

  nn::Linear& expert(int e) { return *experts_[static_cast<size_t>(e)]; }

 private:
  std::shared_ptr<nn::Linear> proj_;
  std::vector<std::shared_ptr<nn::Linear>> experts_;
};

// Step s's expert for each of the `rows` rows of the global batch.
std::vector<int> global_route(int step, int64_t rows) {
  std::vector<int> route(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const bool expert3 = r == 0 && (step == 0 || step == 3 || step == 5);
    route[static_cast<size_t>(r)] = expert3 ? 3 : (r == rows - 1 ? 2 : static_cast<int>(r % 2));
  }
  return route;
}

struct Batch {
  Tensor x, y;
  std::vector<int> route;
};

Batch global_batch(int step, int64_t rows) {
  Generator gen(1000 + static_cast<uint64_t>(step));
  return {.x = randn({rows, kWidth}, {.dtype = DType::Float64}, &gen),
          .y = randn({rows, kWidth}, {.dtype = DType::Float64}, &gen),
          .route = global_route(step, rows)};
}

// Rank `rank` of `ranks`' share of the global batch of a run of `batch_world` ranks
// (kRowsPerRank rows each): one process takes all of it.
Batch rank_batch(int step, int batch_world, int ranks, int rank) {
  Batch g = global_batch(step, batch_world * kRowsPerRank);
  const int64_t rows = batch_world * kRowsPerRank / ranks, first = rank * rows;
  return {.x = g.x.narrow(0, first, rows).contiguous(),
          .y = g.y.narrow(0, first, rows).contiguous(),
          .route = std::vector<int>(g.route.begin() + first, g.route.begin() + first + rows)};
}

optim::AdamWOptions adamw() { return {.lr = 0.05, .weight_decay = 0.1}; }

// What one layout trains: a plain AdamW (one process, or beside DDP) or a ZeroOptimizer.
struct Layout {
  bool ddp = false;
  int zero = -1;  // -1: AdamW; 0-3: ZeroOptimizer over the group
};

std::string describe(const Layout& l) {
  return l.zero >= 0 ? "ZeRO-" + std::to_string(l.zero) : (l.ddp ? "DDP" : "one process");
}

class LayoutRun {
 public:
  // Trains on the global batch of a `batch_world`-rank run, split over `group`.
  LayoutRun(dist::ProcessGroup& group, const Layout& l, int batch_world)
      : group_(group), layout_(l), batch_world_(batch_world) {
    if (l.zero >= 0) {
      zero_ = std::make_unique<parallel::ZeroOptimizer>(
          model_, adamw(), group, parallel::ZeroOptions{.stage = l.zero, .bucket_cap_bytes = 256});
    } else {
      if (l.ddp)
        ddp_ = std::make_unique<parallel::DistributedDataParallel>(
            model_, group, parallel::DDPOptions{.find_unused_parameters = true});
      opt_ = std::make_unique<optim::AdamW>(model_.parameters(), adamw());
    }
  }

  optim::Optimizer& optimizer() { return zero_ ? static_cast<optim::Optimizer&>(*zero_) : *opt_; }

  // Steps [first, last): backward, then a check of which experts hold a gradient, then the step.
  void train(int first, int last) {
    for (int s = first; s < last; ++s) {
      Batch b = rank_batch(s, batch_world_, group_.size(), group_.rank());
      model_.loss(b.x, b.y, b.route).backward();
      if (!zero_ || layout_.zero <= 1) check_gradients(s);
      optimizer().step();
      optimizer().zero_grad();
    }
  }

  // Expert 3 has a gradient (on every rank) only at the steps some rank used it.
  void check_gradients(int step) {
    const bool used = step == 0 || step == 3 || step == 5;
    if (zero_ && layout_.zero >= 2) return;  // stages 2-3 keep only shards
    EXPECT_EQ(model_.expert(3).weight.grad().defined(), used)
        << describe(layout_) << " step " << step << " rank " << group_.rank();
    EXPECT_TRUE(model_.expert(2).weight.grad().defined()) << describe(layout_) << " step " << step;
  }

  StateDict weights() {
    if (zero_) return zero_->full_parameters();
    StateDict w;
    for (const auto& [name, t] : model_.named_parameters()) w[name] = t.detach().clone();
    return w;
  }

  train::CheckpointTarget target() {
    return {.model = model_,
            .world = group_,
            .optimizer = opt_.get(),
            .zero = zero_.get(),
            .data = group_.size() > 1 ? &group_ : nullptr};
  }

 private:
  dist::ProcessGroup& group_;
  Layout layout_;
  int batch_world_;
  TinyMoE model_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  std::unique_ptr<optim::AdamW> opt_;
  std::unique_ptr<parallel::ZeroOptimizer> zero_;
};

// One process on the whole global batch of the world's run (the same rows, in one pass).
StateDict one_process(dist::ProcessGroup& alone) {
  LayoutRun run(alone, {}, dist::world().size());
  run.train(0, kSteps);
  return run.weights();
}

// max over entries of |a - b| / max |b| per tensor; `bitwise` tells whether all are equal.
double difference(const StateDict& a, const StateDict& b, bool& bitwise) {
  double worst = 0;
  bitwise = a.size() == b.size();
  for (const auto& [name, tb] : b) {
    const std::vector<double> x = a.at(name).to_vector<double>(), y = tb.to_vector<double>();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      diff = std::max(diff, std::fabs(x[i] - y[i]));
      scale = std::max(scale, std::fabs(y[i]));
      bitwise = bitwise && x[i] == y[i];
    }
    worst = std::max(worst, diff / std::max(scale, 1e-300));
  }
  return worst;
}

// Float64: averaging over ranks sums in another order than one process does, a few ulps per
// step through AdamW's division by sqrt(v); 1e-12 leaves three orders of magnitude.
constexpr double kReorderBound = 1e-12;

void expect_equal(const StateDict& got, const StateDict& want, bool must_be_bitwise, const std::string& what) {
  bool bitwise = false;
  const double diff = difference(got, want, bitwise);
  if (must_be_bitwise) {
    EXPECT_TRUE(bitwise) << what << ": differs by " << diff;
  } else {
    EXPECT_LE(diff, kReorderBound) << what;
  }
}

std::vector<Layout> layouts() { return {{}, {.ddp = true}, {.zero = 0}, {.zero = 1}, {.zero = 2}, {.zero = 3}}; }

std::unique_ptr<dist::ProcessGroup> alone() {
  auto& world = dist::world();
  return world.split(std::vector<int>{world.rank()}, "alone");
}

TEST(IdleParameters, AnIdleExpertIsNotStepped) {
  auto self = alone();
  LayoutRun run(*self, {}, 1);
  // Step 0 uses expert 3; steps 1 and 2 do not: its weights stay as step 0 left them, while
  // expert 0, used at every step, moves.
  run.train(0, 1);
  const StateDict after_use = run.weights();
  run.train(1, 3);
  const StateDict now = run.weights();
  for (const char* name : {"expert3.weight", "expert3.bias", "expert0.weight"}) {
    bool same = false;
    difference({{name, now.at(name)}}, {{name, after_use.at(name)}}, same);
    EXPECT_EQ(same, std::string(name).starts_with("expert3"))
        << name << (same ? " did not move" : " moved (a step without a gradient: weight decay on a zero one)");
  }
}

TEST(IdleParameters, DataParallelEqualsOneProcess) {
  auto& world = dist::world();
  const StateDict reference = one_process(*alone());
  for (const Layout& l : layouts()) {
    if (!l.ddp && l.zero < 0) continue;
    LayoutRun run(world, l, world.size());
    run.train(0, kSteps);
    // One rank reduces nothing: the same sums as one process, bit for bit.
    expect_equal(run.weights(), reference, world.size() == 1, describe(l) + " against one process");
  }
}

// A save in layout `l` on the world after kSaveAt steps.
std::string save_after(const Layout& l, const std::string& dir) {
  auto& world = dist::world();
  LayoutRun run(world, l, world.size());
  run.train(0, kSaveAt);
  train::save_training_checkpoint(dir, run.target(), kSaveAt);
  return dir;
}

std::string scratch_dir(const std::string& tag) {
  auto& world = dist::world();
  std::string dir;
  if (world.rank() == 0) {
    dir = (std::filesystem::temp_directory_path() / ("strata-idle-" + tag + "-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  return dist::broadcast_string(world, dir);
}

TEST(IdleParameters, ResumeInTheSameLayoutIsBitwise) {
  auto& world = dist::world();
  auto self = alone();
  for (const Layout& l : layouts()) {
    const bool single = !l.ddp && l.zero < 0;
    dist::ProcessGroup& group = single ? *self : world;  // one process: each rank alone
    const std::string dir = scratch_dir("same");
    const std::string mine = single ? dir + "/rank" + std::to_string(world.rank()) : dir;
    LayoutRun uninterrupted(group, l, world.size());
    uninterrupted.train(0, kSaveAt);
    train::save_training_checkpoint(mine, uninterrupted.target(), kSaveAt);
    uninterrupted.train(kSaveAt, kSteps);

    LayoutRun resumed(group, l, world.size());
    EXPECT_EQ(train::load_training_checkpoint(mine, resumed.target()), kSaveAt);
    resumed.train(kSaveAt, kSteps);
    expect_equal(resumed.weights(), uninterrupted.weights(), true, describe(l) + " resumed");
    world.barrier()->wait();
    if (world.rank() == 0) std::filesystem::remove_all(dir);
  }
}

TEST(IdleParameters, ResumeInOneProcessFromAnyLayout) {
  auto& world = dist::world();
  auto self = alone();
  const StateDict reference = one_process(*self);
  for (const Layout& l : layouts()) {
    if (!l.ddp && l.zero < 0) continue;
    const std::string dir = save_after(l, scratch_dir("any"));
    // One process from the save against one process from the start: only the first kSaveAt
    // steps' reduction order differs.
    LayoutRun resumed(*self, {}, world.size());
    EXPECT_EQ(train::load_training_checkpoint(dir, resumed.target()), kSaveAt);
    resumed.train(kSaveAt, kSteps);
    expect_equal(resumed.weights(), reference, world.size() == 1, describe(l) + " saved, one process resumed");
    world.barrier()->wait();
    if (world.rank() == 0) std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace strata
