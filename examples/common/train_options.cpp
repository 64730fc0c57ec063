#include "common/train_options.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "common/device_setup.h"
#include "common/preflight.h"
#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/nn/causal_lm.h"

namespace strata::examples {

const CLI::Validator& fits_int64() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc::result_out_of_range) return "value " + text + " overflows a 64-bit integer";
        (void)end;
        return "";
      },
      "");
  return validator;
}

namespace {

// Where and how each rank computes: --device, --autocast, --profile-step, --padded-vocab-multiple.
void add_device_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--device", o.device,
                 "where each rank trains: cpu, cuda (GPU local-rank % visible GPUs) or cuda:N; the model, "
                 "optimizer state and batches live there")
      ->capture_default_str();
  app.add_option("--autocast", o.autocast,
                 "mixed precision of the matrix products: none, bf16, or fp16 (with dynamic loss scaling: a "
                 "step whose gradients overflow is skipped and the scale halved)")
      ->check(CLI::IsMember({"none", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--profile-step", o.profile_step,
                 "profile this step (0-based): rank 0 prints each op's calls, host and device time, kernel "
                 "launches and bytes allocated; with --timeline of the same step the ops join the timeline")
      ->check(fits_int64());
  app.add_option("--padded-vocab-multiple", o.padded_vocab_multiple,
                 "pad the token embedding and head to a multiple of this many rows (zero rows, never predicted, "
                 "left out of the loss and of --export-hf); 0: 128 with --device cuda, 1 (no padding) on the CPU")
      ->capture_default_str()
      ->check(fits_int64());
}

// --tp, --pp, --cp and their companions (the mesh's degrees and the pipeline's schedule).
void add_model_parallel_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--tp", o.tp,
                 "tensor-parallel degree: ranks that split every layer (Megatron-style); the "
                 "data-parallel degree is ranks / --tp")
      ->capture_default_str()
      ->check(fits_int64());
  app.add_flag("--sequence-parallel", o.sequence_parallel,
               "with --tp: norms, residuals and dropout on each rank's piece of the sequence");
  app.add_option("--pp", o.pp,
                 "pipeline-parallel degree: ranks that each run consecutive blocks; the "
                 "data-parallel degree is ranks / (--pp x --tp)")
      ->capture_default_str()
      ->check(fits_int64());
  app.add_option("--cp", o.cp,
                 "context-parallel degree: ranks that split every sequence (load-balanced causal "
                 "chunks, ring attention); the data-parallel degree is ranks / (--pp x --cp x --tp)")
      ->capture_default_str()
      ->check(fits_int64());
  app.add_option("--cp-attention", o.cp_attention,
                 "with --cp: keys and values passed round a ring of the ranks (overlapped with the "
                 "attention) or all-gathered at once")
      ->check(CLI::IsMember({"ring", "all-gather"}))
      ->capture_default_str();
  app.add_option("--ep", o.ep,
                 "expert-parallel degree (a mixture of experts): ranks of the data x context group that "
                 "share one set of experts, each holding 1/--ep of them (tokens exchanged all-to-all)")
      ->capture_default_str()
      ->check(fits_int64());
  app.add_option("--micro-batches", o.micro_batches, "with --pp: micro-batches per step (divides --batch; 0: 2 x --pp)")
      ->capture_default_str()
      ->check(fits_int64());
  app.add_option("--schedule", o.schedule, "with --pp: pipeline schedule")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved"}))
      ->capture_default_str();
  app.add_option("--chunks", o.chunks, "with --schedule interleaved: model chunks (virtual stages) per rank")
      ->capture_default_str()
      ->check(fits_int64());
}

}  // namespace

