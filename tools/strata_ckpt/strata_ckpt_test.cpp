// Runs the strata-ckpt binary (argv[1]) on checkpoints that this process saves with
// train::save_training_checkpoint on its one-process world, and reads what it writes back
// with the library (ShardedCheckpoint, the Hugging Face readers, load_training_checkpoint).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "file_test_util.h"
#include "strata/checkpoint/directory_lock.h"
#include "strata/checkpoint/save_directory.h"
#include "strata/strata.h"

using namespace strata;
namespace st = strata::testing;
namespace fs = std::filesystem;
using checkpoint::Metadata;
using checkpoint::ShardedCheckpoint;

namespace {

std::string g_cli;

// A one-process world without MPI, as strata-ckpt's own: MPI's start-up leaks (its own
// allocations, never freed) would fail the LeakSanitizer run.
dist::ProcessGroup& world() { return dist::init({.start_mpi = false}); }

// Tiny models, as tests/distributed/model_equivalence_util.h has them.
nn::GPTConfig tiny_gpt(uint64_t seed = 3) {
  return {.vocab_size = 15, .context = 8, .n_layer = 2, .n_head = 4, .n_embd = 16, .seed = seed};
}
nn::LlamaConfig tiny_llama(uint64_t seed = 3) {
  return {.vocab_size = 15,
          .context = 8,
          .n_layer = 2,
          .n_head = 8,
          .n_kv_head = 4,
          .n_embd = 32,
          .intermediate_size = 24,
          .seed = seed};
}

checkpoint::HfLlamaConfig hf_llama_config(const nn::LlamaConfig& c) {
  return {.vocab_size = c.vocab_size,
          .context = c.context,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_kv_head = c.n_kv_head,
          .n_embd = c.n_embd,
          .intermediate_size = c.intermediate_size,
          .rope_theta = c.rope_theta,
          .rms_norm_eps = c.rms_norm_eps,
          .init_std = c.init_std};
}

// Same dtype, shape and bytes.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << "dtype/shape " << a.dtype() << a.shape() << " vs " << b.dtype()
                                         << b.shape();
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  if (std::memcmp(ca.raw_data(), cb.raw_data(), ca.numel() * dtype_size(ca.dtype())) != 0)
    return ::testing::AssertionFailure() << "the bytes differ";
  return ::testing::AssertionSuccess();
}

