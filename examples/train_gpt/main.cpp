// train_gpt: trains a GPT-2 style model on strata's built-in synthetic task (reversed
// multi-digit addition) and reports exact-match accuracy on held-out problems.
//
//   train_gpt --steps 1000                       # train, evaluate, print progress
//   train_gpt --save runs/a --save-every 200     # keep a resumable training state
//   train_gpt --resume runs/a                    # continue exactly where it stopped
//   train_gpt --export-hf runs/hf                # weights for Python tools (safetensors)
//   mpirun -np 2 train_gpt --batch 32            # data parallel: 2 ranks x 32 sequences
//   mpirun -np 2 train_gpt --zero 2              # the same with ZeRO stage 2 (0-3)
//   mpirun -np 2 train_gpt --zero 3 --param-dtype bf16 --save runs/z3  # bf16 + fp32 master
//   mpirun -np 4 train_gpt --zero 3 --hsdp       # HSDP: ZeRO-3 inside each node, replicas across
//   mpirun -np 4 train_gpt --tp 2 --resume runs/z3 --global-batch 128   # any other layout
//   mpirun -np 4 train_gpt --tp 2 --zero 1       # dp=2 x tp=2: each layer split over 2 ranks
//   mpirun -np 8 train_gpt --pp 2 --tp 2 --layers 4   # pp=2 x dp=2 x tp=2 (1F1B, 4 micro-batches)
//   mpirun -np 4 train_gpt --cp 2 --zero 2       # dp=2 x cp=2: each sequence split over 2 ranks
//   train_gpt --timeline runs/step.json          # Perfetto timeline of step 1 (every rank)
//   mpirun -np 2 train_gpt --device cuda --autocast bf16   # each rank on its GPU, bf16 products
//
// Under mpirun every rank builds the same model, DistributedDataParallel averages the
// gradients, and the BatchSampler gives each rank its slice of every global batch (so N
// ranks with --batch B train like one process with --batch N*B). Every rank evaluates (the
// models are identical, so the results are); only rank 0 prints and writes metrics and
// exports. --save names a checkpoint directory (train/distributed_checkpoint.h): every rank
// writes its own part of the training state (model, master weights, AdamW state, step,
// sampler position, RNG), whatever the layout, and --resume loads it into any layout (another
// world size, ZeRO stage, --tp or --pp; --global-batch keeps the batches the same). With
// --zero STAGE a ZeroOptimizer replaces DDP + AdamW (same loop; stage 0 is DDP).
// --param-dtype bf16 (with --zero) stores the model's parameters in bfloat16 and computes in
// float32; each rank keeps float32 master weights for its shard.
//
// Bad option values are refused before anything starts; a step that cannot fit in memory is
// refused with the bytes it needs. With --pp P each pipeline rank builds only its stage's
// blocks (parallel::Pipeline runs the schedule over --micro-batches); the loss comes from
// the last stage, and evaluation runs the stages one after the other. With several ranks a failure (e.g. a collective
// that timed out, --collective-timeout) ends the process at once without MPI_Finalize, which would wait for a dead or
// stuck peer.
#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/checkpointing.h"
#include "common/data_parallel.h"
#include "common/device_setup.h"
#include "common/layout.h"
#include "common/model_training.h"
#include "common/pipeline_setup.h"
#include "common/preflight.h"
#include "common/run_example.h"
#include "common/step_log.h"
#include "common/train_options.h"
#include "strata/distributed/init.h"
#include "strata/parallel/pipeline.h"
#include "strata/strata.h"

using namespace strata;
using examples::check_at_least_one;
using examples::check_not_negative;

