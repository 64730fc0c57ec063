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
//
// Bad option values are refused before anything starts; a step that cannot fit in memory is
// refused with the bytes it needs. With several ranks a failure (e.g. a collective that timed
// out, --collective-timeout) ends the process at once without MPI_Finalize, which would wait
// for a dead or stuck peer.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

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
  double collective_timeout = 600;      // seconds; --collective-timeout or STRATA_COLLECTIVE_TIMEOUT
};

bool g_lead = true;  // rank 0: the one that prints and writes files

// --- ZeRO training state: the sharded checkpoint plus step, sampler and RNG in its metadata ---

checkpoint::Metadata zero_training_metadata(int64_t step, const data::BatchSampler& sampler,
                                            const checkpoint::Metadata& config) {
  checkpoint::Metadata meta{{"step", std::to_string(step)},
                {"rng_seed", std::to_string(default_generator().seed())},
                {"rng_offset", std::to_string(default_generator().offset())}};
  for (const auto& [key, t] : sampler.state_dict()) meta["sampler." + key] = std::to_string(t.to_vector<int64_t>()[0]);
  for (const auto& [key, value] : config) meta[key] = value;
  return meta;
}

// Restores the optimizer's shards and parameters (ZeroOptimizer::load), then the sampler and
// the RNG; returns the number of completed steps. The model configuration is checked first.
int64_t load_zero_training_state(const std::string& dir, parallel::ZeroOptimizer& zero, data::BatchSampler& sampler,
                                 const checkpoint::Metadata& config) {
  const checkpoint::Metadata meta = zero.load(dir);
  const std::string where = "ZeRO training state '" + dir + "'";
  train::check_config(meta, config, where);
  StateDict sampler_state;
  for (const auto& [key, t] : sampler.state_dict())
    sampler_state[key] = from_vector(std::vector<int64_t>{train::metadata_int(meta, "sampler." + key, where)}, {});
  sampler.load_state_dict(sampler_state);
  default_generator().set_state(train::metadata_u64(meta, "rng_seed", where), train::metadata_u64(meta, "rng_offset", where));
  return train::metadata_int(meta, "step", where);
}

// Fails now, not after training, when `dir` cannot be created or written.
void check_writable_dir(const std::filesystem::path& dir, const char* option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  STRATA_CHECK(!ec, option, " '", dir.string(), "': cannot create the directory: ", ec.message());
  STRATA_CHECK(std::filesystem::is_directory(dir), option, " '", dir.string(), "' is not a directory");
  STRATA_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, option, " '", dir.string(), "': the directory is not writable");
}

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// A generous estimate of one training step's activation memory on this rank (float32): per
// block about 16 values per token and width (layer norms, q/k/v, attention output, MLP at 4x
// width, residuals) plus the attention matrix (heads x context per token); the logits and
// their softmax; doubled for the gradients that backward holds at the same time.
double step_activation_bytes(int64_t batch, const nn::GPTConfig& c) {
  const double tokens = static_cast<double>(batch) * static_cast<double>(c.context);
  const double per_token = static_cast<double>(c.n_layer) * (16.0 * c.n_embd + c.n_head * static_cast<double>(c.context)) +
                           2.0 * c.vocab_size + 4.0 * c.n_embd;
  return 2.0 * 4.0 * tokens * per_token;
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

// Bad option values fail before anything starts, naming the option and the value.
void validate(const Options& o) {
  auto positive = [](const char* name, int64_t v) { STRATA_CHECK(v >= 1, name, " must be at least 1, got ", v); };
  auto non_negative = [](const char* name, int64_t v) { STRATA_CHECK(v >= 0, name, " must be 0 or more, got ", v); };
  positive("--steps", o.steps);
  positive("--batch", o.batch);
  positive("--layers", o.layers);
  positive("--heads", o.heads);
  positive("--width", o.width);
  positive("--log-every", o.log_every);
  positive("--eval-examples", o.eval_examples);
  positive("--digits", o.digits);
  non_negative("--warmup", o.warmup);
  non_negative("--eval-every", o.eval_every);
  non_negative("--save-every", o.save_every);
  non_negative("--stop-at", o.stop_at);
  STRATA_CHECK(o.warmup <= o.steps, "--warmup ", o.warmup, " must not exceed --steps ", o.steps);
  STRATA_CHECK(o.zero >= -1, "--zero must be -1 (off) or a ZeRO stage 0-3, got ", o.zero);
  STRATA_CHECK(std::isfinite(o.clip) && o.clip >= 0, "--clip must be a finite number >= 0 (0: off), got ", o.clip);
  STRATA_CHECK(std::isfinite(o.lr) && o.lr > 0, "--lr must be a finite number > 0, got ", o.lr);
  STRATA_CHECK(std::isfinite(o.min_lr_ratio) && o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1,
               "--min-lr-ratio must be in [0, 1], got ", o.min_lr_ratio);
  STRATA_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be a finite number >= 0, got ",
               o.weight_decay);
  STRATA_CHECK(std::isfinite(o.collective_timeout) && o.collective_timeout > 0 && o.collective_timeout <= 1e6,
               "--collective-timeout (or STRATA_COLLECTIVE_TIMEOUT) must be a number of seconds in (0, 1e6], got ",
               o.collective_timeout);
  STRATA_CHECK(o.width % o.heads == 0, "--width ", o.width, " must be a multiple of --heads ", o.heads);
  // Token counts (steps x batch x ranks x context) must fit in 63 bits.
  constexpr int64_t kMaxSteps = int64_t{1} << 40;
  STRATA_CHECK(o.steps <= kMaxSteps, "--steps ", o.steps, " is too large (at most ", kMaxSteps, ")");
  constexpr int64_t kMaxBatch = int64_t{1} << 31;
  STRATA_CHECK(o.batch <= kMaxBatch, "--batch ", o.batch, " is too large (at most ", kMaxBatch, ")");
  if (!o.metrics.empty()) {
    const std::filesystem::path parent = std::filesystem::path(o.metrics).parent_path();
    STRATA_CHECK(!std::filesystem::is_directory(o.metrics), "--metrics '", o.metrics, "' is a directory, not a file");
    if (!parent.empty()) check_writable_dir(parent, "--metrics");
  }
}