class StrataCkpt : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::string quoted(const std::string& name) const { return st::shell_quote(path(name)); }
  // Exit status of the CLI run with `args` (and `env`, "NAME=value ..."); its stdout and
  // stderr go to log().
  int cli(const std::string& args, const std::string& env = "") const {
    const std::string cmd = "env " + env + " " + st::shell_quote(g_cli) + " " + args + " >" + quoted("log") + " 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string log() const { return st::read_bytes(path("log")); }

  // Takes one AdamW step (so that the save holds optim.* tensors too) and saves the training
  // state at step 7 into path(name).
  static void train_and_save(nn::CausalLM& model, const std::string& dir, const Metadata& config) {
    optim::AdamW optimizer{model.parameters(), {.lr = 1e-2}};
    Generator gen(5);
    const Tensor tokens = randint(0, 15, {2, 8}, {.dtype = DType::Int64}, &gen);
    const Tensor targets = randint(0, 15, {2, 8}, {.dtype = DType::Int64}, &gen);
    model.loss(tokens, targets).backward();
    optimizer.step();
    optimizer.zero_grad();
    train::save_training_checkpoint(dir, {.model = model, .world = world(), .optimizer = &optimizer, .config = config},
                                    7);
  }

  // export, then import, then load into a fresh model of `config` (another initialisation):
  // every weight comes back bit for bit. `read_hf` reads the exported directory with the
  // library's own Hugging Face reader.
  template <class Model, class Config>
  void round_trip(const Config& config, const Metadata& config_meta, const char* family,
                  StateDict (*read_hf)(const std::string&)) {
    Model model(config);
    train_and_save(model, path("ckpt"), config_meta);
    const StateDict trained = model.state_dict();

    ASSERT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf")), 0) << log();
    EXPECT_CONTAINS(log(), std::string("(") + family);  // the family came from config.*
    const StateDict exported = read_hf(path("hf"));
    ASSERT_EQ(exported.size(), trained.size());
    for (const auto& [name, t] : trained) {
      ASSERT_TRUE(exported.contains(name)) << name;
      EXPECT_TRUE(same_bits(exported.at(name), t)) << name;
    }

    ASSERT_EQ(cli("import " + quoted("hf") + " --out " + quoted("imported") + " --step 3"), 0) << log();
    ASSERT_EQ(cli("verify " + quoted("imported")), 0) << log();
    // Import is one process without MPI; under a launcher of several ranks (which would all
    // write the same directory) it refuses.
    EXPECT_EQ(cli("import " + quoted("hf") + " --out " + quoted("imported2"), "OMPI_COMM_WORLD_SIZE=2"), 2);
    EXPECT_CONTAINS(log(), "under a launcher of 2 ranks");
    EXPECT_FALSE(fs::exists(path("imported2")));
    const ShardedCheckpoint imported = ShardedCheckpoint::open(path("imported"));
    EXPECT_EQ(imported.step(), 3);
    for (const auto& [key, value] : config_meta) EXPECT_EQ(imported.metadata().at(key), value) << key;
    for (const auto& [name, t] : trained) EXPECT_TRUE(same_bits(imported.read_whole("model." + name), t)) << name;

    // What a run starting from pretrained weights does: any layout loads it (here one
    // process), with a fresh optimizer.
    Model fresh(config);
    optim::AdamW optimizer{fresh.parameters(), {.lr = 1e-2}};
    const int64_t step = train::load_training_checkpoint(
        path("imported"), {.model = fresh, .world = world(), .optimizer = &optimizer, .config = config_meta});
    EXPECT_EQ(step, 3);
    EXPECT_EQ(optimizer.step_count(), 0);
    for (const auto& [name, t] : fresh.state_dict()) EXPECT_TRUE(same_bits(t, trained.at(name))) << name;
  }

  // A padded vocabulary (config.padded_vocab_size 24 for 15 words): export writes the first
  // 15 rows of each vocabulary tensor, import --padded-vocab-multiple 24 pads them back with
  // zero rows, and a run of the padded model loads that bit for bit.
  template <class Model, class Config>
  void padded_round_trip(Config config, Metadata (*meta_of)(const Config&), StateDict (*read_hf)(const std::string&)) {
    config.padded_vocab_size = 24;
    const Metadata config_meta = meta_of(config);
    EXPECT_EQ(config_meta.at("config.padded_vocab_size"), "24");
    Model model(config);
    train_and_save(model, path("ckpt"), config_meta);
    const StateDict trained = model.state_dict();
    ASSERT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf")), 0) << log();
    const StateDict exported = read_hf(path("hf"));
    ASSERT_EQ(exported.size(), trained.size());
    int vocab_tables = 0;
    for (const auto& [name, t] : trained) {
      const bool vocab = name == "wte.weight" || name == "embed_tokens.weight" || name == "lm_head.weight";
      vocab_tables += vocab ? 1 : 0;
      EXPECT_TRUE(same_bits(exported.at(name), vocab ? t.narrow(0, 0, 15) : t)) << name;
    }
    EXPECT_GE(vocab_tables, 1);
    ASSERT_EQ(cli("import " + quoted("hf") + " --out " + quoted("imported") + " --padded-vocab-multiple 24"), 0)
        << log();
    const ShardedCheckpoint imported = ShardedCheckpoint::open(path("imported"));
    EXPECT_EQ(imported.metadata().at("config.padded_vocab_size"), "24");
    Model fresh(config);
    optim::AdamW optimizer{fresh.parameters(), {.lr = 1e-2}};
    (void)train::load_training_checkpoint(
        path("imported"), {.model = fresh, .world = world(), .optimizer = &optimizer, .config = config_meta});
    // The padding rows trained to zero and are imported as zero: the whole tensors match.
    for (const auto& [name, t] : fresh.state_dict()) EXPECT_TRUE(same_bits(t, trained.at(name))) << name;
  }

  st::TempDir dir_;
};

StateDict read_gpt2(const std::string& dir) { return checkpoint::import_gpt2_safetensors(dir); }
StateDict read_llama(const std::string& dir) { return checkpoint::import_llama_safetensors(dir); }

}  // namespace

