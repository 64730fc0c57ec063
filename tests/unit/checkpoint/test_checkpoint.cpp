// Training-state checkpoints: round trip, checksums, atomic failure.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "file_test_util.h"
#include "strata/checkpoint/checkpoint.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::testing::error_of;
using strata::testing::read_bytes;
using strata::testing::TempDir;
using strata::testing::write_bytes;

namespace {

// What a train loop would save: model parameters, optimizer state, scalars.
StateDict training_state(uint64_t seed, int64_t width = 8) {
  Generator gen(seed);
  return {
      {"model.wte.weight", randn({16, width}, {}, &gen)},
      {"model.h.0.attn.c_attn.weight", randn({3 * width, width}, {}, &gen).transpose(0, 1)},
      {"model.ln_f.bias", zeros({width})},
      {"optim.state.0.exp_avg", randn({16, width}, {}, &gen)},
      {"optim.state.0.exp_avg_sq", rand({16, width}, {.dtype = DType::Float64}, &gen)},
      {"optim.step", scalar_tensor(1000, {.dtype = DType::Int64})},
      {"model.bf16_copy", randn({5}, {.dtype = DType::BFloat16}, &gen)},
  };
}

const Metadata kMeta = {{"step", "1000"}, {"rng.seed", "1234"}, {"rng.offset", "56"}, {"data.position", "789012"}};

void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    const Tensor& u = b.at(name);
    EXPECT_EQ(t.shape(), u.shape()) << name;
    EXPECT_EQ(t.dtype(), u.dtype()) << name;
    if (t.shape() == u.shape()) {
      EXPECT_EQ(t.to_vector<double>(), u.to_vector<double>()) << name;
    }
  }
}

// Byte offset where the data section starts.
size_t data_start(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return 8 + n;
}

}  // namespace