namespace {

struct Options {
  // The default recipe is the main job (docs/performance.md "The main job across threads,
  // ranks and seeds"). The loss sits on a plateau (~1.38) for 200-550 steps, a length that
  // depends on the seed and on the summation order (thread count, ranks); runs may then sit
  // on a second one (~0.48: one answer digit at chance, ~10% exact match) for hundreds of
  // steps, and a cosine schedule of 1200 steps had lowered lr too far by then: one rank and
  // one thread ended at 98.8% for seed 3 (16.1% on another CPU). Other learning rates,
  // batch 128 and a third layer failed on some seed too. 16 heads of width 8 (the cost of 4
  // of 32) left the plateaus sooner in the runs tried, and 2400 steps keep lr up for a late
  // escape.
  examples::TrainOptions train{.steps = 2400, .batch = 64, .metrics = "runs/train_gpt/metrics.jsonl"};
  int64_t layers = 2;
  int64_t heads = 16;
  int64_t width = 128;
  int digits = 3;
  int64_t context = 0;     // 0: the task's sequence length; more pads every sequence (e.g. for --cp)
  int64_t eval_every = 0;  // 0: only at the end
  int64_t eval_examples = 1000;
  double dropout = 0.0;
  examples::CheckpointOptions ckpt;
};

bool g_lead = true;  // rank 0: the one that prints and writes files

// A generous estimate of one training step's activation memory on this rank (float32): per
// block about 16 values per token and width (layer norms, q/k/v, attention output, MLP at 4x
// width, residuals) plus the attention matrix (heads x context per token); the logits and
// their softmax; doubled for the gradients that backward holds at the same time.
double step_activation_bytes(int64_t batch, const nn::GPTConfig& c) {
  const double tokens = static_cast<double>(batch) * static_cast<double>(c.context);
  const double per_token =
      static_cast<double>(c.n_layer) * (16.0 * c.n_embd + c.n_head * static_cast<double>(c.context)) +
      2.0 * c.vocab_size + 4.0 * c.n_embd;
  return 2.0 * 4.0 * tokens * per_token;
}

double evaluate(nn::GPT& model, parallel::Pipeline* pipeline, const data::SyntheticTask& task, int64_t examples,
                train::MetricsWriter& metrics, int64_t step) {
  // ZeRO-3 gathers each block as evaluation reaches it (module hooks), like training does.
  model.eval();
  const Device device = model.parameters().front().device();  // --device (the pipeline moves its own)
  data::EvalResult r = task.evaluate(
      [&](const Tensor& tokens) {
        return pipeline ? pipeline->forward_logits(tokens) : model.forward(tokens.to(device));
      },
      examples);
  model.train();
  if (!g_lead) return r.accuracy;
  std::printf(
      "eval  step %lld | exact-match accuracy %.2f%% on %lld held-out problems (chance %.4f%%) | "
      "per-token %.2f%%\n",
      static_cast<long long>(step), 100 * r.accuracy, static_cast<long long>(r.examples), 100 * r.chance,
      100 * r.token_accuracy);
  std::fflush(stdout);
  metrics.write(
      {{"step", step}, {"eval_accuracy", r.accuracy}, {"eval_token_accuracy", r.token_accuracy}, {"chance", r.chance}});
  return r.accuracy;
}

// Bad option values fail before anything starts, naming the option and the value.
void validate(const Options& o) {
  examples::validate_train_options(o.train);
  STRATA_CHECK(o.train.ep == 1, "--ep ", o.train.ep,
               " shards a mixture of experts: train_gpt's GPT has none (train_llama --model mixtral has)");
  check_at_least_one({{"--layers", o.layers},
                      {"--heads", o.heads},
                      {"--width", o.width},
                      {"--eval-examples", o.eval_examples},
                      {"--digits", o.digits}});
  check_not_negative({{"--eval-every", o.eval_every}});
  examples::validate_checkpoint_options(o.ckpt);
  check_not_negative({{"--context", o.context}});
  const int64_t task_length = data::SyntheticTask({.digits = o.digits}).sequence_length();
  STRATA_CHECK(o.context == 0 || o.context >= task_length, "--context ", o.context,
               " is shorter than the task's sequences: ", task_length, " tokens with --digits ", o.digits);
  examples::check_context_split(o.train, o.context > 0 ? o.context : task_length,
                                "--context (0: the task's " + std::to_string(task_length) + " tokens with --digits " +
                                    std::to_string(o.digits) + "; longer sequences are padded)");
  STRATA_CHECK(o.width % o.heads == 0, "--width ", o.width, " must be a multiple of --heads ", o.heads);
  // Dropout 1 would zero every activation (and scale by 1 / 0).
  STRATA_CHECK(o.dropout >= 0 && o.dropout < 1, "--dropout must be in [0, 1), got ", o.dropout);
}

// The model for the task: --layers blocks of --heads x (--width / --heads), parameters in
// --param-dtype.
nn::GPTConfig model_config(const Options& o, const examples::TrainOptions& t, const data::SyntheticTask& task) {
  nn::GPTConfig config{.vocab_size = task.vocab_size(),
                       .context = o.context > 0 ? o.context : task.sequence_length(),
                       .n_layer = o.layers,
                       .n_head = o.heads,
                       .n_embd = o.width,
                       .dropout = o.dropout,
                       .seed = t.seed};
  config.param_dtype = examples::parameter_dtype(t);
  config.padded_vocab_size = examples::padded_vocab_size(t, config.vocab_size);
  return config;
}

// The whole model's parameters (a pipeline stage holds part of them), the head counted once:
// GPT ties it to the token embedding.
int64_t whole_parameters(const nn::GPTConfig& config) {
  const nn::ParameterCounts counts = nn::parameter_counts(config);
  const int64_t vocab_rows = nn::vocab_rows("GPT", config.vocab_size, config.padded_vocab_size);
  return counts.embedding + config.n_layer * counts.block + counts.head - vocab_rows * config.n_embd;
}

// One step's FLOPs for the progress line: the model counts its own, a pipeline stage cannot.
double step_flops(const nn::GPT& model, bool pipelined, const nn::GPTConfig& config, int64_t global_batch) {
  if (!pipelined) return model.flops_per_step(global_batch, config.context);
  return examples::whole_model_step_flops(whole_parameters(config), config.n_layer, config.n_embd, config.context,
                                          global_batch);
}

void print_banner(const Options& o, const examples::TrainOptions& t, const nn::GPTConfig& config, int data_ranks,
                  const std::string& device_note) {
  if (!g_lead) return;
  std::printf(
      "GPT: %lld parameters (%lld layers, %lld heads, width %lld, context %lld, vocab %lld); "
      "task: %d-digit addition; batch %lld x %d rank(s)%s; parameters %s%s\n",
      static_cast<long long>(whole_parameters(config)), static_cast<long long>(o.layers),
      static_cast<long long>(o.heads), static_cast<long long>(o.width), static_cast<long long>(config.context),
      static_cast<long long>(config.vocab_size), o.digits, static_cast<long long>(t.batch), data_ranks,
      examples::tensor_parallel_note(t).c_str(), t.param_dtype == "bf16" ? "bf16 (fp32 master)" : "float32",
      device_note.c_str());
}

// Test hook (tests/faults): rank STRATA_TEST_STALL_RANK stops participating at step
// STRATA_TEST_STALL_AT_STEP (sleeps until killed), as a hung or stopped peer would.
// Likewise STRATA_TEST_KILL_RANK dies by SIGKILL at STRATA_TEST_KILL_AT_STEP, on the first run
// of a job only (STRATA_RESTART_COUNT unset or 0: tools/strata_run restarts it).
class InjectedFaults {
 public:
  explicit InjectedFaults(int rank) : rank_(rank) {
    const char* restart_count = std::getenv("STRATA_RESTART_COUNT");
    first_run_ = restart_count == nullptr || std::atoi(restart_count) == 0;
  }