TEST_F(StrataCkpt, InspectListsTensorsAndVerifyPasses) {
  nn::GPT model(tiny_gpt());
  train_and_save(model, path("ckpt"), train::gpt_config_metadata(tiny_gpt()));

  ASSERT_EQ(cli("inspect " + quoted("ckpt")), 0) << log();
  for (const char* part :
       {"step        7", "world size  1", "layout.world_size = 1", "config.n_embd = 16", "model.wte.weight",
        "model.h.1.mlp.c_fc.weight", "optim.h.0.ln_1.bias.exp_avg_sq", "[64, 16]", "shard_0.safetensors"})
    EXPECT_CONTAINS(log(), part);

  ASSERT_EQ(cli("inspect --json " + quoted("ckpt")), 0) << log();
  const nlohmann::json j = nlohmann::json::parse(log());
  EXPECT_EQ(j["step"], 7);
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["metadata"]["config.vocab_size"], "15");
  bool found = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] != "model.wte.weight") continue;
    found = true;
    EXPECT_EQ(t["shape"], nlohmann::json::array({15, 16}));
    EXPECT_EQ(t["dtype"], "float32");
    EXPECT_EQ(t["bytes"], 15 * 16 * 4);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["files"][0]["name"], "shard_0.safetensors");

  ASSERT_EQ(cli("verify " + quoted("ckpt")), 0) << log();
  const ShardedCheckpoint c = ShardedCheckpoint::open(path("ckpt"));
  EXPECT_CONTAINS(log(), "OK: " + std::to_string(c.tensors().size()) + " tensors");
}

TEST_F(StrataCkpt, VerifyNamesTheCorruptedFileAndTensor) {
  nn::GPT model(tiny_gpt());
  train_and_save(model, path("ckpt"), train::gpt_config_metadata(tiny_gpt()));
  const ShardedCheckpoint c = ShardedCheckpoint::open(path("ckpt"));
  const checkpoint::PieceLocation& piece = c.tensor("model.wpe.weight").pieces.at(0);
  const std::string shard = (fs::path(c.directory()) / piece.file).string();
  std::string bytes = st::read_bytes(shard);
  bytes[piece.byte_begin + 5] ^= 0x10;
  st::write_bytes(shard, bytes);

  EXPECT_EQ(cli("verify " + quoted("ckpt")), 1) << log();
  EXPECT_CONTAINS(log(), "PROBLEM: ");
  EXPECT_CONTAINS(log(), "tensor 'model.wpe.weight' in '" + shard + "'");
  EXPECT_CONTAINS(log(), "checksum mismatch");
  EXPECT_CONTAINS(log(), "FAILED: 1 problem in");
  EXPECT_EQ(cli("inspect " + quoted("ckpt")), 0) << log();  // the index alone is fine

  fs::remove(shard);
  EXPECT_EQ(cli("verify " + quoted("ckpt")), 1) << log();
  EXPECT_CONTAINS(log(), piece.file);
  EXPECT_EQ(cli("inspect " + quoted("ckpt")), 0) << log();
  EXPECT_CONTAINS(log(), piece.file + "  MISSING");
}