int run(const Options& o) {
  validate(o);
  dist::ProcessGroup& world = dist::init({.timeout = std::chrono::milliseconds(
                                              static_cast<int64_t>(o.collective_timeout * 1000))});
  g_lead = world.rank() == 0;
  if (g_lead && !o.export_hf.empty()) check_writable_dir(o.export_hf, "--export-hf");
  if (g_lead && !o.save.empty()) {
    const std::filesystem::path parent = std::filesystem::path(o.save).parent_path();
    if (!parent.empty()) check_writable_dir(parent, "--save");
  }
  data::SyntheticTask task({.digits = o.digits, .seed = o.seed});
  nn::GPTConfig config{.vocab_size = task.vocab_size(), .context = task.sequence_length(), .n_layer = o.layers,
                       .n_head = o.heads, .n_embd = o.width, .dropout = 0.0, .seed = o.seed};
  if (o.param_dtype == "bf16") {
    STRATA_CHECK(o.zero >= 0, "--param-dtype bf16 needs --zero STAGE: optimizers update float32 parameters, and "
                 "ZeroOptimizer keeps the float32 master weights of bf16 parameters (any stage, 0 included)");
    config.param_dtype = DType::BFloat16;
  }
  {
    // A batch that cannot fit fails now with the bytes it needs, instead of swapping.
    const double need = step_activation_bytes(o.batch, config) * dist::local_size();
    const double have = available_memory_bytes();
    if (have > 0 && need > have) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", need);
      char avail[64];
      std::snprintf(avail, sizeof avail, "%.0f", have);
      STRATA_FAIL("out of memory: requested ", buf, " bytes for one training step's activations (--batch ", o.batch,
                  " x context ", config.context, " x width ", config.n_embd, " x ", config.n_layer, " layers, ",
                  dist::local_size(), " rank(s) on this node), more than the ", avail,
                  " bytes available (MemAvailable); lower --batch");
    }
  }
  const checkpoint::Metadata config_meta = train::gpt_config_metadata(config);
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
    start = zero ? load_zero_training_state(o.resume, *zero, sampler, config_meta)
                 : train::load_training_state(o.resume, {model, optimizer, sampler, config_meta});
    // Training from `start` to an earlier end would save weights of step `start` labelled
    // with the earlier step (and a later resume would repeat the steps in between).
    const int64_t end = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
    STRATA_CHECK(start <= end, "'", o.resume, "' was saved at step ", start, ", after the requested end (",
                 o.stop_at > 0 && o.stop_at < o.steps ? "--stop-at " : "--steps ", end,
                 "): nothing to train, and a save would label step-", start, " weights as step ", end,
                 "; pass --steps/--stop-at of at least ", start);
    schedule.set_last_step(start);
    if (g_lead) std::printf("resumed from %s at step %lld\n", o.resume.c_str(), static_cast<long long>(start));
  }
  const std::string metrics_path = g_lead ? o.metrics : "";
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
      zero->save(o.save, zero_training_metadata(completed, sampler, config_meta));
      return;
    }
    if (!g_lead) return;
    train::save_training_state(o.save, {model, optimizer, sampler, config_meta}, completed);
  };

  const int64_t end = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
  // Test hook (tests/faults): rank STRATA_TEST_STALL_RANK stops participating at step
  // STRATA_TEST_STALL_AT_STEP (sleeps until killed), as a hung or stopped peer would.
  const char* stall_rank = std::getenv("STRATA_TEST_STALL_RANK");
  const char* stall_step = std::getenv("STRATA_TEST_STALL_AT_STEP");
  for (int64_t step = start; step < end; ++step) {
    if (stall_rank && stall_step && std::atoi(stall_rank) == world.rank() && std::atoll(stall_step) == step)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
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
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated option: the last wins
  // CLI11 saturates integers that overflow; refuse them instead, naming the value.
  const CLI::Validator fits_int64(
      [](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc::result_out_of_range) return "value " + text + " overflows a 64-bit integer";
        (void)end;
        return "";
      },
      "");
  app.add_option("--steps", o.steps, "training steps")->capture_default_str()->check(fits_int64);
  app.add_option("--batch", o.batch, "sequences per step and rank")->capture_default_str()->check(fits_int64);
  app.add_option("--lr", o.lr, "peak learning rate (AdamW)")->capture_default_str();
  app.add_option("--min-lr-ratio", o.min_lr_ratio, "final lr / peak lr (cosine)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "linear warm-up steps")->capture_default_str()->check(fits_int64);
  app.add_option("--weight-decay", o.weight_decay, "AdamW decay on matrices")->capture_default_str();
  app.add_option("--clip", o.clip, "clip the global gradient norm (0: off)")->capture_default_str();
  app.add_option("--layers", o.layers, "transformer blocks")->capture_default_str()->check(fits_int64);
  app.add_option("--heads", o.heads, "attention heads")->capture_default_str()->check(fits_int64);
  app.add_option("--width", o.width, "embedding width")->capture_default_str()->check(fits_int64);
  app.add_option("--digits", o.digits, "operand digits of the addition task")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of weights, data and dropout")->capture_default_str();
  app.add_option("--log-every", o.log_every, "progress line every N steps")->capture_default_str()->check(fits_int64);
  app.add_option("--eval-every", o.eval_every, "evaluate every N steps (0: at the end only)")->capture_default_str()->check(fits_int64);
  app.add_option("--eval-examples", o.eval_examples, "held-out problems per evaluation")->capture_default_str()->check(fits_int64);
  app.add_option("--metrics", o.metrics, "JSONL metrics file ('' to disable)")->capture_default_str();
  app.add_option("--save", o.save, "training-state file written atomically (with --zero: a directory of step-<N>-<id>/ "
                 "saves and a 'latest' file naming the complete one); stores the model configuration");
  app.add_option("--save-every", o.save_every, "save every N steps (and at the end)")->check(fits_int64);
  app.add_option("--stop-at", o.stop_at, "stop after this step, keeping the schedule of --steps (for jobs in time slices)")->check(fits_int64);
  app.add_option("--resume", o.resume, "training-state file (directory with --zero) to continue from; refused when "
                 "its model configuration, checksums or shard identities do not match, or when it is past --stop-at/--steps");
  app.add_option("--zero", o.zero, "ZeRO stage 0-3 (0: DDP) instead of DDP + AdamW (-1: off); --save/--resume "
                 "then name a sharded checkpoint directory")->capture_default_str();
  app.add_option("--param-dtype", o.param_dtype, "parameter storage: float32, or bf16 (needs --zero: float32 master "
                 "weights per shard; compute stays float32)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
  app.add_option("--export-hf", o.export_hf, "directory for model.safetensors + config.json (HF GPT-2)");
  if (const char* env = std::getenv("STRATA_COLLECTIVE_TIMEOUT")) {
    char* end = nullptr;
    o.collective_timeout = std::strtod(env, &end);
    if (end == env || *end != '\0') o.collective_timeout = std::nan("");  // refused by validate()
  }
  app.add_option("--collective-timeout", o.collective_timeout,
                 "seconds a collective may wait for the other ranks before the run fails (default: "
                 "$STRATA_COLLECTIVE_TIMEOUT, else 600)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::string error;
  try {
    return run(o);
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::fprintf(stderr, "train_gpt: %s\n", error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // With several ranks, a failed collective leaves the group unusable and a peer may be dead
  // or stuck: MPI_Finalize (which runs at exit) would wait for it forever. Exit at once,
  // without finalize (docs/distributed.md); mpirun then ends the other ranks.
  if (dist::is_initialized() && dist::world().size() > 1) std::_Exit(1);
  return 1;
}
