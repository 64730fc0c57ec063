#include "checkpoint/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "strata/core/error.h"

namespace strata::checkpoint::detail {

std::string os_error(int err) { return std::error_code(err, std::generic_category()).message(); }

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "another kind of file";
}

}  // namespace

ReadOnlyFile::ReadOnlyFile(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: a FIFO (or a device) put where a file belongs must be refused below, not
  // wait in open() for a writer that never comes (every rank would hang, past any timeout).
  do {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd_ < 0 && errno == EINTR);
  STRATA_CHECK(fd_ >= 0, "cannot open '", path_, "' for reading: ", os_error(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    STRATA_FAIL("cannot stat '", path_, "': ", os_error(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    STRATA_FAIL("'", path_, "' is not a regular file (it is ", file_kind(st.st_mode), ")");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadOnlyFile::read_at(uint64_t offset, void* dst, size_t n) const {
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    // Linux transfers at most ~2 GiB per call; loop over larger reads.
    const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      STRATA_FAIL("error reading '", path_, "' at byte ", offset, ": ", os_error(errno));
    }
    STRATA_CHECK(got > 0, "unexpected end of file reading '", path_, "' at byte ", offset, " (", n,
                 " more bytes expected; file size ", size_, ")");
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

std::string read_text_file(const std::string& path) {
  ReadOnlyFile file(path);
  std::string text(file.size(), '\0');
  file.read_at(0, text.data(), text.size());
  return text;
}

}  // namespace strata::checkpoint::detail