TEST_F(StrataCkpt, RefusesWhatIsNotAReadableCheckpoint) {
  fs::create_directories(path("empty"));
  EXPECT_EQ(cli("verify " + quoted("empty")), 2);
  EXPECT_CONTAINS(log(), "is not a sharded checkpoint");
  EXPECT_EQ(cli("inspect " + quoted("nowhere")), 2);
  EXPECT_CONTAINS(log(), "nowhere");

  nn::GPT model(tiny_gpt());
  train_and_save(model, path("ckpt"), {});  // no config.*
  // Without a configuration, export can tell neither the family nor the sizes.
  EXPECT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf")), 2);
  EXPECT_CONTAINS(log(), "--format gpt2");
  EXPECT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf") + " --format gpt2"), 2);
  EXPECT_CONTAINS(log(), "'config.vocab_size' is missing");
  EXPECT_FALSE(fs::exists(path("hf")));
  // An import never writes into (and prunes) an existing checkpoint directory.
  fs::create_directories(path("hf_in"));
  EXPECT_EQ(cli("import " + quoted("hf_in") + " --out " + quoted("ckpt")), 2);
  EXPECT_CONTAINS(log(), "already holds a sharded checkpoint");

  // A save whose index.json is there but corrupt is damaged (1, what strata-run acts on); one
  // of another format is not this version's to judge (2).
  const std::string index = (fs::path(ShardedCheckpoint::open(path("ckpt")).directory()) / "index.json").string();
  const std::string good_index = st::read_bytes(index);
  st::write_bytes(index, "{ not json");
  EXPECT_EQ(cli("verify " + quoted("ckpt")), 1);
  EXPECT_CONTAINS(log(), "PROBLEM: sharded checkpoint index '" + index + "': not valid JSON");
  EXPECT_CONTAINS(log(), "FAILED: 1 problem in");
  EXPECT_EQ(cli("inspect " + quoted("ckpt")), 2);  // inspect cannot show it at all
  nlohmann::json edited = nlohmann::json::parse(good_index);
  edited["step"] = 8;  // the checksum no longer matches
  st::write_bytes(index, edited.dump());
  EXPECT_EQ(cli("verify " + quoted("ckpt")), 1);
  EXPECT_CONTAINS(log(), "index checksum mismatch");
  edited["format"] = "strata-sharded-v2";
  edited["version"] = 2;
  st::write_bytes(index, edited.dump());
  EXPECT_EQ(cli("verify " + quoted("ckpt")), 2);
  EXPECT_CONTAINS(log(), "written by a newer strata");
  EXPECT_EQ(cli("verify " + quoted("ckpt") + "/no-such-save"), 2);

  EXPECT_EQ(cli(""), 2);  // no subcommand
  EXPECT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf") + " --format bert"), 2);
}

// A directory whose `latest` is gone still holds saves: an import there would prune them (it
// used to exit 0 having deleted two of three). It is refused, naming them, and they stay.
TEST_F(StrataCkpt, ImportRefusesADirectoryWithSavesButNoLatest) {
  nn::GPT model(tiny_gpt());
  const Metadata config = train::gpt_config_metadata(tiny_gpt());
  train_and_save(model, path("ckpt"), config);
  ASSERT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf")), 0) << log();
  optim::AdamW optimizer{model.parameters(), {.lr = 1e-2}};
  for (int64_t step : {8, 9})
    train::save_training_checkpoint(path("ckpt"),
                                    {.model = model, .world = world(), .optimizer = &optimizer, .config = config}, step,
                                    {}, {.keep_last = 3});
  fs::remove(fs::path(path("ckpt")) / "latest");
  const std::vector<checkpoint::SaveEntry> before = checkpoint::list_saves(path("ckpt"));
  ASSERT_EQ(before.size(), 3u);

  EXPECT_EQ(cli("import " + quoted("hf") + " --out " + quoted("ckpt") + " --step 100"), 2) << log();
  EXPECT_CONTAINS(log(), "holds saves (");
  for (const checkpoint::SaveEntry& s : before) EXPECT_CONTAINS(log(), s.name);
  const std::vector<checkpoint::SaveEntry> after = checkpoint::list_saves(path("ckpt"));
  ASSERT_EQ(after.size(), 3u);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].name, before[i].name);
  EXPECT_FALSE(fs::exists(fs::path(path("ckpt")) / "latest"));

  // A new directory is fine, and the import holds its lock while writing.
  ASSERT_EQ(cli("import " + quoted("hf") + " --out " + quoted("fresh")), 0) << log();
  EXPECT_TRUE(fs::exists(fs::path(path("fresh")) / checkpoint::DirectoryLock::kFileName));
  const checkpoint::DirectoryLock held(path("busy"));
  EXPECT_EQ(cli("import " + quoted("hf") + " --out " + quoted("busy")), 2) << log();
  EXPECT_CONTAINS(log(), "is in use: PID");
}

