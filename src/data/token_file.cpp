#include "strata/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "strata/checkpoint/atomic_file.h"
#include "strata/tensor/factory.h"

namespace strata::data {
namespace {

uint64_t load_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i, v >>= 8) p[i] = static_cast<unsigned char>(v & 0xff);
}

// Largest vocabulary a token width can address: ids 0 .. 2^(8*bytes)-1.
uint64_t max_vocab(int token_bytes) { return 1ull << (8 * token_bytes); }

// Closes the descriptor on every path out of open().
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

TokenFile TokenFile::open(const std::string& path) {
  const char* where = path.c_str();
  // O_NONBLOCK: opening a FIFO by mistake must fail below, not wait for a writer.
  int fd = ::open(where, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  STRATA_CHECK(fd >= 0, "token file '", path, "': cannot open: ", std::strerror(errno));
  FdCloser closer{fd};
  struct stat st {};
  STRATA_CHECK(::fstat(fd, &st) == 0, "token file '", path, "': cannot stat: ", std::strerror(errno));
  STRATA_CHECK(S_ISREG(st.st_mode), "token file '", path, "': not a regular file");
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  STRATA_CHECK(file_bytes >= static_cast<uint64_t>(kTokenFileHeaderBytes), "token file '", path, "': ", file_bytes,
               " bytes is too short for the ", kTokenFileHeaderBytes, "-byte header");

  unsigned char header[kTokenFileHeaderBytes];
  size_t got = 0;
  while (got < sizeof(header)) {
    ssize_t n = ::pread(fd, header + got, sizeof(header) - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, "token file '", path, "': reading the header failed: ",
                 n == 0 ? "unexpected end of file" : std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  STRATA_CHECK(std::memcmp(header, kTokenFileMagic, sizeof(kTokenFileMagic)) == 0, "token file '", path,
               "': not a strata token file (the magic bytes at offset 0 are not \"STRTOK01\")");
  const uint64_t version = load_le(header + 8, 4);
  STRATA_CHECK(version == kTokenFileVersion, "token file '", path, "': unsupported version ", version,
               " (field 'version' at offset 8; this build reads version ", kTokenFileVersion, ")");
  const uint64_t token_bytes = load_le(header + 12, 4);
  STRATA_CHECK(token_bytes == 2 || token_bytes == 4, "token file '", path, "': unsupported token_bytes ", token_bytes,
               " (field 'token_bytes' at offset 12 must be 2 or 4)");
  const uint64_t token_count = load_le(header + 16, 8);
  const uint64_t vocab_size = load_le(header + 24, 8);
  STRATA_CHECK(vocab_size >= 1 && vocab_size <= max_vocab(static_cast<int>(token_bytes)), "token file '", path,
               "': vocab_size ", vocab_size, " (field 'vocab_size' at offset 24) must be in [1, ",
               max_vocab(static_cast<int>(token_bytes)), "] for token_bytes ", token_bytes);
  for (int i = 32; i < kTokenFileHeaderBytes; ++i)
    STRATA_CHECK(header[i] == 0, "token file '", path, "': reserved header byte at offset ", i, " is ",
                 static_cast<int>(header[i]), ", must be 0 in version ", kTokenFileVersion);
  const uint64_t max_count = (UINT64_MAX - kTokenFileHeaderBytes) / token_bytes;
  STRATA_CHECK(token_count <= max_count && token_count <= static_cast<uint64_t>(INT64_MAX), "token file '", path,
               "': token_count ", token_count, " (field 'token_count' at offset 16) is impossibly large");
  const uint64_t expected = kTokenFileHeaderBytes + token_count * token_bytes;
  STRATA_CHECK(file_bytes == expected, "token file '", path, "': the file has ", file_bytes, " bytes but token_count ",
               token_count, " with token_bytes ", token_bytes, " needs exactly ", expected,
               file_bytes < expected ? " (truncated)" : " (trailing bytes)");

  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  STRATA_CHECK(map != MAP_FAILED, "token file '", path, "': mmap of ", file_bytes, " bytes failed: ",
               std::strerror(errno));
  TokenFile tf;
  tf.path_ = path;
  tf.map_ = map;
  tf.map_bytes_ = file_bytes;
  tf.data_ = static_cast<const unsigned char*>(map) + kTokenFileHeaderBytes;
  tf.token_count_ = static_cast<int64_t>(token_count);
  tf.vocab_size_ = static_cast<int64_t>(vocab_size);
  tf.token_bytes_ = static_cast<int>(token_bytes);
  return tf;  // the mapping outlives the descriptor
}

TokenFile::TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    token_count_ = std::exchange(other.token_count_, 0);
    vocab_size_ = std::exchange(other.vocab_size_, 0);
    token_bytes_ = std::exchange(other.token_bytes_, 0);
  }
  return *this;
}

TokenFile::~TokenFile() { release(); }

void TokenFile::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  data_ = nullptr;
}

int64_t TokenFile::token(int64_t i) const {
  STRATA_CHECK(data_ != nullptr, "TokenFile: use of a moved-from token file");
  STRATA_CHECK(i >= 0 && i < token_count_, "token file '", path_, "': token index ", i, " is outside [0, ",
               token_count_, ")");
  return static_cast<int64_t>(load_le(data_ + i * token_bytes_, token_bytes_));
}

