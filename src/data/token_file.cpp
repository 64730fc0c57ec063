#include "strata/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "data/token_formats.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/tensor/factory.h"

namespace strata::data {
namespace {

using detail::load_le;

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

// The file's first min(file_bytes, sizeof(head)) bytes.
void read_head(int fd, const std::string& path, unsigned char* head, size_t want) {
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, head + got, want - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, "token file '", path,
                 "': reading the header failed: ", n == 0 ? "unexpected end of file" : std::strerror(errno));
    got += static_cast<size_t>(n);
  }
}

// The vocabulary TokenFile uses: the header's, else the caller's, else 0 (scan when asked).
int64_t choose_vocab(const std::string& path, const detail::TokenLayout& layout, int64_t requested) {
  const uint64_t limit = max_vocab(layout.token_bytes);
  STRATA_CHECK(requested >= 0 && static_cast<uint64_t>(requested) <= limit, "token file '", path,
               "': TokenFileOptions::vocab_size ", requested, " must be in [1, ", limit, "] for ", layout.token_bytes,
               "-byte tokens (or 0: take it from the file)");
  if (layout.vocab_size == 0) return requested;
  STRATA_CHECK(requested == 0 || requested >= layout.vocab_size, "token file '", path, "': the file's vocab_size ",
               layout.vocab_size, " is larger than TokenFileOptions::vocab_size ", requested,
               ": its tokens may not fit the model");
  return layout.vocab_size;
}

}  // namespace

const char* token_format_name(TokenFormat format) {
  switch (format) {
    case TokenFormat::Strata: return "strata token file";
    case TokenFormat::LlmC: return "llm.c token shard";
    case TokenFormat::RawUint16: return "raw uint16 tokens";
  }
  return "unknown";
}

TokenFile TokenFile::open(const std::string& path, const TokenFileOptions& options) {
  // O_NONBLOCK: opening a FIFO by mistake must fail below, not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  STRATA_CHECK(fd >= 0, "token file '", path, "': cannot open: ", std::strerror(errno));
  FdCloser closer{fd};
  struct stat st {};
  STRATA_CHECK(::fstat(fd, &st) == 0, "token file '", path, "': cannot stat: ", std::strerror(errno));
  STRATA_CHECK(S_ISREG(st.st_mode), "token file '", path, "': not a regular file");
  const auto file_bytes = static_cast<uint64_t>(st.st_size);

  unsigned char head[kTokenFileHeaderBytes] = {};
  read_head(fd, path, head, static_cast<size_t>(std::min<uint64_t>(file_bytes, sizeof(head))));
  const detail::TokenLayout layout = detail::detect_token_layout(path, head, file_bytes);
  const int64_t vocab = choose_vocab(path, layout, options.vocab_size);

  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  STRATA_CHECK(map != MAP_FAILED, "token file '", path, "': mmap of ", file_bytes,
               " bytes failed: ", std::strerror(errno));
  TokenFile tf;
  tf.path_ = path;
  tf.map_ = map;
  tf.map_bytes_ = file_bytes;
  tf.data_ = static_cast<const unsigned char*>(map) + layout.header_bytes;
  tf.token_count_ = layout.token_count;
  tf.vocab_size_ = vocab;
  tf.token_bytes_ = layout.token_bytes;
  tf.format_ = layout.format;
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
    vocab_size_.store(other.vocab_size_.exchange(0));
    token_bytes_ = std::exchange(other.token_bytes_, 0);
    format_ = other.format_;
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
  for (int64_t i = 0; i < count; ++i)
    out[static_cast<size_t>(i)] = static_cast<int64_t>(load_le(p + i * token_bytes_, token_bytes_));
  return out;
}

int64_t TokenFile::vocab_size() const {
  int64_t v = vocab_size_.load(std::memory_order_relaxed);
  if (v == 0 && data_ != nullptr) {
    v = scan_vocab();
    vocab_size_.store(v, std::memory_order_relaxed);
  }
  return v;
}

uint64_t TokenFile::token_limit() const {
  const int64_t v = vocab_size_.load(std::memory_order_relaxed);
  return v > 0 ? static_cast<uint64_t>(v) : max_vocab(token_bytes_);
}

// Calls f.template operator()<kBytes>() with the file's token width as a constant, so the
// compiler turns the byte loop of load_le into one load.
template <class F>
static void with_width(int token_bytes, F&& f) {
  if (token_bytes == 2) f.template operator()<2>();
  else f.template operator()<4>();
}

int64_t TokenFile::scan_vocab() const {
  uint64_t top = 0;
  with_width(token_bytes_, [&]<int kBytes>() {
    for (int64_t i = 0; i < token_count_; ++i) top = std::max(top, load_le(data_ + i * kBytes, kBytes));
  });
  return static_cast<int64_t>(top) + 1;
}

void TokenFile::validate() const {
  STRATA_CHECK(data_ != nullptr, "TokenFile: use of a moved-from token file");
  if (vocab_size_.load(std::memory_order_relaxed) == 0) {
    vocab_size();  // nothing to check against: the scan defines it
    return;
  }
  const uint64_t vocab = token_limit();
  with_width(token_bytes_, [&]<int kBytes>() {
    for (int64_t i = 0; i < token_count_; ++i) {
      uint64_t t = load_le(data_ + i * kBytes, kBytes);
      STRATA_CHECK(t < vocab, "token file '", path_, "': token ", i, " is ", t, ", not below vocab_size ", vocab);
    }
  });
}

Batch TokenFile::batch(std::span<const int64_t> offsets, int64_t seq_len) const {
  STRATA_CHECK(data_ != nullptr, "TokenFile: use of a moved-from token file");
  STRATA_CHECK(seq_len >= 1, "token file '", path_, "': seq_len must be positive, got ", seq_len);
  STRATA_CHECK(!offsets.empty(), "token file '", path_, "': batch of no offsets");
  const auto rows = static_cast<int64_t>(offsets.size());
  const uint64_t limit = token_limit();  // no scan here: an unknown vocab_size is not forced
  std::vector<int64_t> inputs(static_cast<size_t>(rows * seq_len)), targets(static_cast<size_t>(rows * seq_len));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = offsets[static_cast<size_t>(r)];
    // A window reads seq_len + 1 tokens: the inputs and, shifted by one, the targets.
    STRATA_CHECK(o >= 0 && seq_len < token_count_ && o <= token_count_ - seq_len - 1, "token file '", path_,
                 "': a sequence of ", seq_len, " tokens at offset ", o, " (row ", r, ") needs tokens [", o, ", ", o,
                 " + ", seq_len, " + 1) but the file has ", token_count_, " tokens");
    std::vector<int64_t> window = tokens(o, seq_len + 1);
    for (size_t k = 0; k < window.size(); ++k)
      STRATA_CHECK(static_cast<uint64_t>(window[k]) < limit, "token file '", path_, "': token ",
                   o + static_cast<int64_t>(k), " is ", window[k], ", not below vocab_size ", limit);
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
      store_le(buf.data() + i * static_cast<size_t>(token_bytes), static_cast<uint64_t>(tokens[first + i]),
               token_bytes);
    out.write(buf.data(), n * static_cast<size_t>(token_bytes));
  }
  out.commit();
}

}  // namespace strata::data
