// train_llama: trains a small LLaMA-family model (nn::Llama) on real text, byte by byte, and
// prints samples of what it learned.
//
//   train_llama                                   # the licence texts every Debian system ships
//   train_llama --text book.txt --steps 2000      # any UTF-8 text file (or a directory of them)
//   train_llama --data train.tokens --val-data val.tokens   # token files (tools/text_to_tokens)
//   mpirun -np 2 train_llama                      # data parallel: 2 ranks x --batch sequences
//   mpirun -np 2 train_llama --zero 3 --param-dtype bf16     # ZeRO stage 3, bf16 parameters
//   mpirun -np 2 train_llama --tp 2 --sequence-parallel      # every layer split over 2 ranks
//   mpirun -np 4 train_llama --pp 2 --zero 1      # 2 pipeline stages x 2 data ranks (1F1B)
//   mpirun -np 4 train_llama --cp 4 --context 4096    # each window split over 4 ranks (ring attention)
//   train_llama --save runs/l --save-every 200 --export-hf runs/hf   # resumable saves, HF weights
//   mpirun -np 2 train_llama --zero 1 --resume runs/l --global-batch 8   # continue in any layout
//   train_llama --device cuda --autocast fp16     # on the GPU, fp16 products with loss scaling
//
// Without --data, rank 0 turns --text (default /usr/share/common-licenses, from Debian's
// base-files) into a byte-level token file, every byte one token (vocab 256), and every rank
// reads it through data::TokenFile. The last --val-fraction of the tokens (or --val-data) is
// held out: the validation loss on it is logged every --eval-every steps. Training windows of
// --context tokens start anywhere in the training part, in the BatchSampler's shuffled order,
// each rank taking its slice of every global batch (as train_gpt does). After training, every
// rank samples --samples continuations of a prompt from the held-out text with nn::generate
// (the models are identical; ZeRO-3 needs every rank in the forward passes); rank 0 prints
// them. JSONL metrics: one line per step as train_gpt writes, plus {"step", "val_loss"} lines.
// --save, --resume, --init-from and --export-hf work as train_gpt's (examples/common/
// checkpointing.h); a resumed run appends to the metrics without evaluating its first step
// again. With --pp P each pipeline rank builds only its stage's blocks (parallel::Pipeline runs
// the schedule); validation and sampling run the stages one after the other
// (Pipeline::forward_logits), and --export-hf is refused (save, then `strata-ckpt export`).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
#include "strata/strata.h"
#include "train_llama/corpus.h"
#include "train_llama/pipeline_generate.h"

using namespace strata;
using examples::check_at_least_one;
using examples::check_not_negative;