// An earlier strata's single-file training state (as train_gpt resumed it: AdamW over the
// weight-decay groups, the sampler, the default RNG stream) converts to a sharded checkpoint
// that restores all of it bit for bit; the trainers read only that format.
TEST_F(StrataCkpt, ConvertTurnsASingleFileTrainingStateIntoACheckpoint) {
  const nn::GPTConfig config = tiny_gpt();
  nn::GPT model(config);
  optim::AdamW adamw(optim::weight_decay_groups(model.named_parameters(), 1e-2, 0.1),
                     {.lr = 1e-2, .weight_decay = 0.1});
  const data::SamplerOptions sampling{.dataset_size = 1000, .batch_size = 4, .seed = 9};
  data::BatchSampler sampler(sampling);
  Generator gen(5);
  for (int step = 0; step < 2; ++step) {
    sampler.next();
    const Tensor tokens = randint(0, 15, {2, 8}, {.dtype = DType::Int64}, &gen);
    model.loss(tokens, tokens).backward();
    adamw.step();
    adamw.zero_grad();
  }
  default_generator().set_state(11, 40);
  train::save_training_state(path("old.ckpt"), {model, adamw, sampler, train::gpt_config_metadata(config)}, 2);

  ASSERT_EQ(cli("convert " + quoted("old.ckpt") + " --out " + quoted("new")), 0) << log();
  EXPECT_CONTAINS(log(), "(step 2)");
  ASSERT_EQ(cli("verify " + quoted("new")), 0) << log();

  // A fresh run (other weights, no optimizer state, another RNG position) resumes from it.
  default_generator().set_state(1, 0);
  nn::GPT fresh(tiny_gpt(4));
  optim::AdamW resumed(optim::weight_decay_groups(fresh.named_parameters(), 1e-2, 0.1), {.lr = 1e-2});
  data::BatchSampler fresh_sampler(sampling);
  Metadata sharded_config = train::gpt_config_metadata(config);
  sharded_config.erase("config.param_dtype");
  const int64_t step = train::load_training_checkpoint(
      path("new"),
      {.model = fresh, .world = world(), .optimizer = &resumed, .sampler = &fresh_sampler, .config = sharded_config});
  EXPECT_EQ(step, 2);
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(same_bits(fresh.state_dict().at(name), t)) << name;
  const StateDict before = adamw.state_dict(), after = resumed.state_dict();
  size_t compared = 0;
  for (const auto& [key, t] : before) {
    if (key.rfind("group.", 0) == 0) continue;  // the schedule sets lr from the step
    ASSERT_TRUE(after.contains(key)) << key;
    EXPECT_TRUE(same_bits(after.at(key), t)) << key;
    ++compared;
  }
  EXPECT_GT(compared, model.parameters().size());  // exp_avg and exp_avg_sq of every parameter
  EXPECT_EQ(default_generator().seed(), 11u);
  EXPECT_EQ(default_generator().offset(), 40u);
  EXPECT_EQ(fresh_sampler.next(), sampler.next());

  // It never writes over a checkpoint.
  EXPECT_EQ(cli("convert " + quoted("old.ckpt") + " --out " + quoted("new")), 2);
  EXPECT_CONTAINS(log(), "already holds a sharded checkpoint: convert into a new or empty directory");
}

TEST_F(StrataCkpt, Gpt2ExportImportRoundTripsBitForBit) {
  round_trip<nn::GPT>(tiny_gpt(), train::gpt_config_metadata(tiny_gpt()), "gpt2", read_gpt2);
}

TEST_F(StrataCkpt, LlamaExportImportRoundTripsBitForBit) {
  round_trip<nn::Llama>(tiny_llama(), train::llama_config_metadata(tiny_llama()), "llama", read_llama);
}

TEST_F(StrataCkpt, PaddedVocabularyIsStrippedOnExportAndPaddedOnImport) {
  padded_round_trip<nn::GPT>(tiny_gpt(), &train::gpt_config_metadata, read_gpt2);
}

TEST_F(StrataCkpt, PaddedLlamaVocabularyIsStrippedOnExportAndPaddedOnImport) {
  padded_round_trip<nn::Llama>(tiny_llama(), &train::llama_config_metadata, read_llama);
}

