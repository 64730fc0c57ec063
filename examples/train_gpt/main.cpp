// train_gpt: trains a GPT-2 style model on strata's built-in synthetic task (reversed
// multi-digit addition) and reports exact-match accuracy on held-out problems.
//
//   train_gpt --steps 1000                       # train, evaluate, print progress
//   train_gpt --save runs/a.ckpt --save-every 200 # keep a resumable training state
//   train_gpt --resume runs/a.ckpt               # continue exactly where it stopped
//   train_gpt --export-hf runs/hf                # weights for Python tools (safetensors)
//   mpirun -np 2 train_gpt --batch 32            # data parallel: 2 ranks x 32 sequences
//   mpirun -np 2 train_gpt --zero 2              # the same with ZeRO stage 2 (0-3)
//   mpirun -np 2 train_gpt --zero 3 --param-dtype bf16 --save runs/z3  # bf16 + fp32 master
//
// Under mpirun every rank builds the same model, DistributedDataParallel averages the
// gradients, and the BatchSampler gives each rank its slice of every global batch (so N
// ranks with --batch B train like one process with --batch N*B). Every rank evaluates (the
// models are identical, so the results are); only rank 0 prints and writes metrics,
// checkpoints and exports. A training state holds the full model and optimizer, identical on
// every rank: rank 0 writes it, every rank reads it on --resume. With --zero STAGE a
// ZeroOptimizer replaces DDP + AdamW (same loop; stage 0 is DDP); --save/--resume then name a
// directory: ZeRO's sharded checkpoint (each rank writes its shard of the master weights and
// optimizer state), whose metadata carries the rest of the training state (step, sampler
// position, RNG), so every rank saves and loads its own part. --param-dtype bf16 (with
// --zero) stores the model's parameters in bfloat16 and computes in float32; each rank keeps
// float32 master weights for its shard.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "strata/distributed/init.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/zero.h"
#include "strata/strata.h"

using namespace strata;