namespace {

struct Options {
  examples::TrainOptions train{
      .steps = 800, .batch = 8, .lr = 3e-3, .warmup = 30, .metrics = "runs/train_llama/metrics.jsonl"};
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t width = 128;
  int64_t intermediate = 352;   // about 8/3 x width, as LLaMA sizes its SwiGLU (each expert's, for mixtral)
  std::string model = "llama";  // or "mixtral": every MLP a mixture of experts
  int64_t experts = 8;
  int64_t experts_top_k = 2;  // --top-k is the samples' already
  double aux_loss_coef = 0.02;
  int64_t context = 128;
  std::string data;      // a token file; empty: built from --text
  std::string val_data;  // empty: the last --val-fraction of --data
  std::string text = "/usr/share/common-licenses";
  std::string tokens_out = "runs/train_llama/corpus.tokens";
  double val_fraction = 0.1;
  int64_t eval_every = 100;
  int64_t eval_windows = 256;
  int64_t samples = 3;
  int64_t sample_tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 1.0;
  std::string prompt;  // empty: the start of a line of the held-out text
  examples::CheckpointOptions ckpt;
};

bool g_lead = true;  // rank 0: the one that prints and writes files

// --ep shards a mixture of experts: each rank holds --experts / --ep of every layer's.
void check_expert_parallel(const Options& o) {
  const int64_t ep = o.train.ep;
  if (ep == 1) return;
  STRATA_CHECK(o.model == "mixtral", "--ep ", ep, " shards a mixture of experts: it takes effect with --model mixtral");
  STRATA_CHECK(o.experts % ep == 0, "--ep ", ep, " must divide --experts ", o.experts,
               " (each expert-parallel rank holds --experts / --ep of every layer's experts)");
  STRATA_CHECK(o.ckpt.export_hf.empty(), "--export-hf with --ep ", ep,
               ": the experts are spread over the ranks; --save a checkpoint and export it from a run at --ep 1 "
               "(--init-from)");
}

void validate(const Options& o) {
  examples::validate_train_options(o.train);
  check_at_least_one({{"--layers", o.layers},
                      {"--heads", o.heads},
                      {"--kv-heads", o.kv_heads},
                      {"--width", o.width},
                      {"--intermediate", o.intermediate},
                      {"--context", o.context},
                      {"--eval-windows", o.eval_windows},
                      {"--sample-tokens", o.sample_tokens},
                      {"--experts", o.experts},
                      {"--experts-top-k", o.experts_top_k}});
  STRATA_CHECK(o.experts_top_k <= o.experts, "--experts-top-k ", o.experts_top_k, " exceeds --experts ", o.experts,
               " (each token picks that many distinct experts)");
  check_expert_parallel(o);
  check_not_negative({{"--eval-every", o.eval_every}, {"--samples", o.samples}, {"--top-k", o.top_k}});
  STRATA_CHECK(o.width % o.heads == 0 && (o.width / o.heads) % 2 == 0, "--width ", o.width,
               " must be a multiple of --heads ", o.heads, " with an even quotient (rotary embeddings turn pairs)");
  STRATA_CHECK(o.heads % o.kv_heads == 0, "--heads ", o.heads, " must be a multiple of --kv-heads ", o.kv_heads);
  STRATA_CHECK(!o.val_data.empty() || (o.val_fraction > 0 && o.val_fraction < 1),
               "--val-fraction must be in (0, 1), got ", o.val_fraction);
  STRATA_CHECK(std::isfinite(o.temperature) && o.temperature > 0, "--temperature must be a number > 0, got ",
               o.temperature);
  STRATA_CHECK(std::isfinite(o.top_p) && o.top_p > 0 && o.top_p <= 1, "--top-p must be in (0, 1], got ", o.top_p);
  STRATA_CHECK(o.val_data.empty() || !o.data.empty(), "--val-data needs --data (the training tokens)");
  examples::validate_checkpoint_options(o.ckpt);
  examples::check_pipeline_options(o.train, o.layers, !o.ckpt.export_hf.empty());
  examples::check_context_split(o.train, o.context, "--context");
}

// A generous estimate of one training step's activation memory on this rank (float32): per
// layer about 12 values per token and width (norms, q/k/v, attention output, residuals), 4 per
// token and MLP width, and the attention matrix (heads x context per token); the logits and
// their softmax; doubled for the gradients backward holds at the same time. --model mixtral:
// the MLP's values once per expert a token runs, plus its dispatched and weighted copies.
double step_activation_bytes(const Options& o, const nn::LlamaConfig& c) {
  const double tokens = static_cast<double>(o.train.batch) * static_cast<double>(c.context);
  const bool moe = o.model == "mixtral";
  const double k = moe ? static_cast<double>(o.experts_top_k) : 1.0;
  const double mlp =
      k * (4.0 * static_cast<double>(c.intermediate_size) + (moe ? 2.0 * static_cast<double>(c.n_embd) : 0.0));
  const double per_layer =
      12.0 * static_cast<double>(c.n_embd) + mlp + static_cast<double>(c.n_head) * static_cast<double>(c.context);
  const double logits = static_cast<double>(nn::vocab_rows("Llama", c.vocab_size, c.padded_vocab_size));
  const double per_token = static_cast<double>(c.n_layer) * per_layer + 2.0 * logits;
  return 2.0 * 4.0 * tokens * per_token;
}

// Makes the token files every rank reads: rank 0 builds the byte-level file from --text when
// no --data is given, the others wait for it. Returns the training token file's path.
std::string prepare_data(const Options& o, dist::ProcessGroup& world) {
  if (!o.data.empty()) return o.data;
  if (g_lead) {
    const std::filesystem::path parent = std::filesystem::path(o.tokens_out).parent_path();
    if (!parent.empty()) examples::check_writable_dir(parent, "--tokens-out");
    const int64_t n = examples::build_byte_tokens(o.text, o.tokens_out);
    std::printf("data: %s -> %s (%lld byte-level tokens, vocab 256)\n", o.text.c_str(), o.tokens_out.c_str(),
                static_cast<long long>(n));
  }
  if (world.size() > 1) world.barrier()->wait();
  return o.tokens_out;
}

// The mean next-token loss over the held-out windows (at most --eval-windows, a multiple of
// the data-parallel size): each data rank computes an equal share (the ranks of a
// tensor-parallel group the same one, together), so that every rank runs the same number of
// forward passes (ZeRO-3 gathers parameters in them), and the sums are all-reduced.
// The model's next-token cross-entropy: its loss without a mixture of experts' auxiliary
// losses, which measure the routing, not the prediction.
double cross_entropy_loss(nn::CausalLM& model, const Tensor& tokens, const Tensor& targets) {
  Tensor loss = model.loss(tokens, targets);
  const Tensor& aux = model.auxiliary_loss();
  return (aux.defined() ? sub(loss, aux.to(loss.dtype())) : loss).item();
}

double validation_loss(nn::CausalLM& model, parallel::Pipeline* pipeline, const examples::TextCorpus& corpus,
                       const Options& o, dist::ProcessGroup& world) {
  const int64_t n = world.size();
  const int64_t windows = std::min(corpus.val_windows(o.context), o.eval_windows) / n * n;
  NoGradGuard no_grad;
  model.eval();
  const Device device = model.parameters().front().device();  // --device
  double sum = 0;
  for (int64_t first = world.rank(); first < windows; first += o.train.batch * n) {
    std::vector<int64_t> mine;
    for (int64_t w = first; w < windows && static_cast<int64_t>(mine.size()) < o.train.batch; w += n) mine.push_back(w);
    data::Batch b = corpus.val_batch(mine, o.context);
    // Through the pipeline: its last stage's logits, on every rank of the group (on the last
    // stage's device there, on the CPU elsewhere).
    const Tensor logits = pipeline == nullptr ? Tensor() : pipeline->forward_logits(b.inputs);
    const double loss = pipeline == nullptr ? cross_entropy_loss(model, b.inputs.to(device), b.targets.to(device))
                                            : cross_entropy(logits.reshape({b.targets.numel(), -1}),
                                                            b.targets.to(logits.device()).reshape({b.targets.numel()}))
                                                  .item();
    sum += loss * static_cast<double>(mine.size());
  }
  model.train();
  Tensor total = from_vector(std::vector<double>{sum}, {1});
  if (n > 1) world.all_reduce(total, dist::ReduceOp::Sum)->wait();
  return total.to_vector<double>()[0] / static_cast<double>(windows);
}

void log_validation(train::MetricsWriter& metrics, int64_t step, double loss) {
  if (!g_lead) return;
  std::printf("eval  step %lld | validation loss %.4f (%.3f bits per byte)\n", static_cast<long long>(step), loss,
              loss / std::log(2.0));
  std::fflush(stdout);
  metrics.write({{"step", step}, {"val_loss", loss}});
}

// The default prompt: the start of the held-out text's first full line that is not blank, cut
// at a word boundary within `max_bytes`.
std::vector<int64_t> default_prompt(const examples::TextCorpus& corpus, size_t max_bytes) {
  const std::vector<int64_t> text = corpus.val_text(0, 4096);
  size_t at = 0;
  while (at < text.size() && text[at] != '\n') ++at;  // the first line may be cut
  while (at < text.size() && (text[at] == '\n' || text[at] == ' ' || text[at] == '\t')) ++at;
  size_t end = at;
  while (end < std::min(text.size(), at + max_bytes) && text[end] != '\n') ++end;
  if (end < text.size() && text[end] != ' ' && text[end] != '\n') {
    size_t space = end;
    while (space > at && text[space - 1] != ' ') --space;
    if (space > at + 1) end = space - 1;
  }
  if (end <= at) return {text.empty() ? int64_t{'\n'} : text[0]};
  return std::vector<int64_t>(text.begin() + static_cast<std::ptrdiff_t>(at),
                              text.begin() + static_cast<std::ptrdiff_t>(end));
}

// Byte tokens as printable text: control bytes other than newline and tab become '?'.
std::string printable(const std::vector<int64_t>& tokens) {
  std::string out;
  for (int64_t t : tokens) out += (t < 32 && t != '\n' && t != '\t') || t == 127 ? '?' : static_cast<char>(t);
  return out;
}

// The samples' prompt, checked before training so that a bad --prompt costs no training.
std::vector<int64_t> sample_prompt(const examples::TextCorpus& corpus, const Options& o) {
  STRATA_CHECK(corpus.vocab_size() == data::kByteVocabSize || o.prompt.empty(),
               "--prompt is text, but the token file's vocabulary (", corpus.vocab_size(), ") is not byte-level");
  std::vector<int64_t> prompt;
  for (unsigned char c : o.prompt) prompt.push_back(c);
  // At most half the context, so that the samples have room.
  if (prompt.empty()) prompt = default_prompt(corpus, static_cast<size_t>(std::clamp<int64_t>(o.context / 2, 1, 32)));
  STRATA_CHECK(static_cast<int64_t>(prompt.size()) < o.context, "--prompt of ", prompt.size(),
               " bytes leaves no room in --context ", o.context);
  return prompt;
}

void print_samples(nn::CausalLM& model, parallel::Pipeline* pipeline, const std::vector<int64_t>& prompt,
                   const Options& o) {
  const bool bytes = model.vocab_size() == data::kByteVocabSize;
  const int64_t new_tokens = std::min(o.sample_tokens, o.context - static_cast<int64_t>(prompt.size()));
  // On the host: nn::generate and the pipeline move each step's input to the model's --device.
  const Tensor input = from_vector(prompt, {1, static_cast<int64_t>(prompt.size())});
  for (int64_t i = 0; i < o.samples; ++i) {
    const nn::GenerateOptions g{.temperature = o.temperature,
                                .top_k = o.top_k,
                                .top_p = o.top_p,
                                .seed = o.train.seed + static_cast<uint64_t>(i)};
    const Tensor tokens = pipeline != nullptr ? examples::generate_through(*pipeline, input, new_tokens, g)
                                              : nn::generate(model, input, new_tokens, g);
    const std::vector<int64_t> out = tokens.to_vector<int64_t>();
    if (!g_lead) continue;
    std::printf("\nsample %lld/%lld (temperature %.2f, top-k %lld, top-p %.2f; prompt in [brackets]):\n",
                static_cast<long long>(i + 1), static_cast<long long>(o.samples), o.temperature,
                static_cast<long long>(o.top_k), o.top_p);
    const std::vector<int64_t> continuation(out.begin() + static_cast<std::ptrdiff_t>(prompt.size()), out.end());
    if (bytes) {
      std::printf("[%s]%s\n", printable(prompt).c_str(), printable(continuation).c_str());
    } else {
      for (int64_t t : out) std::printf("%lld ", static_cast<long long>(t));
      std::printf("\n");
    }
  }
  std::fflush(stdout);
}

// The corpus must hold a global batch of training windows and a validation window per data
// rank; fewer fail now, naming the sizes, instead of in the first step or evaluation.
void check_corpus_size(const examples::TextCorpus& corpus, const Options& o, int data_ranks) {
  const int64_t global_batch = o.train.batch * data_ranks;
  STRATA_CHECK(corpus.train_windows(o.context) >= global_batch, "the training part has ", corpus.train_tokens(),
               " tokens: too few for ", global_batch, " windows of --context ", o.context, " + 1");
  STRATA_CHECK(corpus.val_windows(o.context) >= data_ranks, "the validation part has ", corpus.val_tokens(),
               " tokens: fewer than ", data_ranks, " window(s) of --context ", o.context,
               " + 1 (one per rank); raise --val-fraction or lower --context");
}

// The model for the corpus's vocabulary, parameters in --param-dtype.
nn::LlamaConfig model_config(const Options& o, const examples::TextCorpus& corpus) {
  nn::LlamaConfig config{.vocab_size = corpus.vocab_size(),
                         .context = o.context,
                         .n_layer = o.layers,
                         .n_head = o.heads,
                         .n_kv_head = o.kv_heads,
                         .n_embd = o.width,
                         .intermediate_size = o.intermediate,
                         .seed = o.train.seed};
  config.param_dtype = examples::parameter_dtype(o.train);
  config.padded_vocab_size = examples::padded_vocab_size(o.train, config.vocab_size);
  return config;
}

// --model mixtral: the same model with each MLP a mixture of --experts SwiGLU experts of
// width --intermediate, --experts-top-k of them per token (dropless), with the load-balancing
// loss weighted by --aux-loss-coef.
// With --ep (`experts`: the expert-parallel group), this rank's share of the experts.
nn::MixtralConfig mixtral_config(const Options& o, const nn::LlamaConfig& config,
                                 const dist::ProcessGroup* experts = nullptr) {
  nn::MixtralConfig mixtral;
  mixtral.llama = config;
  mixtral.num_experts = o.experts;
  mixtral.top_k = o.experts_top_k;
  mixtral.aux_loss_coef = o.aux_loss_coef;
  if (experts != nullptr) {
    mixtral.expert_parallel_degree = experts->size();
    mixtral.expert_parallel_rank = experts->rank();
  }
  return mixtral;
}

// --model mixtral: this rank's experts of every layer (parameters, gradients, AdamW's moments;
// float32, or bf16 with float32 masters: 16 bytes per value either way) must fit in this
// node's memory shared by its ranks, checked before anything is built. On CUDA the allocator
// names a shortfall at its first allocation.
void check_experts_fit(const Options& o, const nn::LlamaConfig& config, const examples::Layout& layout) {
  if (o.model != "mixtral" || layout.device.is_cuda()) return;
  const double have = examples::available_memory_bytes() / static_cast<double>(dist::local_size());
  if (have <= 0) return;
  parallel::check_expert_memory(mixtral_config(o, config).moe(), o.train.ep, 4, static_cast<int64_t>(have),
                                config.n_layer);
}

nn::ParameterCounts model_counts(const Options& o, const nn::LlamaConfig& config) {
  return o.model == "llama" ? nn::parameter_counts(config) : nn::parameter_counts(mixtral_config(o, config));
}

// The config.* entries checkpoints and --export-hf read the family from.
checkpoint::Metadata model_metadata(const Options& o, const nn::LlamaConfig& config) {
  return o.model == "llama" ? train::config_metadata(config) : train::config_metadata(mixtral_config(o, config));
}

// The whole model's parameters (a pipeline stage holds part of them).
int64_t whole_parameters(const Options& o, const nn::LlamaConfig& config) {
  const nn::ParameterCounts counts = model_counts(o, config);
  return counts.embedding + config.n_layer * counts.block + counts.head;
}

// One step's FLOPs for the progress line: the model counts its own, a pipeline stage cannot
// (a token runs --experts-top-k of the --experts experts: the others' weights do not count).
double step_flops(const nn::Llama& model, bool pipelined, const Options& o, const nn::LlamaConfig& config,
                  int64_t global_batch) {
  if (!pipelined) return model.flops_per_step(global_batch, config.context);
  const int64_t idle_experts = o.model == "llama" ? 0 : o.experts - o.experts_top_k;
  const int64_t active = whole_parameters(o, config) - config.n_layer * idle_experts * 3 * o.width * o.intermediate;
  return examples::whole_model_step_flops(active, config.n_layer, config.n_embd, config.context, global_batch);
}

std::unique_ptr<nn::Llama> make_model(const Options& o, const nn::LlamaConfig& config, const examples::Layout& layout,
                                      const parallel::PipelinePartition& partition) {
  const nn::ModelPart part = examples::stage_of(layout, partition);
  if (o.model == "llama") return std::make_unique<nn::Llama>(config, layout.factory, part);
  if (g_lead)
    std::printf("Mixtral: %lld experts per layer, %lld per token, aux loss coefficient %g%s\n",
                static_cast<long long>(o.experts), static_cast<long long>(o.experts_top_k), o.aux_loss_coef,
                o.aux_loss_coef > 0 && layout.replicas->size() > 1 ? " (over the global batch)" : "");
  auto model = std::make_unique<nn::Mixtral>(mixtral_config(o, config, layout.experts), layout.factory, part);
  if (layout.experts != nullptr) parallel::enable_expert_parallel(*model, *layout.experts);
  // The load-balancing loss over the global batch (routing counts summed over the ranks whose
  // gradients are averaged), so that it trains as one process on that batch.
  if (o.aux_loss_coef > 0 && layout.replicas->size() > 1)
    parallel::enable_global_load_balancing(*model, *layout.replicas);
  return model;
}

// How the data-parallel ranks train, for the banner.
std::string data_parallel_note(const examples::TrainOptions& t, const examples::Layout& layout, int data_ranks) {
  if (t.zero >= 0) return "ZeRO stage " + std::to_string(t.zero);
  if (data_ranks > 1 || layout.replicas->size() > 1) return "DDP";
  return layout.tensor != nullptr || layout.pipeline != nullptr ? "no data parallelism" : "one process";
}

void print_banner(const Options& o, const nn::LlamaConfig& config, const examples::TextCorpus& corpus,
                  const examples::Layout& layout, int data_ranks) {
  if (!g_lead) return;
  const examples::TrainOptions& t = o.train;
  std::printf(
      "LLaMA: %lld parameters (%lld layers, %lld heads, %lld kv heads, width %lld, intermediate %lld, "
      "context %lld, vocab %lld); data: %lld training and %lld validation tokens; batch %lld x %d rank(s)"
      "%s; %s; parameters %s%s\n",
      static_cast<long long>(whole_parameters(o, config)), static_cast<long long>(o.layers),
      static_cast<long long>(o.heads), static_cast<long long>(o.kv_heads), static_cast<long long>(o.width),
      static_cast<long long>(o.intermediate), static_cast<long long>(o.context),
      static_cast<long long>(config.vocab_size), static_cast<long long>(corpus.train_tokens()),
      static_cast<long long>(corpus.val_tokens()), static_cast<long long>(t.batch), data_ranks,
      examples::tensor_parallel_note(t).c_str(), data_parallel_note(t, layout, data_ranks).c_str(),
      t.param_dtype == "bf16" ? "bf16 (fp32 master)" : "float32",
      examples::device_note(t, layout.device, dist::world().size()).c_str());
}

int run(Options o) {
  validate(o);
  examples::TrainOptions& t = o.train;
  dist::ProcessGroup& world = examples::init_world(t);
  g_lead = world.rank() == 0;
  examples::Layout layout = examples::make_layout(world, t);
  dist::ProcessGroup& data = *layout.data;  // DDP or ZeRO, the sampler, the loss average
  examples::resolve_global_batch(t, data.size());
  examples::Checkpointing checkpointing(o.ckpt, world);
  const std::string data_path = prepare_data(o, world);
  const examples::TextCorpus corpus(data_path, o.val_data, o.val_fraction);
  check_corpus_size(corpus, o, data.size());
  const std::vector<int64_t> prompt = sample_prompt(corpus, o);

  const nn::LlamaConfig config = model_config(o, corpus);
  examples::check_step_memory(step_activation_bytes(o, config) / static_cast<double>(t.cp),
                              "--batch " + std::to_string(t.batch) + " x --context " + std::to_string(o.context) +
                                  " x --width " + std::to_string(o.width) + " x " + std::to_string(o.layers) +
                                  " layers",
                              layout.device);
  check_experts_fit(o, config, layout);
  // With --pp this rank builds its stage only (embedding on the first, norm and head on the last).
  const parallel::PipelinePartition partition =
      examples::pipeline_partition(t, model_counts(o, config), config.n_layer);
  std::unique_ptr<nn::Llama> built = make_model(o, config, layout, partition);
  nn::Llama& model = *built;
  examples::ModelTraining training(model, train::model_family(o.model), layout, partition, t, world);
  parallel::Pipeline* pipeline = training.pipeline();
  // Every rank of a tensor-parallel group reads the same batch: sharded by data rank.
  data::BatchSampler sampler({.dataset_size = corpus.train_windows(o.context),
                              .batch_size = t.batch,
                              .seed = t.seed,
                              .rank = data.rank(),
                              .world_size = data.size()});
  checkpointing.attach(training.checkpoint_target(sampler, model_metadata(o, config)));
  checkpointing.init_weights();
  const int64_t start = checkpointing.resume(t.steps);
  const int64_t end = examples::end_step(o.ckpt, t.steps);

  train::MetricsWriter metrics(g_lead ? t.metrics : "", /*append=*/start > 0);
  const int64_t global_batch = t.batch * data.size();
  train::Progress progress(t.steps, global_batch * o.context,
                           step_flops(model, pipeline != nullptr, o, config, global_batch));
  print_banner(o, config, corpus, layout, data.size());

  // ZeRO-3 keeps shards only: gather the whole model once for evaluation and sampling instead
  // of unit by unit in every forward pass (a no-op at the other stages).
  auto evaluate = [&](int64_t step) {
    std::optional<parallel::ZeroOptimizer::GatheredParameters> full;
    if (training.zero()) full.emplace(*training.zero());
    log_validation(metrics, step, validation_loss(model, pipeline, corpus, o, data));
  };
  // A resumed run's metrics continue the first part's: no second evaluation of its last step.
  if (start == 0) evaluate(0);
  for (int64_t step = start; step < end; ++step) {
    data::Batch batch = corpus.train_batch(sampler.next(), o.context);
    const examples::StepResult result = examples::step_keeping_checkpoints(training, checkpointing, step, batch);
    examples::log_step(progress, metrics, step, t.steps, t.log_every, g_lead, result, layout.device);
    checkpointing.after_step(step + 1);
    if ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || step + 1 == t.steps) evaluate(step + 1);
  }
  checkpointing.finish(end);
  if (checkpointing.stopped_early(end, t.steps)) return 0;
  checkpointing.export_hf("train_llama", o.model == "llama" ? "LlamaForCausalLM" : "MixtralForCausalLM");
  std::optional<parallel::ZeroOptimizer::GatheredParameters> full;
  if (training.zero()) full.emplace(*training.zero());
  print_samples(model, pipeline, prompt, o);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Train a small LLaMA on a UTF-8 text (byte-level tokens) and sample from it"};
  const CLI::Validator& fits_int64 = examples::fits_int64();
  examples::add_train_options(app, o.train);
  app.add_option("--layers", o.layers, "decoder layers")->capture_default_str()->check(fits_int64);
  app.add_option("--heads", o.heads, "attention (query) heads")->capture_default_str()->check(fits_int64);
  app.add_option("--kv-heads", o.kv_heads, "key/value heads (grouped-query attention; divides --heads)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--width", o.width, "hidden size")->capture_default_str()->check(fits_int64);
  app.add_option("--intermediate", o.intermediate, "SwiGLU MLP width (each expert's with --model mixtral)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--model", o.model, "llama, or mixtral (each MLP a mixture of experts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"llama", "mixtral"}));
  app.add_option("--experts", o.experts, "experts per layer (--model mixtral)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--experts-top-k", o.experts_top_k, "experts per token (--model mixtral)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--aux-loss-coef", o.aux_loss_coef, "load-balancing loss weight (--model mixtral)")
      ->capture_default_str();
  app.add_option("--context", o.context, "tokens per training window (and the longest sample)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--data", o.data, "token file to train on (default: built from --text)");
  app.add_option("--val-data", o.val_data, "token file to validate on (default: the end of --data)");
  app.add_option("--text", o.text, "UTF-8 text file, or directory of them, to build the tokens from without --data")
      ->capture_default_str();
  app.add_option("--tokens-out", o.tokens_out, "where the token file built from --text goes")->capture_default_str();
  app.add_option("--val-fraction", o.val_fraction, "share of the tokens, from the end, held out for validation")
      ->capture_default_str();
  app.add_option("--eval-every", o.eval_every, "validation loss every N steps (0: at the start and end only)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--eval-windows", o.eval_windows, "held-out windows per validation (at most)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--samples", o.samples, "samples printed at the end")->capture_default_str()->check(fits_int64);
  app.add_option("--sample-tokens", o.sample_tokens, "new tokens per sample (at most what fits in --context)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--temperature", o.temperature, "sampling temperature")->capture_default_str();
  app.add_option("--top-k", o.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str()
      ->check(fits_int64);
  app.add_option("--top-p", o.top_p, "nucleus sampling: the most likely tokens up to this probability")
      ->capture_default_str();
  app.add_option("--prompt", o.prompt, "the samples' prompt (default: the start of a held-out line)");
  examples::add_checkpoint_options(app, o.ckpt, "HF LlamaForCausalLM",
                                   "checkpoint directory to continue from, in any layout; refused when its model "
                                   "configuration or checksums do not match, or when it is past --stop-at/--steps");
  CLI11_PARSE(app, argc, argv);
  return examples::run_example("train_llama", [&] { return run(std::move(o)); });
}
