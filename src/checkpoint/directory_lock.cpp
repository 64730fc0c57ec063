// DirectoryLock: flock(2) on "<dir>/.save.lock", the holder's PID and host written into it
// for the message a second process gets.
#include "strata/checkpoint/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "checkpoint/posix_file.h"
#include "strata/core/error.h"
#include "strata/distributed/object_collectives.h"
#include "strata/distributed/process_group.h"

namespace strata::checkpoint {
namespace {
namespace fs = std::filesystem;

// What the lock file says about its holder ("PID 1234 on host node7"), trimmed; "" when unreadable.
std::string holder_of(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string this_process() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return "PID " + std::to_string(::getpid()) + (host[0] != '\0' ? std::string(" on host ") + host : "") + "\n";
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir) {
  STRATA_CHECK(!dir.empty(), "cannot lock a checkpoint directory: the path is empty");
  std::error_code ec;
  fs::create_directories(dir, ec);
  STRATA_CHECK(!ec, "cannot lock checkpoint directory '", dir, "': cannot create it: ", ec.message());
  STRATA_CHECK(fs::is_directory(dir, ec), "cannot lock checkpoint directory '", dir, "': it is not a directory");
  const std::string path = (fs::path(dir) / kFileName).string();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  STRATA_CHECK(fd >= 0, "cannot lock checkpoint directory '", dir, "': opening '", path,
               "' failed: ", detail::os_error(errno), " (saving needs a writable directory)");
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    const std::string holder = holder_of(fd);
    ::close(fd);
    STRATA_CHECK(err != EWOULDBLOCK, "checkpoint directory '", dir,
                 "' is in use: ", holder.empty() ? std::string("another process") : holder, " holds its lock '", path,
                 "' (two runs saving into one directory would remove each other's saves); wait until it ends or "
                 "save somewhere else");
    STRATA_FAIL("cannot lock checkpoint directory '", dir, "': flock on '", path, "' failed: ", detail::os_error(err));
  }
  // Best effort: the lock works without the note, which only serves the message above.
  const std::string note = this_process();
  [[maybe_unused]] const bool noted =
      ::ftruncate(fd, 0) == 0 && ::pwrite(fd, note.data(), note.size(), 0) == static_cast<ssize_t>(note.size());
  fd_ = fd;
  path_ = path;
}

DirectoryLock DirectoryLock::collective(const std::string& dir, dist::ProcessGroup& group) {
  DirectoryLock lock;
  std::string error;
  if (group.rank() == 0) {
    try {
      lock = DirectoryLock(dir);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  dist::agree_on_success(group, error, "checkpoint directory lock");
  return lock;
}

DirectoryLock::~DirectoryLock() { release(); }

DirectoryLock::DirectoryLock(DirectoryLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void DirectoryLock::release() noexcept {
  if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the flock
  fd_ = -1;
}

}  // namespace strata::checkpoint