namespace {

struct Options {
  int64_t steps = 1200;
  int64_t batch = 64;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup = 50;
  double weight_decay = 0.1;
  double clip = 1.0;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t width = 128;
  int digits = 3;
  uint64_t seed = 1;
  int64_t log_every = 50;
  int64_t eval_every = 0;  // 0: only at the end
  int64_t eval_examples = 1000;
  std::string metrics = "runs/train_gpt/metrics.jsonl";
  std::string save;
  int64_t save_every = 0;
  int64_t stop_at = 0;  // 0: run to --steps
  std::string resume;
  std::string export_hf;
  int zero = -1;  // ZeRO stage; -1: DDP (or one process) with a plain AdamW
  std::string param_dtype = "float32";  // or bf16 (with --zero)
};

bool g_lead = true;  // rank 0: the one that prints and writes files

// --- ZeRO training state: the sharded checkpoint plus step, sampler and RNG in its metadata ---

checkpoint::Metadata zero_training_metadata(int64_t step, const data::BatchSampler& sampler) {
  checkpoint::Metadata meta{{"step", std::to_string(step)},
                {"rng_seed", std::to_string(default_generator().seed())},
                {"rng_offset", std::to_string(default_generator().offset())}};
  for (const auto& [key, t] : sampler.state_dict()) meta["sampler." + key] = std::to_string(t.to_vector<int64_t>()[0]);
  return meta;
}

// Restores the optimizer's shards and parameters (ZeroOptimizer::load), then the sampler and
// the RNG; returns the number of completed steps.
int64_t load_zero_training_state(const std::string& dir, parallel::ZeroOptimizer& zero, data::BatchSampler& sampler) {
  const checkpoint::Metadata meta = zero.load(dir);
  auto number = [&](const std::string& key) -> std::string {
    auto it = meta.find(key);
    STRATA_CHECK(it != meta.end(), "ZeRO training state '", dir, "': metadata field '", key,
                 "' is missing (was it written by train_gpt --zero?)");
    STRATA_CHECK(!it->second.empty() && it->second.find_first_not_of("-0123456789") == std::string::npos,
                 "ZeRO training state '", dir, "': metadata field '", key, "' is not an integer: '", it->second, "'");
    return it->second;
  };
  StateDict sampler_state;
  for (const auto& [key, t] : sampler.state_dict())
    sampler_state[key] = from_vector(std::vector<int64_t>{std::stoll(number("sampler." + key))}, {});
  sampler.load_state_dict(sampler_state);
  default_generator().set_state(std::stoull(number("rng_seed")), std::stoull(number("rng_offset")));
  return std::stoll(number("step"));
}

double evaluate(nn::GPT& model, const data::SyntheticTask& task, int64_t examples, train::MetricsWriter& metrics,
                int64_t step) {
  // ZeRO-3 gathers each block as evaluation reaches it (module hooks), like training does.
  model.eval();
  data::EvalResult r = task.evaluate([&](const Tensor& tokens) { return model.forward(tokens); }, examples);
  model.train();
  if (!g_lead) return r.accuracy;
  std::printf("eval  step %lld | exact-match accuracy %.2f%% on %lld held-out problems (chance %.4f%%) | "
              "per-token %.2f%%\n",
              static_cast<long long>(step), 100 * r.accuracy, static_cast<long long>(r.examples), 100 * r.chance,
              100 * r.token_accuracy);
  std::fflush(stdout);
  metrics.write({{"step", step}, {"eval_accuracy", r.accuracy}, {"eval_token_accuracy", r.token_accuracy},
                 {"chance", r.chance}});
  return r.accuracy;
}

int run(const Options& o) {
  dist::ProcessGroup& world = dist::init();
  g_lead = world.rank() == 0;
  data::SyntheticTask task({.digits = o.digits, .seed = o.seed});
  nn::GPTConfig config{.vocab_size = task.vocab_size(), .context = task.sequence_length(), .n_layer = o.layers,
                       .n_head = o.heads, .n_embd = o.width, .dropout = 0.0, .seed = o.seed};
  if (o.param_dtype == "bf16") {
    STRATA_CHECK(o.zero >= 0, "--param-dtype bf16 needs --zero STAGE: optimizers update float32 parameters, and "
                 "ZeroOptimizer keeps the float32 master weights of bf16 parameters (any stage, 0 included)");
    config.param_dtype = DType::BFloat16;
  }
  nn::GPT model(config);
  const optim::AdamWOptions adamw{.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay};
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  std::unique_ptr<parallel::ZeroOptimizer> zero;
  std::unique_ptr<optim::AdamW> plain;
  if (o.zero >= 0) {
    parallel::ZeroOptions zo;
    zo.stage = o.zero;
    zero = std::make_unique<parallel::ZeroOptimizer>(model, adamw, world, zo,
                                           optim::weight_decay_groups(model.named_parameters(), o.lr, o.weight_decay));
  } else {
    if (world.size() > 1) ddp = std::make_unique<parallel::DistributedDataParallel>(model, world);
    plain = std::make_unique<optim::AdamW>(optim::weight_decay_groups(model.named_parameters(), o.lr, o.weight_decay),
                                           adamw);
  }
  optim::Optimizer& optimizer = zero ? zero->optimizer() : *plain;
  manual_seed(o.seed);
  optim::CosineSchedule schedule(optimizer,
                                 {.warmup_steps = o.warmup, .total_steps = o.steps, .min_lr_ratio = o.min_lr_ratio});
  // An index space far larger than any run: every step sees fresh problems.
  data::BatchSampler sampler({.dataset_size = int64_t{1} << 40, .batch_size = o.batch, .seed = o.seed,
                        .rank = world.rank(), .world_size = world.size()});

  int64_t start = 0;
  if (!o.resume.empty()) {
    start = zero ? load_zero_training_state(o.resume, *zero, sampler)
                 : train::load_training_state(o.resume, {model, optimizer, sampler});
    schedule.set_last_step(start);
    if (g_lead) std::printf("resumed from %s at step %lld\n", o.resume.c_str(), static_cast<long long>(start));
  }
  const std::string metrics_path = g_lead ? o.metrics : "";
  if (!metrics_path.empty()) std::filesystem::create_directories(std::filesystem::path(metrics_path).parent_path());
  train::MetricsWriter metrics(metrics_path, /*append=*/start > 0);
  const int64_t global_batch = o.batch * world.size();
  const int64_t tokens_per_step = global_batch * task.sequence_length();
  train::Progress progress(o.steps, tokens_per_step, model.flops_per_step(global_batch, task.sequence_length()));
  if (g_lead)
    std::printf("GPT: %lld parameters (%lld layers, %lld heads, width %lld, context %lld, vocab %lld); "
              "task: %d-digit addition; batch %lld x %d rank(s); parameters %s\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(o.layers),
              static_cast<long long>(o.heads), static_cast<long long>(o.width),
              static_cast<long long>(config.context), static_cast<long long>(config.vocab_size), o.digits,
              static_cast<long long>(o.batch), world.size(),
                o.param_dtype == "bf16" ? "bf16 (fp32 master)" : "float32");

  // ZeRO: collective, every rank writes its shard (after zero_grad, as the loop leaves it).
  auto save = [&](int64_t completed) {
    if (o.save.empty()) return;
    if (zero) {
      zero->save(o.save, zero_training_metadata(completed, sampler));
      return;
    }
    if (!g_lead) return;
    std::filesystem::path dir = std::filesystem::path(o.save).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir);
    train::save_training_state(o.save, {model, optimizer, sampler}, completed);
  };