TEST(Checkpoint, RoundTripTensorsAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  StateDict state = training_state(1);
  save_checkpoint(path, state, kMeta);
  Checkpoint loaded = load_checkpoint(path);
  expect_same_state(state, loaded.tensors);
  EXPECT_EQ(loaded.metadata, kMeta);  // the format's own keys are not handed back

  // It is a plain safetensors file whose metadata carries the format and checksums.
  SafetensorsFile plain = load_safetensors(path);
  EXPECT_EQ(plain.metadata.at("format"), kCheckpointFormat);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", plain.data_crc32);
  EXPECT_EQ(plain.metadata.at("data_crc32"), hex);
  EXPECT_EQ(plain.metadata.at("header_crc32").size(), 8u);
  EXPECT_EQ(plain.metadata.at("step"), "1000");

  // Overwriting with a newer state replaces it.
  StateDict newer = training_state(2);
  save_checkpoint(path, newer, {{"step", "2000"}});
  Checkpoint again = load_checkpoint(path);
  expect_same_state(newer, again.tensors);
  EXPECT_EQ(again.metadata, (Metadata{{"step", "2000"}}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(Checkpoint, SaveReturnsTheHeaderChecksumThatLoadVerifies) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::string crc = save_checkpoint(path, training_state(5), kMeta);
  EXPECT_EQ(crc.size(), 8u);
  EXPECT_EQ(load_safetensors(path).metadata.at("header_crc32"), crc);
  EXPECT_EQ(load_checkpoint(path).header_crc32, crc);
  // Another save of other values is another file: another checksum.
  EXPECT_NE(save_checkpoint(path, training_state(6), kMeta), crc);
}

TEST(Checkpoint, ReservedMetadataKeysAreRefused) {
  TempDir dir;
  for (const char* key : {"format", "data_crc32", "header_crc32"}) {
    std::string msg = error_of([&] { save_checkpoint(dir.file("c"), {}, {{key, "x"}}); });
    EXPECT_CONTAINS(msg, std::string("\"") + key + "\" is reserved");
  }
}

TEST(Checkpoint, FlippedDataByteIsAChecksumMismatch) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_checkpoint(path, training_state(3), kMeta);
  std::string bytes = read_bytes(path);
  const size_t start = data_start(bytes);
  for (size_t pos : {start, start + (bytes.size() - start) / 2, bytes.size() - 1}) {
    std::string corrupt = bytes;
    corrupt[pos] ^= 0x10;
    write_bytes(path, corrupt);
    std::string msg = error_of([&] { load_checkpoint(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "data checksum mismatch: expected ");
    EXPECT_CONTAINS(msg, ", found ");
  }
}

TEST(Checkpoint, CorruptedMetadataIsAHeaderChecksumMismatch) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_checkpoint(path, training_state(4), kMeta);
  std::string bytes = read_bytes(path);
  const size_t pos = bytes.find("\"789012\"");  // data.position
  ASSERT_NE(pos, std::string::npos);
  bytes[pos + 2] = '7';  // still valid JSON, still a valid safetensors file
  write_bytes(path, bytes);
  EXPECT_EQ(load_safetensors(path).metadata.at("data.position"), "779012");
  std::string msg = error_of([&] { load_checkpoint(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "header checksum mismatch: expected ");
}

TEST(Checkpoint, TruncatedAndForeignFilesAreRefused) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_checkpoint(path, training_state(5), kMeta);
  const std::string bytes = read_bytes(path);
  for (size_t keep : {bytes.size() - 3, data_start(bytes), size_t{100}, size_t{4}}) {
    write_bytes(path, bytes.substr(0, keep));
    std::string msg = error_of([&] { load_checkpoint(path); });
    EXPECT_CONTAINS(msg, path);
  }
  save_safetensors(path, {{"w", ones({2})}});  // a safetensors file but not a checkpoint
  EXPECT_CONTAINS(error_of([&] { load_checkpoint(path); }), "has no \"format\"");
  save_safetensors(path, {{"w", ones({2})}}, {{"format", "pt"}});
  EXPECT_CONTAINS(error_of([&] { load_checkpoint(path); }), "format is \"pt\", expected \"strata-checkpoint-v1\"");
}

// A save that fails partway (the file-size limit turns write() into EFBIG after 64 KiB, as
// a full disk would) leaves the previous checkpoint intact and loadable, and no temporary.
TEST(Checkpoint, FailedSaveKeepsPreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  StateDict old_state = training_state(6);
  save_checkpoint(path, old_state, kMeta);
  const std::string old_bytes = read_bytes(path);
  ASSERT_LT(old_bytes.size(), 65536u);

  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 65536;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg = error_of([&] { save_checkpoint(path, training_state(7, 256), {{"step", "2000"}}); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "File too large");
  EXPECT_EQ(read_bytes(path), old_bytes);
  Checkpoint loaded = load_checkpoint(path);
  expect_same_state(old_state, loaded.tensors);
  EXPECT_EQ(loaded.metadata, kMeta);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

// A tensor that cannot be written (undefined) aborts the save before the target is touched.
TEST(Checkpoint, UnwritableTensorKeepsPreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  StateDict old_state = training_state(8);
  save_checkpoint(path, old_state, kMeta);
  const std::string old_bytes = read_bytes(path);
  StateDict bad = training_state(9);
  bad["model.z_undefined"] = Tensor();
  EXPECT_CONTAINS(error_of([&] { save_checkpoint(path, bad, kMeta); }), "'model.z_undefined' is undefined");
  EXPECT_EQ(read_bytes(path), old_bytes);
  expect_same_state(old_state, load_checkpoint(path).tensors);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

// Permissions do not stop root, so this runs only for ordinary users.
TEST(Checkpoint, ReadOnlyDirectoryKeepsPreviousCheckpoint) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: a read-only directory does not stop writes";
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  StateDict old_state = training_state(10);
  save_checkpoint(path, old_state, kMeta);
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  std::string msg = error_of([&] { save_checkpoint(path, training_state(11), kMeta); });
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "Permission denied");
  expect_same_state(old_state, load_checkpoint(path).tensors);
}

// Other tools can verify the data checksum: it is zlib's CRC-32.
TEST(Checkpoint, PythonZlibVerifiesDataChecksum) {
  if (!std::filesystem::exists(strata::testing::kPython)) GTEST_SKIP() << "/usr/bin/python3 is missing";
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  StateDict state = training_state(12);
  save_checkpoint(path, state, kMeta);
  nlohmann::json expect = {{"file", path}, {"crc32_key", "data_crc32"}, {"tensors", nlohmann::json::object()}};
  for (const auto& [name, t] : state)
    expect["tensors"][name] = {{"dtype", safetensors_dtype_name(t.dtype())}, {"shape", t.shape().vec()}};
  write_bytes(dir.file("expect.json"), expect.dump());
  std::string output;
  const int rc =
      strata::testing::run_python_script("unit/checkpoint/read_safetensors.py", {dir.file("expect.json")}, &output);
  EXPECT_EQ(rc, 0) << output;
}
