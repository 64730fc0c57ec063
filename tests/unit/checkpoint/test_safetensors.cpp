// safetensors reader/writer, CRC-32 and atomic file writes.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/checksum.h"
#include "file_test_util.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::checkpoint;
using strata::checkpoint::detail::crc32;
using strata::testing::error_of;
using strata::testing::read_bytes;
using strata::testing::TempDir;
using strata::testing::write_bytes;

namespace {

// The message of the strata::Error `f` throws (fails the test when it throws nothing).

void expect_same_tensor(const Tensor& a, const Tensor& b, const std::string& name) {
  ASSERT_TRUE(a.defined() && b.defined()) << name;
  EXPECT_EQ(a.shape(), b.shape()) << name;
  EXPECT_EQ(a.dtype(), b.dtype()) << name;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return;
  if (is_floating(a.dtype())) {
    EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << name;
  } else {
    EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>()) << name;
  }
}

// A file from a header text and data bytes, exactly as given (no padding, no checks).
std::string raw_file(const std::string& header, const std::string& data = {}) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

StateDict all_dtypes(Generator& gen) {
  return {
      {"f32", randn({3, 5}, {.dtype = DType::Float32}, &gen)},
      {"f64", randn({7}, {.dtype = DType::Float64}, &gen)},
      {"bf16", randn({2, 3}, {.dtype = DType::BFloat16}, &gen)},  // odd byte counts test the alignment order
      {"f16", randn({5}, {.dtype = DType::Float16}, &gen)},
      {"i32", randint(-1000, 1000, {4, 1}, {.dtype = DType::Int32}, &gen)},
      {"i64", randint(-(int64_t{1} << 40), int64_t{1} << 40, {3}, {.dtype = DType::Int64}, &gen)},
      {"scalar", scalar_tensor(2.5, {.dtype = DType::Float64})},
      {"empty", zeros({0, 4})},
  };
}

}  // namespace

// ---------------------------------------------------------------------------------------
TEST(Crc32, KnownValuesAndStreaming) {
  EXPECT_EQ(crc32("", 0), 0u);
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);  // the standard check value
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(crc32(fox.data(), fox.size()), 0x414FA339u);
  // The 8-byte fast path and the byte loop agree with a bitwise reference at every split.
  std::string data(1000, '\0');
  std::mt19937 rng(7);
  for (char& c : data) c = static_cast<char>(rng());
  uint32_t ref = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    ref ^= c;
    for (int k = 0; k < 8; ++k) ref = (ref & 1) ? (ref >> 1) ^ 0xEDB88320u : ref >> 1;
  }
  ref = ~ref;
  EXPECT_EQ(crc32(data.data(), data.size()), ref);
  for (size_t split : {1u, 7u, 8u, 13u, 500u, 999u}) {
    EXPECT_EQ(crc32(data.data() + split, data.size() - split, crc32(data.data(), split)), ref) << split;
  }
}

// The carry-less multiplication path (inputs of 256 bytes and more, where the CPU has it)
// against the bitwise reference: every length around its thresholds, every alignment, a
// large buffer, and continued CRCs split anywhere.
TEST(Crc32, FastPathMatchesBitwiseReference) {
  auto bitwise = [](const char* p, size_t n, uint32_t crc) {
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; ++i) {
      c ^= static_cast<unsigned char>(p[i]);
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
  };
  std::string data((1 << 20) + 77, '\0');
  std::mt19937 rng(11);
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n = 0; n <= 600; ++n) ASSERT_EQ(crc32(data.data(), n), bitwise(data.data(), n, 0)) << n;
  for (size_t offset = 1; offset < 16; ++offset)
    ASSERT_EQ(crc32(data.data() + offset, 1000), bitwise(data.data() + offset, 1000, 0)) << offset;
  const uint32_t whole = bitwise(data.data(), data.size(), 0);
  EXPECT_EQ(crc32(data.data(), data.size()), whole);
  EXPECT_EQ(crc32(data.data(), data.size(), 0x12345678u), bitwise(data.data(), data.size(), 0x12345678u));
  for (size_t split : {1u, 255u, 256u, 300u, 4097u, 1u << 19}) {
    EXPECT_EQ(crc32(data.data() + split, data.size() - split, crc32(data.data(), split)), whole) << split;
  }
}

// ---------------------------------------------------------------------------------------
TEST(AtomicFile, WritesAndReplaces) {
  TempDir dir;
  const std::string path = dir.file("a.txt");
  write_file_atomic(path, "first");
  EXPECT_EQ(read_bytes(path), "first");
  write_file_atomic(path, [](AtomicFileWriter& f) {
    f.write("sec");
    f.write("ond", 3);
    EXPECT_EQ(f.bytes_written(), 6u);
  });
  EXPECT_EQ(read_bytes(path), "second");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});  // no temporaries left
}