  const int64_t end = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
  for (int64_t step = start; step < end; ++step) {
    std::vector<int64_t> indices = sampler.next();
    data::Batch batch = task.make_batch(indices);
    Tensor loss = model.loss(batch.inputs, batch.targets);
    loss.backward();
    double grad_norm = 0.0;
    if (o.clip > 0) grad_norm = zero ? zero->clip_grad_norm(o.clip) : optim::clip_grad_norm(model.parameters(), o.clip);
    const double lr = optimizer.param_groups()[0].lr;
    if (zero) {
      zero->step();
      zero->zero_grad();
    } else {
      optimizer.step();
      optimizer.zero_grad();
    }
    schedule.step();
    // The global batch's loss: the mean of the ranks' means (equal batches).
    Tensor global_loss = loss.detach().clone();
    if (world.size() > 1) world.all_reduce(global_loss, dist::ReduceOp::Avg)->wait();
    const double loss_value = global_loss.item();
    if (g_lead && ((step + 1) % o.log_every == 0 || step + 1 == o.steps)) {
      std::printf("%s\n", progress.line(step, loss_value, lr).c_str());
      std::fflush(stdout);
    }
    metrics.write({{"step", step + 1}, {"loss", loss_value}, {"lr", lr}, {"grad_norm", grad_norm},
                   {"tokens_per_second", progress.tokens_per_second(step)}});
    if (o.save_every > 0 && (step + 1) % o.save_every == 0) save(step + 1);
    if (o.eval_every > 0 && (step + 1) % o.eval_every == 0 && step + 1 != o.steps)
      evaluate(model, task, o.eval_examples, metrics, step + 1);
  }
  save(end);
  if (end < o.steps) {
    if (g_lead)
      std::printf("stopped at step %lld of %lld (--stop-at)\n", static_cast<long long>(end),
                static_cast<long long>(o.steps));
    return 0;
  }
  const double accuracy = evaluate(model, task, o.eval_examples, metrics, o.steps);
  // ZeRO-3 holds only shards: gather the full weights (a collective) for the export.
  StateDict weights = zero && !o.export_hf.empty() ? zero->full_parameters() : model.state_dict();
  if (!o.export_hf.empty() && g_lead) {
    std::filesystem::create_directories(o.export_hf);
    checkpoint::export_gpt2_safetensors(o.export_hf, weights,
                            {.vocab_size = config.vocab_size, .n_positions = config.context,
                             .n_embd = config.n_embd, .n_layer = config.n_layer, .n_head = config.n_head,
                             .dropout = config.dropout});
    std::printf("exported Hugging Face GPT-2 weights to %s\n", o.export_hf.c_str());
  }
  if (g_lead) std::printf("final exact-match accuracy: %.2f%%\n", 100 * accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Train a GPT on strata's built-in synthetic task (reversed multi-digit addition)"};
  app.add_option("--steps", o.steps, "training steps")->capture_default_str();
  app.add_option("--batch", o.batch, "sequences per step and rank")->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate (AdamW)")->capture_default_str();
  app.add_option("--min-lr-ratio", o.min_lr_ratio, "final lr / peak lr (cosine)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "linear warm-up steps")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW decay on matrices")->capture_default_str();
  app.add_option("--clip", o.clip, "clip the global gradient norm (0: off)")->capture_default_str();
  app.add_option("--layers", o.layers, "transformer blocks")->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads")->capture_default_str();
  app.add_option("--width", o.width, "embedding width")->capture_default_str();
  app.add_option("--digits", o.digits, "operand digits of the addition task")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of weights, data and dropout")->capture_default_str();
  app.add_option("--log-every", o.log_every, "progress line every N steps")->capture_default_str();
  app.add_option("--eval-every", o.eval_every, "evaluate every N steps (0: at the end only)")->capture_default_str();
  app.add_option("--eval-examples", o.eval_examples, "held-out problems per evaluation")->capture_default_str();
  app.add_option("--metrics", o.metrics, "JSONL metrics file ('' to disable)")->capture_default_str();
  app.add_option("--save", o.save, "training-state file written atomically (a directory with --zero)");
  app.add_option("--save-every", o.save_every, "save every N steps (and at the end)");
  app.add_option("--stop-at", o.stop_at, "stop after this step, keeping the schedule of --steps (for jobs in time slices)");
  app.add_option("--resume", o.resume, "training-state file (directory with --zero) to continue from");
  app.add_option("--zero", o.zero, "ZeRO stage 0-3 (0: DDP) instead of DDP + AdamW (-1: off); --save/--resume "
                 "then name a sharded checkpoint directory")->capture_default_str();
  app.add_option("--param-dtype", o.param_dtype, "parameter storage: float32, or bf16 (needs --zero: float32 master "
                 "weights per shard; compute stays float32)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
  app.add_option("--export-hf", o.export_hf, "directory for model.safetensors + config.json (HF GPT-2)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "train_gpt: %s\n", e.what());
    return 1;
  }
}