  // Before step `step` (0-based) on this rank.
  void before_step(int64_t step) const {
    if (stall_rank_ && stall_step_ && std::atoi(stall_rank_) == rank_ && std::atoll(stall_step_) == step)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (first_run_ && kill_rank_ && kill_step_ && std::atoi(kill_rank_) == rank_ && std::atoll(kill_step_) == step)
      std::raise(SIGKILL);
  }

 private:
  int rank_;
  const char* stall_rank_ = std::getenv("STRATA_TEST_STALL_RANK");
  const char* stall_step_ = std::getenv("STRATA_TEST_STALL_AT_STEP");
  const char* kill_rank_ = std::getenv("STRATA_TEST_KILL_RANK");
  const char* kill_step_ = std::getenv("STRATA_TEST_KILL_AT_STEP");
  bool first_run_ = true;
};

int run(const Options& o) {
  validate(o);
  examples::TrainOptions t = o.train;
  examples::check_pipeline_options(t, o.layers, !o.ckpt.export_hf.empty());
  dist::ProcessGroup& world = examples::init_world(t);
  g_lead = world.rank() == 0;
  examples::Layout layout = examples::make_layout(world, t);
  dist::ProcessGroup& data = *layout.data;  // DDP or ZeRO, the sampler, the loss average
  examples::resolve_global_batch(t, data.size());
  examples::Checkpointing checkpointing(o.ckpt, world);
  data::SyntheticTask task({.digits = o.digits, .seed = t.seed});
  const nn::GPTConfig config = model_config(o, t, task);
  // A batch that cannot fit fails now with the bytes it needs, instead of swapping.
  examples::check_step_memory(step_activation_bytes(t.batch, config) / static_cast<double>(t.cp),
                              "--batch " + std::to_string(t.batch) + " x context " + std::to_string(config.context) +
                                  " x width " + std::to_string(config.n_embd) + " x " + std::to_string(config.n_layer) +
                                  " layers",
                              layout.device);
  // With --pp this rank builds its stage only (embedding on the first, head on the last).
  const parallel::PipelinePartition partition =
      examples::pipeline_partition(t, nn::parameter_counts(config), config.n_layer);
  nn::GPT model(config, layout.factory, examples::stage_of(layout, partition));
  examples::ModelTraining training(model, train::model_family("gpt2"), layout, partition, t, world);
  parallel::Pipeline* pipeline = training.pipeline();
  manual_seed(t.seed);
  // An index space far larger than any run: every step sees fresh problems.
  // Every rank of a tensor-parallel group reads the same batch: sharded by data rank.
  data::BatchSampler sampler({.dataset_size = int64_t{1} << 40,
                              .batch_size = t.batch,
                              .seed = t.seed,
                              .rank = data.rank(),
                              .world_size = data.size()});
  checkpointing.attach(training.checkpoint_target(sampler, train::config_metadata(config)));
  checkpointing.init_weights();  // pretrained weights (e.g. `strata-ckpt import`), in any layout
  const int64_t start = checkpointing.resume(t.steps);
  const std::string metrics_path = g_lead ? t.metrics : "";
  train::MetricsWriter metrics(metrics_path, /*append=*/start > 0);
  const int64_t global_batch = t.batch * data.size();
  train::Progress progress(t.steps, global_batch * task.sequence_length(),
                           step_flops(model, layout.pipeline != nullptr, config, global_batch));
  print_banner(o, t, config, data.size(), examples::device_note(t, layout.device, world.size()));

  const int64_t end = examples::end_step(o.ckpt, t.steps);
  const InjectedFaults faults(world.rank());
  for (int64_t step = start; step < end; ++step) {
    faults.before_step(step);
    std::vector<int64_t> indices = sampler.next();
    data::Batch batch = task.make_batch(indices, data::DataSplit::Train, config.context);
    const examples::StepResult result = examples::step_keeping_checkpoints(training, checkpointing, step, batch);
    examples::log_step(progress, metrics, step, t.steps, t.log_every, g_lead, result, layout.device);
    checkpointing.after_step(step + 1);  // collective: every rank writes its part
    if (o.eval_every > 0 && (step + 1) % o.eval_every == 0 && step + 1 != t.steps)
      evaluate(model, pipeline, task, o.eval_examples, metrics, step + 1);
  }
  checkpointing.finish(end);
  if (checkpointing.stopped_early(end, t.steps)) return 0;
  const double accuracy = evaluate(model, pipeline, task, o.eval_examples, metrics, t.steps);
  checkpointing.export_hf("train_gpt", "GPT-2");
  if (g_lead) std::printf("final exact-match accuracy: %.2f%%\n", 100 * accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Train a GPT on strata's built-in synthetic task (reversed multi-digit addition)"};
  const CLI::Validator& fits_int64 = examples::fits_int64();
  examples::add_train_options(app, o.train);
  app.add_option("--layers", o.layers, "transformer blocks")->capture_default_str()->check(fits_int64);
  app.add_option("--heads", o.heads, "attention heads")->capture_default_str()->check(fits_int64);
  app.add_option("--width", o.width, "embedding width")->capture_default_str()->check(fits_int64);
  app.add_option("--digits", o.digits, "operand digits of the addition task")->capture_default_str();
  app.add_option("--context", o.context,
                 "tokens per training sequence: the task's are padded to this (0: the task's length); "
                 "with --cp C a multiple of 2C")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--eval-every", o.eval_every, "evaluate every N steps (0: at the end only)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--eval-examples", o.eval_examples, "held-out problems per evaluation")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--dropout", o.dropout,
                 "dropout probability of the embeddings and of the attention and MLP "
                 "outputs while training, in [0, 1)")
      ->capture_default_str();
  examples::add_checkpoint_options(app, o.ckpt, "HF GPT-2",
                                   "checkpoint directory to continue from, in any layout (an earlier single-file "
                                   "training state: convert it with `strata-ckpt convert`); refused when its model "
                                   "configuration or checksums do not "
                                   "match, or when it is past --stop-at/--steps");
  CLI11_PARSE(app, argc, argv);
  return examples::run_example("train_gpt", [&] { return run(o); });
}