TEST(AtomicFile, WriterThrowingMidwayKeepsOldFile) {
  TempDir dir;
  const std::string path = dir.file("a.txt");
  write_file_atomic(path, "old contents");
  EXPECT_THROW(write_file_atomic(path,
                                 [](AtomicFileWriter& f) {
                                   f.write(std::string(100000, 'x'));
                                   throw std::runtime_error("writer failed");
                                 }),
               std::runtime_error);
  EXPECT_EQ(read_bytes(path), "old contents");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

TEST(AtomicFile, ErrorsNameThePathAndOsError) {
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/a.txt");
  std::string msg = error_of([&] { write_file_atomic(missing, "x"); });
  EXPECT_CONTAINS(msg, missing);
  EXPECT_CONTAINS(msg, "No such file or directory");
  // A directory in the way: the rename fails and the temporary is removed.
  std::filesystem::create_directory(dir.file("sub"));
  msg = error_of([&] { write_file_atomic(dir.file("sub"), "x"); });
  EXPECT_CONTAINS(msg, dir.file("sub"));
  EXPECT_CONTAINS(msg, "rename");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

// A real short write: the file-size limit makes write() fail with EFBIG partway through,
// like a full disk (and works when the tests run as root, unlike a read-only directory).
TEST(AtomicFile, FailedWriteFromFileSizeLimitKeepsOldFile) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  write_file_atomic(path, "old");
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg = error_of([&] { write_file_atomic(path, std::string(100000, 'y')); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "File too large");
  EXPECT_CONTAINS(msg, "4096 bytes written");
  EXPECT_EQ(read_bytes(path), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.bin"});
}

// ---------------------------------------------------------------------------------------
TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  TempDir dir;
  Generator gen(42);
  StateDict tensors = all_dtypes(gen);
  const Metadata meta = {{"step", "1000"}, {"note", "héllo \"quoted\""}, {"empty", ""}};
  const std::string path = dir.file("t.safetensors");
  save_safetensors(path, tensors, meta);
  SafetensorsFile loaded = load_safetensors(path);
  EXPECT_EQ(loaded.metadata, meta);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    expect_same_tensor(loaded.tensors.at(name), t, name);
    EXPECT_TRUE(loaded.tensors.at(name).is_contiguous());
  }
  // The CRC reported equals the CRC of the data section on disk.
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(loaded.data_crc32, crc32(bytes.data() + 8 + n, bytes.size() - 8 - n));
  // Every tensor starts at a multiple of its element size.
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const uint64_t begin = info["data_offsets"][0];
    EXPECT_EQ(begin % dtype_size(parse_safetensors_dtype(info["dtype"].get<std::string>())), 0u) << name;
  }
}

TEST(Safetensors, NonContiguousTensorsAreWrittenContiguously) {
  TempDir dir;
  Tensor base = arange(0, 24, 1, {.dtype = DType::Float32}).view({4, 6});
  StateDict tensors = {
      {"transposed", base.transpose(0, 1)},
      {"narrowed", base.narrow(1, 2, 3)},
      {"offset_row", base.select(0, 2)},
      {"expanded", scalar_tensor(7.0).unsqueeze(0).expand({5})},
      {"permuted", arange(0, 24, 1, {.dtype = DType::Int64}).view({2, 3, 4}).permute({2, 0, 1})},
  };
  const std::string path = dir.file("views.safetensors");
  save_safetensors(path, tensors);
  SafetensorsFile loaded = load_safetensors(path);
  EXPECT_TRUE(loaded.metadata.empty());
  for (const auto& [name, t] : tensors) expect_same_tensor(loaded.tensors.at(name), t, name);
  EXPECT_EQ(loaded.tensors.at("transposed").to_vector<float>()[1], 6.0f);
  EXPECT_EQ(loaded.tensors.at("offset_row").to_vector<float>(), (std::vector<float>{12, 13, 14, 15, 16, 17}));
}

TEST(Safetensors, EmptyDictAndGradTensors) {
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  save_safetensors(path, {});
  EXPECT_EQ(read_bytes(path).size(), 16u);  // 8 + "{}" padded to 8
  EXPECT_TRUE(load_safetensors(path).tensors.empty());
  Tensor w = randn({3, 2}).set_requires_grad(true);
  save_safetensors(path, {{"w", w.transpose(0, 1)}});
  expect_same_tensor(load_safetensors(path).tensors.at("w"), w.transpose(0, 1), "w");
}

TEST(Safetensors, SaveRejectsBadInput) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  std::string msg = error_of([&] { save_safetensors(path, {{"x", Tensor()}}); });
  EXPECT_CONTAINS(msg, "'x' is undefined");
  EXPECT_CONTAINS(msg, path);
  msg = error_of([&] { save_safetensors(path, {{"__metadata__", zeros({1})}}); });
  EXPECT_CONTAINS(msg, "reserved");
  msg = error_of([&] { save_safetensors(path, {{std::string("bad\xff"), zeros({1})}}); });
  EXPECT_CONTAINS(msg, "UTF-8");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(dir.entries().empty());
}