// A 16-bit run under ZeRO: model.* in bfloat16 and float32 master.*, each tensor in two flat
// pieces. Export joins the pieces; --dtype f32 takes the masters, the default the rounded
// parameters.
TEST_F(StrataCkpt, ExportJoinsPiecesAndTakesMasterWeightsWithDtypeF32) {
  nn::GPT model(tiny_gpt());
  const StateDict weights = model.state_dict();
  std::vector<checkpoint::SavePiece> pieces;
  for (const auto& [name, t] : weights) {
    const Shape& shape = t.shape();
    const int64_t n = t.numel();
    const Tensor flat = t.reshape({n}), rounded = flat.to(DType::BFloat16);
    for (const auto& [b, e] : {std::pair<int64_t, int64_t>{0, n / 2}, {n / 2, n}}) {
      const checkpoint::Region region = checkpoint::Region::flat(shape, b, e);
      pieces.push_back({"master." + name, shape, region, flat.narrow(0, b, e - b)});
      pieces.push_back({"model." + name, shape, region, rounded.narrow(0, b, e - b)});
    }
  }
  nn::GPTConfig config = tiny_gpt();
  config.param_dtype = DType::BFloat16;
  checkpoint::save_sharded(path("ckpt"), world(),
                           checkpoint::take_snapshot(5, pieces, train::gpt_config_metadata(config)));
  ASSERT_EQ(cli("verify " + quoted("ckpt")), 0) << log();
  EXPECT_CONTAINS(log(), "OK: " + std::to_string(2 * weights.size()) + " tensors, " +
                             std::to_string(4 * weights.size()) + " pieces");

  ASSERT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf32") + " --dtype f32"), 0) << log();
  EXPECT_CONTAINS(log(), std::to_string(weights.size()) + " from master.*");
  const StateDict masters = read_gpt2(path("hf32"));
  for (const auto& [name, t] : weights) EXPECT_TRUE(same_bits(masters.at(name), t)) << name;

  ASSERT_EQ(cli("export " + quoted("ckpt") + " --out " + quoted("hf16")), 0) << log();
  const StateDict params = read_gpt2(path("hf16"));
  for (const auto& [name, t] : weights)
    EXPECT_TRUE(same_bits(params.at(name), t.to(DType::BFloat16).to(DType::Float32))) << name;
}

// --step and --seed are refused, naming the option and the text, unless they are plain
// decimal integers that fit: never clamped or wrapped.
TEST_F(StrataCkpt, ImportRefusesStepAndSeedThatDoNotFit) {
  nn::GPT model(tiny_gpt());
  checkpoint::export_gpt2_safetensors(path("hf"), model.state_dict(),
                                      {.vocab_size = 15, .n_positions = 8, .n_embd = 16, .n_layer = 2, .n_head = 4});
  const std::string import = "import " + quoted("hf") + " --out " + quoted("out");
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {" --step 99999999999999999999",
            "--step: 99999999999999999999 is not an integer in [0, 9223372036854775807]"},
           {" --step -1", "--step: -1 is not an integer in [0, 9223372036854775807]"},
           {" --step 1e3", "--step: 1e3 is not an integer"},
           {" --seed -5", "--seed: -5 is not an integer in [0, 18446744073709551615]"},
           {" --seed 18446744073709551616", "--seed: 18446744073709551616 is not an integer"},
           {" --seed 0x10", "--seed: 0x10 is not an integer"}}) {
    EXPECT_EQ(cli(import + args), 2) << args << "\n" << log();
    EXPECT_CONTAINS(log(), needle);
    EXPECT_FALSE(fs::exists(path("out"))) << args;
  }
  ASSERT_EQ(cli(import + " --step 9223372036854775807 --seed 18446744073709551615"), 0) << log();
  const ShardedCheckpoint c = ShardedCheckpoint::open(path("out"));
  EXPECT_EQ(c.step(), INT64_MAX);
  EXPECT_EQ(c.metadata().at("rng.seed"), "18446744073709551615");
}