std::vector<int64_t> TokenFile::tokens(int64_t offset, int64_t count) const {
  STRATA_CHECK(data_ != nullptr, "TokenFile: use of a moved-from token file");
  STRATA_CHECK(offset >= 0 && count >= 0 && count <= token_count_ && offset <= token_count_ - count, "token file '",
               path_, "': tokens [", offset, ", ", offset, " + ", count, ") are outside the file's ", token_count_,
               " tokens");
  std::vector<int64_t> out(static_cast<size_t>(count));
  const unsigned char* p = data_ + offset * token_bytes_;
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = static_cast<int64_t>(load_le(p + i * token_bytes_, token_bytes_));
  return out;
}

void TokenFile::validate() const {
  STRATA_CHECK(data_ != nullptr, "TokenFile: use of a moved-from token file");
  const auto vocab = static_cast<uint64_t>(vocab_size_);
  // The width as a template argument lets the compiler turn the byte loop into one load.
  auto scan = [&]<int kBytes>() {
    for (int64_t i = 0; i < token_count_; ++i) {
      uint64_t t = load_le(data_ + i * kBytes, kBytes);
      STRATA_CHECK(t < vocab, "token file '", path_, "': token ", i, " is ", t, ", not below vocab_size ", vocab);
    }
  };
  if (token_bytes_ == 2)
    scan.template operator()<2>();
  else
    scan.template operator()<4>();
}

Batch TokenFile::batch(std::span<const int64_t> offsets, int64_t seq_len) const {
  STRATA_CHECK(data_ != nullptr, "TokenFile: use of a moved-from token file");
  STRATA_CHECK(seq_len >= 1, "token file '", path_, "': seq_len must be positive, got ", seq_len);
  STRATA_CHECK(!offsets.empty(), "token file '", path_, "': batch of no offsets");
  const auto rows = static_cast<int64_t>(offsets.size());
  std::vector<int64_t> inputs(static_cast<size_t>(rows * seq_len)), targets(static_cast<size_t>(rows * seq_len));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = offsets[static_cast<size_t>(r)];
    // A window reads seq_len + 1 tokens: the inputs and, shifted by one, the targets.
    STRATA_CHECK(o >= 0 && seq_len < token_count_ && o <= token_count_ - seq_len - 1, "token file '", path_,
                 "': a sequence of ", seq_len, " tokens at offset ", o, " (row ", r, ") needs tokens [", o, ", ", o,
                 " + ", seq_len, " + 1) but the file has ", token_count_, " tokens");
    std::vector<int64_t> window = tokens(o, seq_len + 1);
    for (size_t k = 0; k < window.size(); ++k)
      STRATA_CHECK(window[k] < vocab_size_, "token file '", path_, "': token ", o + static_cast<int64_t>(k), " is ",
                   window[k], ", not below vocab_size ", vocab_size_);
    std::copy(window.begin(), window.end() - 1, inputs.begin() + r * seq_len);
    std::copy(window.begin() + 1, window.end(), targets.begin() + r * seq_len);
  }
  return Batch{from_vector(inputs, {rows, seq_len}), from_vector(targets, {rows, seq_len})};
}

int64_t TokenFile::num_windows(int64_t seq_len) const {
  STRATA_CHECK(seq_len >= 1, "token file '", path_, "': seq_len must be positive, got ", seq_len);
  return token_count_ > 0 ? (token_count_ - 1) / seq_len : 0;
}

Batch TokenFile::window_batch(std::span<const int64_t> windows, int64_t seq_len) const {
  const int64_t n = num_windows(seq_len);
  std::vector<int64_t> offsets(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    STRATA_CHECK(windows[i] >= 0 && windows[i] < n, "token file '", path_, "': window ", windows[i],
                 " is outside the file's ", n, " windows of ", seq_len, " tokens");
    offsets[i] = windows[i] * seq_len;
  }
  return batch(offsets, seq_len);
}

void write_token_file(const std::string& path, std::span<const int64_t> tokens, int token_bytes, int64_t vocab_size) {
  STRATA_CHECK(token_bytes == 2 || token_bytes == 4, "write_token_file '", path, "': token_bytes must be 2 or 4, got ",
               token_bytes);
  STRATA_CHECK(vocab_size >= 1 && static_cast<uint64_t>(vocab_size) <= max_vocab(token_bytes), "write_token_file '",
               path, "': vocab_size ", vocab_size, " must be in [1, ", max_vocab(token_bytes), "] for token_bytes ",
               token_bytes);
  for (size_t i = 0; i < tokens.size(); ++i)
    STRATA_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size, "write_token_file '", path, "': token ", i, " is ",
                 tokens[i], ", outside [0, vocab_size = ", vocab_size, ")");

  unsigned char header[kTokenFileHeaderBytes] = {};
  std::memcpy(header, kTokenFileMagic, sizeof(kTokenFileMagic));
  store_le(header + 8, kTokenFileVersion, 4);
  store_le(header + 12, static_cast<uint64_t>(token_bytes), 4);
  store_le(header + 16, tokens.size(), 8);
  store_le(header + 24, static_cast<uint64_t>(vocab_size), 8);

  checkpoint::AtomicFileWriter out(path);
  out.write(header, sizeof(header));
  constexpr size_t kChunk = 1 << 16;  // tokens per write
  std::vector<unsigned char> buf(kChunk * static_cast<size_t>(token_bytes));
  for (size_t first = 0; first < tokens.size(); first += kChunk) {
    const size_t n = std::min(kChunk, tokens.size() - first);
    for (size_t i = 0; i < n; ++i)
      store_le(buf.data() + i * static_cast<size_t>(token_bytes), static_cast<uint64_t>(tokens[first + i]), token_bytes);
    out.write(buf.data(), n * static_cast<size_t>(token_bytes));
  }
  out.commit();
}

}  // namespace strata::data
