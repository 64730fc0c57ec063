#pragma once
// The command-line options every example trainer shares (schedule, optimizer, logging and the
// distributed ones), their registration with CLI11 and their validation.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "strata/core/dtype.h"
#include "strata/distributed/process_group.h"

namespace strata::examples {

struct TrainOptions {
  int64_t steps = 1000;
  int64_t batch = 32;
  int64_t global_batch = 0;  // > 0: sequences per step over all data ranks (sets --batch per rank)
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup = 50;
  std::string lr_schedule = "cosine";  // after the warm-up: cosine, linear, constant or wsd
  double decay_fraction = 0.1;         // with --lr-schedule wsd: the share of --steps spent decaying
  double weight_decay = 0.1;
  double clip = 1.0;
  bool skip_nonfinite_steps = false;  // nan/inf loss or gradient norm: skip the step (default: stop)
  uint64_t seed = 1;
  int64_t log_every = 50;
  std::string metrics;                  // JSONL file; empty: none
  int zero = -1;                        // ZeRO stage; -1: DDP (or one process) with a plain AdamW
  std::string param_dtype = "float32";  // or bf16 (with --zero)
  double collective_timeout = 600;      // seconds; --collective-timeout or STRATA_COLLECTIVE_TIMEOUT
  int64_t tp = 1;                       // tensor-parallel degree (divides the world size)
  bool sequence_parallel = false;       // with --tp > 1
  int64_t pp = 1;                       // pipeline stages (ranks per pipeline; divides the world / --tp)
  int64_t cp = 1;                       // context-parallel degree: ranks that split each sequence
  std::string cp_attention = "ring";    // with --cp > 1: ring or all-gather (key/value exchange)
  int64_t micro_batches = 0;            // with --pp: micro-batches per step (0: 2 x --pp)
  std::string schedule = "1f1b";        // with --pp: gpipe, 1f1b or interleaved
  int64_t chunks = 2;                   // with --schedule interleaved: model chunks per rank
  std::string timeline = {};            // Chrome-trace JSON of step --timeline-step ('' : none)
  int64_t timeline_step = 1;            // the (0-based) step --timeline records
  std::string device = "cpu";           // cpu, cuda (local rank % GPUs) or cuda:N
  std::string autocast = "none";        // none, bf16 or fp16 (with dynamic loss scaling)
  int64_t profile_step = -1;            // the (0-based) step whose op table is printed (-1: none)
  // Pad the vocabulary to a multiple of this (config.padded_vocab_size); 0: the device's
  // default, 128 with --device cuda (aligned head GEMMs) and 1 (none) on the CPU.
  int64_t padded_vocab_multiple = 0;
  // HSDP with --zero 1-3: ZeRO shards inside groups of this many data ranks and replicates
  // across them. -1: off; 0 (--hsdp): one node's ranks; N (--shard-size N).
  int shard_size = -1;
  // Expert parallelism (a model with a mixture of experts): ranks of the data x context
  // group that share one set of experts, each holding 1/ep of every layer's experts.
  int64_t ep = 1;
};

// CLI11 saturates integers that overflow; this refuses them instead, naming the value.
const CLI::Validator& fits_int64();

// Registers the options of `o` (its current values are the defaults shown by --help);
// STRATA_COLLECTIVE_TIMEOUT, when set, replaces the default timeout. Call it first: it also
// makes the last of a repeated option win, for the options added after it too.
void add_train_options(CLI::App& app, TrainOptions& o);

// Bad values fail before anything starts, naming the option and the value.
void validate_train_options(const TrainOptions& o);
using NamedValues = std::initializer_list<std::pair<const char*, int64_t>>;  // {option, value}
void check_at_least_one(NamedValues options);
void check_not_negative(NamedValues options);

// With --global-batch: sets o.batch to its share per data rank (refusing a global batch that
// does not divide by `data_ranks`) and checks the micro-batches again. Without: no change.
void resolve_global_batch(TrainOptions& o, int data_ranks);

// --micro-batches, or its default (2 x --pp).
int64_t micro_batches(const TrainOptions& o);

// The model's padded_vocab_size for a vocabulary of `vocab_size` words: vocab_size rounded up
// to --padded-vocab-multiple (or its device default); 0 when that multiple is 1.
int64_t padded_vocab_size(const TrainOptions& o, int64_t vocab_size);

// bf16 with --zero: the model's param_dtype; float32: none. bf16 without --zero is refused.
std::optional<DType> parameter_dtype(const TrainOptions& o);

// dist::init with --collective-timeout.
dist::ProcessGroup& init_world(const TrainOptions& o);

}  // namespace strata::examples