// A config.json whose n_layer the files do not hold is refused by name before anything is
// allocated for it (it used to reserve memory per layer and die of std::bad_alloc).
TEST_F(StrataCkpt, ImportChecksTheConfigAgainstTheFilesBeforeAllocating) {
  nn::GPT model(tiny_gpt());
  checkpoint::export_gpt2_safetensors(path("hf"), model.state_dict(),
                                      {.vocab_size = 15, .n_positions = 8, .n_embd = 16, .n_layer = 2, .n_head = 4});
  nlohmann::json cfg = nlohmann::json::parse(st::read_bytes(path("hf/config.json")));
  cfg["n_layer"] = 1000000000;
  st::write_bytes(path("hf/config.json"), cfg.dump());
  EXPECT_EQ(cli("import " + quoted("hf") + " --out " + quoted("out")), 2) << log();
  EXPECT_CONTAINS(log(), "config.json's n_layer 1000000000 does not match the file's 2 layers");
  EXPECT_FALSE(fs::exists(path("out")));
}

// save_pretrained's sharded layout imports like a single file; a directory with neither names both.
TEST_F(StrataCkpt, ImportReadsShardedHuggingFaceDirectories) {
  nn::Llama model(tiny_llama());
  checkpoint::export_llama_safetensors(path("hf"), model.state_dict(), hf_llama_config(tiny_llama()));
  const StateDict all = checkpoint::load_safetensors(path("hf/model.safetensors")).tensors;
  StateDict first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& [name, t] : all) {
    const bool early = name < "model.layers.1";
    (early ? first : second)[name] = t;
    weight_map[name] = early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  checkpoint::save_safetensors(path("hf/model-00001-of-00002.safetensors"), first, {{"format", "pt"}});
  checkpoint::save_safetensors(path("hf/model-00002-of-00002.safetensors"), second, {{"format", "pt"}});
  st::write_bytes(path("hf/model.safetensors.index.json"), nlohmann::json{{"weight_map", weight_map}}.dump());
  fs::remove(path("hf/model.safetensors"));

  ASSERT_EQ(cli("import " + quoted("hf") + " --out " + quoted("out")), 0) << log();
  const ShardedCheckpoint c = ShardedCheckpoint::open(path("out"));
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(same_bits(c.read_whole("model." + name), t)) << name;

  fs::create_directories(path("bare"));
  st::write_bytes(path("bare/config.json"), st::read_bytes(path("hf/config.json")));
  EXPECT_EQ(cli("import " + quoted("bare") + " --out " + quoted("out2")), 2);
  EXPECT_CONTAINS(log(), "has neither model.safetensors nor model.safetensors.index.json");
}

// --init-from (a weights-only load) compares only the fields that decide the weights' shapes or
// what they compute: a default Hugging Face GPT-2 (dropout 0.1) starts a run without dropout.
TEST_F(StrataCkpt, WeightsOnlyLoadComparesOnlyWhatDecidesTheWeights) {
  nn::GPT source(tiny_gpt());
  checkpoint::export_gpt2_safetensors(
      path("hf"), source.state_dict(),
      {.vocab_size = 15, .n_positions = 8, .n_embd = 16, .n_layer = 2, .n_head = 4, .dropout = 0.1});
  ASSERT_EQ(cli("import " + quoted("hf") + " --out " + quoted("gpt")), 0) << log();
  nn::GPTConfig run = tiny_gpt(9);  // dropout 0, another initialisation
  nn::GPT fresh(run);
  train::load_training_checkpoint(path("gpt"),
                                  {.model = fresh, .world = world(), .config = train::gpt_config_metadata(run)},
                                  nullptr, {.weights_only = true});
  for (const auto& [name, t] : source.state_dict()) EXPECT_TRUE(same_bits(fresh.state_dict().at(name), t)) << name;
  // A resume restores a run, so there every field still counts.
  try {
    train::load_training_checkpoint(path("gpt"),
                                    {.model = fresh, .world = world(), .config = train::gpt_config_metadata(run)});
    ADD_FAILURE() << "a resume with another dropout was accepted";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "'config.dropout' is 0.10000000000000001 in the checkpoint, 0 in this run");
  }
  nn::GPTConfig heads = run;
  heads.n_head = 2;  // the same shapes, other attention
  nn::GPT other(heads);
  try {
    train::load_training_checkpoint(path("gpt"),
                                    {.model = other, .world = world(), .config = train::gpt_config_metadata(heads)},
                                    nullptr, {.weights_only = true});
    ADD_FAILURE() << "another n_head was accepted";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "'config.n_head' is 4 in the checkpoint, 2 in this run");
  }

  // Rotary positions: no LLaMA weight depends on the context, so another one loads.
  nn::Llama llama(tiny_llama());
  checkpoint::export_llama_safetensors(path("hf_llama"), llama.state_dict(), hf_llama_config(tiny_llama()));
  ASSERT_EQ(cli("import " + quoted("hf_llama") + " --out " + quoted("llama")), 0) << log();
  nn::LlamaConfig longer = tiny_llama(9);
  longer.context = 32;
  nn::Llama target(longer);
  train::load_training_checkpoint(path("llama"),
                                  {.model = target, .world = world(), .config = train::llama_config_metadata(longer)},
                                  nullptr, {.weights_only = true});
  for (const auto& [name, t] : llama.state_dict()) EXPECT_TRUE(same_bits(target.state_dict().at(name), t)) << name;
  nn::LlamaConfig theta = longer;
  theta.rope_theta = 500000.0;
  nn::Llama rotated(theta);
  try {
    train::load_training_checkpoint(path("llama"),
                                    {.model = rotated, .world = world(), .config = train::llama_config_metadata(theta)},
                                    nullptr, {.weights_only = true});
    ADD_FAILURE() << "another rope_theta was accepted";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "'config.rope_theta' is 10000 in the checkpoint, 500000 in this run");
  }
}

