#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "strata/core/error.h"

namespace strata::detail {
namespace {
std::atomic<uint64_t> g_temp_counter{0};

void fsync_directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  STRATA_CHECK(fd >= 0, "write '", path, "': cannot open its directory to fsync: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); the rename is then as durable as they allow.
  STRATA_CHECK(rc == 0 || err == EINVAL, "write '", path, "': fsync of its directory failed: ", std::strerror(err));
}
}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  STRATA_CHECK(!path_.empty(), "AtomicFileWriter: empty path");
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter.fetch_add(1));
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  STRATA_CHECK(fd_ >= 0, "write '", path_, "': cannot create temporary file '", temp_path_, "': ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  STRATA_CHECK(fd_ >= 0 && !committed_, "write '", path_, "': the file is already committed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(n > 0, "write '", path_, "': writing '", temp_path_, "' failed: ", std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  STRATA_CHECK(fd_ >= 0 && !committed_, "write '", path_, "': the file is already committed");
  STRATA_CHECK(::fsync(fd_) == 0, "write '", path_, "': fsync of '", temp_path_, "' failed: ", std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  STRATA_CHECK(rc == 0, "write '", path_, "': closing '", temp_path_, "' failed: ", std::strerror(errno));
  STRATA_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, "write '", path_, "': renaming '", temp_path_,
               "' onto it failed: ", std::strerror(errno));
  committed_ = true;
  fsync_directory_of(path_);
}

}  // namespace strata::detail