void add_train_options(CLI::App& app, TrainOptions& o) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--steps", o.steps, "training steps")->capture_default_str()->check(fits_int64());
  app.add_option("--batch", o.batch, "sequences per step and rank")->capture_default_str()->check(fits_int64());
  app.add_option("--global-batch", o.global_batch,
                 "sequences per step over all data-parallel ranks, instead of "
                 "--batch (the same run at any world size: for restarts on fewer ranks)")
      ->check(fits_int64());
  app.add_option("--lr", o.lr, "peak learning rate (AdamW)")->capture_default_str();
  app.add_option("--min-lr-ratio", o.min_lr_ratio, "final lr / peak lr (cosine, linear, wsd)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "linear warm-up steps")->capture_default_str()->check(fits_int64());
  app.add_option("--lr-schedule", o.lr_schedule,
                 "after the warm-up: cosine or linear decay to --min-lr-ratio at --steps, constant, or wsd "
                 "(constant, then linear decay over the last --decay-fraction of the steps)")
      ->check(CLI::IsMember({"cosine", "linear", "constant", "wsd"}))
      ->capture_default_str();
  app.add_option("--decay-fraction", o.decay_fraction, "with --lr-schedule wsd: share of --steps spent decaying")
      ->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW decay on matrices")->capture_default_str();
  app.add_option("--clip", o.clip, "clip the global gradient norm (0: off)")->capture_default_str();
  app.add_flag("--skip-nonfinite-steps", o.skip_nonfinite_steps,
               "skip a step whose loss or gradient norm is nan or inf (its gradients are dropped, the weights "
               "unchanged; counted in the log and metrics) instead of stopping the run at it");
  app.add_option("--seed", o.seed, "seed of the weights and the data order")->capture_default_str();
  app.add_option("--log-every", o.log_every, "progress line every N steps")->capture_default_str()->check(fits_int64());
  app.add_option("--metrics", o.metrics, "JSONL metrics file ('' to disable)")->capture_default_str();
  app.add_option("--zero", o.zero, "ZeRO stage 0-3 (0: DDP) instead of DDP + AdamW (-1: off)")->capture_default_str();
  app.add_flag_callback(
      "--hsdp", [&o] { o.shard_size = std::max(o.shard_size, 0); },
      "with --zero 1-3: shard inside each node, replicate across nodes (hybrid sharding)");
  app.add_option("--shard-size", o.shard_size,
                 "with --zero 1-3: HSDP with shard groups of N data ranks inside a node (-1: off, 0: one node)")
      ->capture_default_str();
  app.add_option("--param-dtype", o.param_dtype,
                 "parameter storage: float32, or bf16 (needs --zero: float32 master "
                 "weights per shard; compute stays float32)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
  if (const char* env = std::getenv("STRATA_COLLECTIVE_TIMEOUT")) {
    char* end = nullptr;
    o.collective_timeout = std::strtod(env, &end);
    if (end == env || *end != '\0') o.collective_timeout = std::nan("");  // refused by validate_train_options()
  }
  add_model_parallel_options(app, o);
  app.add_option("--timeline", o.timeline, "write a Chrome-trace/Perfetto JSON timeline of one step (every rank) here");
  app.add_option("--timeline-step", o.timeline_step, "the step --timeline records (0-based)")
      ->capture_default_str()
      ->check(fits_int64());
  add_device_options(app, o);
  app.add_option("--collective-timeout", o.collective_timeout,
                 "seconds a collective may wait for the other ranks before the run fails (default: "
                 "$STRATA_COLLECTIVE_TIMEOUT, else 600)")
      ->capture_default_str();
}

void check_at_least_one(NamedValues options) {
  for (const auto& [option, value] : options) STRATA_CHECK(value >= 1, option, " must be at least 1, got ", value);
}

void check_not_negative(NamedValues options) {
  for (const auto& [option, value] : options) STRATA_CHECK(value >= 0, option, " must be 0 or more, got ", value);
}

// --ep: a divisor of the data x context ranks (checked with the mesh), beside DDP or ZeRO 1-2.
void check_expert_parallel_options(const TrainOptions& o) {
  STRATA_CHECK(o.ep >= 1, "--ep must be at least 1, got ", o.ep);
  if (o.ep == 1) return;
  STRATA_CHECK(o.zero <= 2, "--ep ", o.ep, " runs beside DDP or --zero 1 or 2, not --zero ", o.zero,
               " (ZeRO-3's units would mix experts, held by one expert-parallel rank, with shared parameters)");
  STRATA_CHECK(o.shard_size == -1, "--ep ", o.ep, " cannot run with --hsdp / --shard-size (experts are reduced over ",
               "their own expert-data group, not a shard group)");
}

void validate_train_options(const TrainOptions& o) {
  check_device_option(o);
  check_expert_parallel_options(o);
  check_at_least_one({{"--steps", o.steps}, {"--batch", o.batch}, {"--log-every", o.log_every}});
  check_not_negative({{"--warmup", o.warmup}, {"--global-batch", o.global_batch}});
  STRATA_CHECK(o.warmup <= o.steps, "--warmup ", o.warmup, " must not exceed --steps ", o.steps);
  STRATA_CHECK(o.zero >= -1, "--zero must be -1 (off) or a ZeRO stage 0-3, got ", o.zero);
  STRATA_CHECK(o.shard_size >= -1, "--shard-size must be -1 (off), 0 (one node's ranks) or a rank count, got ",
               o.shard_size);
  STRATA_CHECK(
      o.shard_size == -1 || o.zero >= 1, "--hsdp / --shard-size ", o.shard_size,
      " needs --zero 1, 2 or 3: HSDP shards ZeRO's states inside a shard group and replicates them across; got "
      "--zero ",
      o.zero);
  STRATA_CHECK(o.tp >= 1, "--tp must be at least 1, got ", o.tp);
  STRATA_CHECK(!o.sequence_parallel || o.tp > 1, "--sequence-parallel needs --tp of 2 or more");
  STRATA_CHECK(o.pp >= 1, "--pp must be at least 1, got ", o.pp);
  STRATA_CHECK(o.cp >= 1, "--cp must be at least 1, got ", o.cp);
  STRATA_CHECK(o.cp > 1 || o.cp_attention == "ring", "--cp-attention takes effect with --cp of 2 or more");
  check_not_negative({{"--micro-batches", o.micro_batches},
                      {"--timeline-step", o.timeline_step},
                      {"--padded-vocab-multiple", o.padded_vocab_multiple}});
  check_at_least_one({{"--chunks", o.chunks}});
  STRATA_CHECK(o.chunks == 2 || o.schedule == "interleaved", "--chunks ", o.chunks,
               " takes effect with --schedule interleaved only");
  const int64_t m = micro_batches(o);
  STRATA_CHECK(o.pp == 1 || o.global_batch > 0 || o.batch % m == 0, "--batch ", o.batch, " does not divide into ", m,
               " micro-batches (--micro-batches)");
  STRATA_CHECK(o.pp > 1 || (o.micro_batches == 0 && o.schedule == "1f1b"),
               "--micro-batches and --schedule take effect with --pp of 2 or more");
  STRATA_CHECK(o.zero != 3 || o.pp == 1,
               "--zero 3 cannot run with --pp (ZeRO-3's per-block parameter gathers do not "
               "fit a pipeline's micro-batches); use --zero 1 or 2",
               o.shard_size >= 0 ? " (--hsdp / --shard-size then shard ZeRO-1/2's states in each shard group)" : "");
  STRATA_CHECK(std::isfinite(o.clip) && o.clip >= 0, "--clip must be a finite number >= 0 (0: off), got ", o.clip);
  STRATA_CHECK(std::isfinite(o.lr) && o.lr > 0, "--lr must be a finite number > 0, got ", o.lr);
  STRATA_CHECK(std::isfinite(o.min_lr_ratio) && o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1,
               "--min-lr-ratio must be in [0, 1], got ", o.min_lr_ratio);
  STRATA_CHECK(std::isfinite(o.decay_fraction) && o.decay_fraction >= 0 && o.decay_fraction <= 1,
               "--decay-fraction must be in [0, 1], got ", o.decay_fraction);
  STRATA_CHECK(o.lr_schedule == "wsd" || o.decay_fraction == 0.1,
               "--decay-fraction takes effect with --lr-schedule wsd only");
  STRATA_CHECK(
      o.lr_schedule != "wsd" || o.warmup + std::llround(o.decay_fraction * static_cast<double>(o.steps)) <= o.steps,
      "--warmup ", o.warmup, " plus --decay-fraction ", o.decay_fraction, " of --steps ", o.steps, " exceed --steps");
  STRATA_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
               "--weight-decay must be a finite number >= 0, got ", o.weight_decay);
  STRATA_CHECK(std::isfinite(o.collective_timeout) && o.collective_timeout > 0 && o.collective_timeout <= 1e6,
               "--collective-timeout (or STRATA_COLLECTIVE_TIMEOUT) must be a number of seconds in (0, 1e6], got ",
               o.collective_timeout);
  // Token counts (steps x batch x ranks x context) must fit in 63 bits.
  constexpr int64_t kMaxSteps = int64_t{1} << 40;
  STRATA_CHECK(o.steps <= kMaxSteps, "--steps ", o.steps, " is too large (at most ", kMaxSteps, ")");
  constexpr int64_t kMaxBatch = int64_t{1} << 31;
  STRATA_CHECK(o.batch <= kMaxBatch, "--batch ", o.batch, " is too large (at most ", kMaxBatch, ")");
  if (!o.timeline.empty()) {
    const std::filesystem::path parent = std::filesystem::path(o.timeline).parent_path();
    STRATA_CHECK(!std::filesystem::is_directory(o.timeline), "--timeline '", o.timeline,
                 "' is a directory, not a file");
    if (!parent.empty()) check_writable_dir(parent, "--timeline");
    STRATA_CHECK(o.timeline_step < o.steps, "--timeline-step ", o.timeline_step, " is past the last step (--steps ",
                 o.steps, ")");
  }
  STRATA_CHECK(o.profile_step >= -1, "--profile-step must be a step (0-based) or -1 (off), got ", o.profile_step);
  STRATA_CHECK(o.profile_step < o.steps, "--profile-step ", o.profile_step, " is past the last step (--steps ", o.steps,
               ")");
  if (!o.metrics.empty()) {
    const std::filesystem::path parent = std::filesystem::path(o.metrics).parent_path();
    STRATA_CHECK(!std::filesystem::is_directory(o.metrics), "--metrics '", o.metrics, "' is a directory, not a file");
    if (!parent.empty()) check_writable_dir(parent, "--metrics");
  }
}