// The configuration export reads back is the one saved; train_gpt leaves param_dtype out.
TEST(ConfigMetadata, ParsesBackWhatItWrites) {
  nn::GPTConfig g = tiny_gpt();
  g.dropout = 0.1;
  g.param_dtype = DType::BFloat16;
  const nn::GPTConfig g2 = train::gpt_config_from_metadata(train::gpt_config_metadata(g), "here");
  EXPECT_EQ(train::gpt_config_metadata(g2), train::gpt_config_metadata(g));
  Metadata no_param_dtype = train::gpt_config_metadata(tiny_gpt());
  no_param_dtype.erase("config.param_dtype");
  EXPECT_EQ(train::gpt_config_from_metadata(no_param_dtype, "here").parameter_dtype(), DType::Float32);

  nn::LlamaConfig l = tiny_llama();
  l.rope_theta = 500000.0;
  l.rms_norm_eps = 1e-6;
  const nn::LlamaConfig l2 = train::llama_config_from_metadata(train::llama_config_metadata(l), "here");
  EXPECT_EQ(l2.rope_theta, l.rope_theta);
  EXPECT_EQ(l2.rms_norm_eps, l.rms_norm_eps);
  EXPECT_EQ(train::llama_config_metadata(l2), train::llama_config_metadata(l));

  Metadata bad = train::llama_config_metadata(l);
  bad["config.rope_theta"] = "1e5x";
  try {
    train::llama_config_from_metadata(bad, "checkpoint 'c'");
    FAIL() << "a malformed number was accepted";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "checkpoint 'c': metadata field 'config.rope_theta' is not a finite number: '1e5x'");
  }
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: strata_ckpt_test <path to strata-ckpt>\n");
    return 2;
  }
  g_cli = argv[1];
  return RUN_ALL_TESTS();
}

// The model family comes from config.family (no guessing from which keys exist). A
// checkpoint saved before families were recorded is refused, naming the field and --format,
// and exports with --format.
TEST_F(StrataCkpt, ExportTakesTheFamilyFromConfigFamilyOrFormat) {
  nn::Llama model(tiny_llama());
  Metadata config = train::llama_config_metadata(tiny_llama());
  config.erase("config.family");
  train_and_save(model, path("old"), config);
  EXPECT_EQ(cli("export " + quoted("old") + " --out " + quoted("hf")), 2) << log();
  EXPECT_CONTAINS(log(), "no 'config.family' entry");
  EXPECT_CONTAINS(log(), "--format gpt2, llama, mixtral");
  ASSERT_EQ(cli("export " + quoted("old") + " --out " + quoted("hf") + " --format llama"), 0) << log();
  EXPECT_CONTAINS(log(), "(llama,");
  // The wrong family for the entries is refused by name, not read as another model.
  EXPECT_EQ(cli("export " + quoted("old") + " --out " + quoted("hf2") + " --format gpt2"), 2) << log();
  EXPECT_CONTAINS(log(), "config.dropout");
}
