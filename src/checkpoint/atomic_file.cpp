#include "strata/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>

#include "checkpoint/posix_file.h"
#include "strata/core/error.h"

namespace strata::checkpoint {
namespace {

std::string parent_dir(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// pid + a process-wide counter + random bits: unique across threads, processes (ranks
// writing into one shared directory) and stale temporaries left by a crashed run.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  std::filesystem::path p(path);
  const uint64_t n = counter.fetch_add(1);
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%d.%llu.%08llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(n),
                static_cast<unsigned long long>((salt + n * 0x9e3779b97f4a7c15ull) >> 32));
  std::string name = ".";  // hidden, so directory listings and globs skip it
  name += p.filename().string();
  name += suffix;
  return (p.parent_path() / name).string();
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  STRATA_CHECK(!path_.empty(), "write_file_atomic: empty path");
  STRATA_CHECK(!std::filesystem::path(path_).filename().empty(), "write_file_atomic: '", path_,
               "' names a directory, not a file");
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temp_path_ = temp_name_for(path_);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST && errno != EINTR) break;
  }
  STRATA_CHECK(fd_ >= 0, "cannot write '", path_, "': creating temporary '", temp_path_,
               "' failed: ", detail::os_error(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  STRATA_CHECK(fd_ >= 0 && !committed_, "AtomicFileWriter: write to '", path_, "' after commit");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      discard();
      STRATA_FAIL("cannot write '", path_, "' (", bytes_written_, " bytes written to temporary '", temp_path_,
                  "'): ", detail::os_error(err));
    }
    if (n == 0) {  // no progress and no errno: treat as a full device rather than spin
      discard();
      STRATA_FAIL("cannot write '", path_, "': write made no progress after ", bytes_written_, " bytes");
    }
    p += n;
    nbytes -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFileWriter::commit() {
  STRATA_CHECK(fd_ >= 0 && !committed_, "AtomicFileWriter: '", path_, "' committed twice or after a failed write");
  auto fail = [&](const char* what, int err) {
    discard();
    STRATA_FAIL("cannot write '", path_, "': ", what, " failed: ", detail::os_error(err));
  };
  // fsync before rename: otherwise a crash can leave the new name pointing at empty data.
  if (::fsync(fd_) != 0) fail("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  // close can report deferred write errors (NFS, quotas).
  if (::close(fd) != 0) fail("close", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("rename over the target", errno);
  committed_ = true;
  fsync_directory(parent_dir(path_));
}

void write_file_atomic(const std::string& path, const std::function<void(AtomicFileWriter&)>& writer) {
  AtomicFileWriter file(path);
  writer(file);  // on throw, ~AtomicFileWriter removes the temporary
  file.commit();
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  write_file_atomic(path, [&](AtomicFileWriter& f) { f.write(contents); });
}

void fsync_directory(const std::string& dir) {
  int fd;
  do {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  STRATA_CHECK(fd >= 0, "cannot open directory '", dir, "' to fsync it: ", detail::os_error(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems cannot fsync a directory (EINVAL); there is nothing more to do there.
  STRATA_CHECK(rc == 0 || err == EINVAL, "fsync of directory '", dir, "' failed: ", detail::os_error(err));
}

}  // namespace strata::checkpoint