void resolve_global_batch(TrainOptions& o, int data_ranks) {
  if (o.global_batch == 0) return;
  STRATA_CHECK(o.global_batch % data_ranks == 0, "--global-batch ", o.global_batch, " does not divide over the ",
               data_ranks, " data-parallel rank(s)");
  o.batch = o.global_batch / data_ranks;
  const int64_t m = micro_batches(o);
  STRATA_CHECK(o.pp == 1 || o.batch % m == 0, "--global-batch ", o.global_batch, " gives ", o.batch,
               " sequences per data rank, which do not divide into ", m, " micro-batches (--micro-batches)");
}

int64_t micro_batches(const TrainOptions& o) { return o.micro_batches > 0 ? o.micro_batches : 2 * o.pp; }

int64_t padded_vocab_size(const TrainOptions& o, int64_t vocab_size) {
  // GPUs: llm.c's 128, so that the head's GEMMs (and the logits' rows) stay aligned.
  const int64_t multiple = o.padded_vocab_multiple > 0    ? o.padded_vocab_multiple
                           : o.device.starts_with("cuda") ? 128
                                                          : 1;
  return multiple == 1 ? 0 : nn::pad_vocab_size(vocab_size, multiple);
}

std::optional<DType> parameter_dtype(const TrainOptions& o) {
  if (o.param_dtype != "bf16") return std::nullopt;
  STRATA_CHECK(o.zero >= 0,
               "--param-dtype bf16 needs --zero STAGE: optimizers update float32 parameters, and "
               "ZeroOptimizer keeps the float32 master weights of bf16 parameters (any stage, 0 included)");
  return DType::BFloat16;
}

dist::ProcessGroup& init_world(const TrainOptions& o) {
  return dist::init({.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.collective_timeout * 1000))});
}

}  // namespace strata::examples