// Each structural defect: a strata::Error naming the file and what is wrong.
TEST(Safetensors, LoadValidation) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  auto expect_error = [&](const std::string& bytes, const std::string& what) {
    write_bytes(path, bytes);
    std::string msg = error_of([&] { load_safetensors(path); });
    EXPECT_CONTAINS(msg, path) << what;
    EXPECT_CONTAINS(msg, what);
  };
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data8(8, '\1');
  write_bytes(path, raw_file(f32x2, data8));
  ASSERT_EQ(load_safetensors(path).tensors.at("a").shape(), Shape({2}));  // the unpadded base case is valid

  expect_error("abc", "shorter than the 8-byte header length");
  std::string huge = raw_file(f32x2, data8);
  huge[6] = 1;  // header length ~2^48
  expect_error(huge, "exceeds");
  expect_error(raw_file(R"({"a":{"dtype":"F32",)", data8), "not valid JSON");
  expect_error(raw_file("[1, 2]"), "must be a JSON object");
  expect_error(raw_file(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", data8),
               "tensor 'a': unknown dtype \"U8\"");
  expect_error(raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", data8), "missing field \"shape\"");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8), "non-negative");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data8), "non-negative");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
               "shape [3] of F32 needs 12 bytes but data_offsets [0, 8] span 8");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8), "[begin, end]");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8), "end before");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904, 8],"data_offsets":[0,8]}})", data8),
               "more than 2^64");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        data8),
               "overlap tensor 'a'");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8), "leave a gap");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
               "lie beyond the data section, which is 8 bytes");
  expect_error(raw_file(f32x2, data8 + "xyz"), "(3 trailing bytes)");
  expect_error(raw_file(R"({"__metadata__":{"step":5},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8),
               "__metadata__[\"step\"] must be a string");
  expect_error(raw_file(R"({"a":[1,2]})"), "tensor 'a': expected an object");

  // A file written by strata, truncated by one byte.
  save_safetensors(path, {{"w", ones({4, 4})}});
  std::string good = read_bytes(path);
  expect_error(good.substr(0, good.size() - 1), "file truncated?");

  std::filesystem::remove(path);
  std::string msg = error_of([&] { load_safetensors(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "No such file or directory");
}

TEST(Safetensors, DtypeNames) {
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32, DType::Int64})
    EXPECT_EQ(parse_safetensors_dtype(safetensors_dtype_name(d)), d);
  EXPECT_CONTAINS(error_of([] { parse_safetensors_dtype("F8_E4M3"); }), "F8_E4M3");
}

// The file reads back with Python's json + struct only (numpy cross-checks when present).
TEST(Safetensors, PythonReadsEveryDtype) {
  if (!std::filesystem::exists(strata::testing::kPython)) GTEST_SKIP() << "/usr/bin/python3 is missing";
  TempDir dir;
  Generator gen(3);
  StateDict tensors = all_dtypes(gen);
  const Metadata meta = {{"step", "12"}, {"name", "ünïcode"}};
  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, tensors, meta);

  nlohmann::json expect = {{"file", path}, {"metadata", meta}, {"tensors", nlohmann::json::object()}};
  for (const auto& [name, t] : tensors) {
    nlohmann::json values =
        is_floating(t.dtype()) ? nlohmann::json(t.to_vector<double>()) : nlohmann::json(t.to_vector<int64_t>());
    expect["tensors"][name] = {
        {"dtype", safetensors_dtype_name(t.dtype())}, {"shape", t.shape().vec()}, {"values", values}};
  }
  write_bytes(dir.file("expect.json"), expect.dump());
  std::string output;
  const int rc =
      strata::testing::run_python_script("unit/checkpoint/read_safetensors.py", {dir.file("expect.json")}, &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_CONTAINS(output, "OK");
}

// Random damage anywhere in the file: loading either succeeds or throws strata::Error,
// never crashes or throws anything else (run under STRATA_SANITIZE to catch overreads).
TEST(Safetensors, RandomCorruptionOnlyEverThrowsError) {
  TempDir dir;
  Generator gen(5);
  const std::string path = dir.file("t.safetensors");
  save_safetensors(path, all_dtypes(gen), {{"step", "7"}});
  const std::string good = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  std::mt19937 rng(11);
  int errors = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = good;
    if (trial % 4 == 3) {
      bad.resize(rng() % good.size());
    } else {
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < flips; ++k) {
        const size_t pos = (trial % 2) ? rng() % (8 + n) : rng() % bad.size();  // header-heavy
        bad[pos] = static_cast<char>(rng());
      }
    }
    write_bytes(path, bad);
    try {
      load_safetensors(path);
    } catch (const Error&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": non-strata exception " << e.what();
    }
  }
  EXPECT_GT(errors, 200);
}
