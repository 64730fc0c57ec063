#include "text_to_tokens/byte_token_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "strata/checkpoint/atomic_file.h"
#include "strata/core/error.h"
#include "strata/data/byte_text.h"

namespace strata::text_tokens {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

// Closes the descriptor when the conversion ends, however it ends.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool is_continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

// Bytes of the UTF-8 sequence that `lead` starts (0: not a lead byte).
int sequence_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
}

// How many bytes at the end of `bytes` start a character that the next chunk completes.
size_t incomplete_tail(const std::string& bytes) {
  for (size_t k = 1; k <= 4 && k <= bytes.size(); ++k) {
    const auto c = static_cast<unsigned char>(bytes[bytes.size() - k]);
    if (is_continuation(c)) continue;
    return static_cast<size_t>(sequence_length(c)) > k ? k : 0;
  }
  return 0;
}

// One output token file: the 64-byte header (docs/data-format.md) with the count known in
// advance, then uint16 little-endian tokens as the text arrives.
class TokenFileStream {
 public:
  TokenFileStream(const std::string& path, uint64_t tokens) : file_(path) {
    char header[64] = {};
    std::copy_n("STRTOK01", 8, header);  // the magic, without its NUL
    put_le(header + 8, 1, 4);            // version
    put_le(header + 12, 2, 4);           // token bytes
    put_le(header + 16, tokens, 8);
    put_le(header + 24, data::kByteVocabSize, 8);
    file_.write(header, sizeof header);
  }
  void append(const char* bytes, size_t n) {
    buffer_.resize(2 * n);
    for (size_t i = 0; i < n; ++i) {
      buffer_[2 * i] = bytes[i];
      buffer_[2 * i + 1] = 0;
    }
    file_.write(buffer_.data(), buffer_.size());
  }
  void commit() { file_.commit(); }

 private:
  static void put_le(char* at, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) at[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  checkpoint::AtomicFileWriter file_;
  std::vector<char> buffer_;
};

// Reads exactly `n` bytes at `offset` (fewer only at the end of the file).
size_t read_at(int fd, char* into, size_t n, uint64_t offset, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, into + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    STRATA_CHECK(r >= 0, "text_to_tokens: reading '", path, "' failed: ", std::strerror(errno));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

// Where the validation part starts: the last `fraction` of the bytes, moved forward past
// continuation bytes so that no character is split (data::utf8_split_point, on the file).
uint64_t split_point(int fd, uint64_t size, double fraction, const std::string& path) {
  uint64_t at = size - static_cast<uint64_t>(static_cast<double>(size) * fraction);
  char c = 0;
  while (at < size && read_at(fd, &c, 1, at, path) == 1 && is_continuation(static_cast<unsigned char>(c))) ++at;
  return at;
}

}  // namespace

StreamResult stream_byte_tokens(const StreamRequest& r) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused.
  Fd in{::open(r.input.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  STRATA_CHECK(in.fd >= 0, "text_to_tokens: cannot open '", r.input, "': ", std::strerror(errno));
  struct stat st {};
  STRATA_CHECK(::fstat(in.fd, &st) == 0, "text_to_tokens: cannot stat '", r.input, "': ", std::strerror(errno));
  STRATA_CHECK(S_ISREG(st.st_mode), "text_to_tokens: '", r.input,
               "' is not a regular file (a device, FIFO, socket or directory): pass a text file");
  const auto size = static_cast<uint64_t>(st.st_size);
  STRATA_CHECK(size > 0, "text_to_tokens: '", r.input, "' is empty");
  const bool split = !r.val_output.empty();
  const uint64_t train_end = split ? split_point(in.fd, size, r.val_fraction, r.input) : size;
  STRATA_CHECK(!split || (train_end > 0 && train_end < size), "text_to_tokens: --val-fraction ", r.val_fraction, " of ",
               size, " bytes leaves an empty training or validation part");

  TokenFileStream train(r.output, train_end);
  std::unique_ptr<TokenFileStream> val;
  if (split) val = std::make_unique<TokenFileStream>(r.val_output, size - train_end);
  std::string pending;  // read and not yet checked: a chunk and the start of a split character
  std::string chunk(kChunkBytes, '\0');
  uint64_t checked = 0;  // bytes of the input checked and written
  uint64_t offset = 0;   // bytes of the input read
  while (checked < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, size - offset));
    const size_t got = read_at(in.fd, chunk.data(), want, offset, r.input);
    STRATA_CHECK(got == want, "text_to_tokens: '", r.input, "' shrank while it was read (", size,
                 " bytes at the start, ", offset + got, " at the end)");
    offset += got;
    pending.append(chunk.data(), got);
    const size_t ready = pending.size() - (offset < size ? incomplete_tail(pending) : 0);
    const int64_t bad = data::first_invalid_utf8(std::string_view(pending.data(), ready));
    STRATA_CHECK(bad < 0, "text_to_tokens: '", r.input, "' is not UTF-8 text: invalid byte sequence at offset ",
                 checked + static_cast<uint64_t>(bad));
    // The training part ends at train_end; the rest goes to the validation file.
    const uint64_t train_left = train_end > checked ? train_end - checked : 0;
    const size_t to_train = static_cast<size_t>(std::min<uint64_t>(ready, train_left));
    if (to_train > 0) train.append(pending.data(), to_train);
    if (ready > to_train) val->append(pending.data() + to_train, ready - to_train);
    checked += ready;
    pending.erase(0, ready);
  }
  char extra = 0;
  STRATA_CHECK(read_at(in.fd, &extra, 1, size, r.input) == 0, "text_to_tokens: '", r.input,
               "' grew while it was read (", size, " bytes at the start)");
  train.commit();
  if (val) val->commit();
  return {.input_bytes = size, .train_tokens = train_end, .val_tokens = size - train_end};
}

}  // namespace strata::text_tokens
