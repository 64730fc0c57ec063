#pragma once
// An exclusive lock on a checkpoint directory, so that two runs never save into one directory
// at once (the second's save would prune or replace the first's). It is an flock(2) on
// "<dir>/.save.lock", held until the object is destroyed or the process ends (the kernel
// releases it even after SIGKILL); the file holds the holder's PID and host, which the refusal
// names. strata-run locks a different file (".strata-run.lock") for its own lifetime, so a
// trainer it launches takes this one without waiting on its parent (docs/checkpoint-format.md).
//
//   const auto lock = checkpoint::DirectoryLock::collective(options.save, world);  // rank 0 holds it
#include <string>

namespace strata::dist {
class ProcessGroup;
}

namespace strata::checkpoint {

class DirectoryLock {
 public:
  static constexpr const char* kFileName = ".save.lock";

  // Creates `dir` if needed and locks it, or throws strata::Error naming the directory and, when
  // another process holds the lock, its PID and host (what the lock file says).
  explicit DirectoryLock(const std::string& dir);
  // Collective over `group`: rank 0 takes the lock and every rank learns whether it could, so
  // that a refusal fails every rank with the same message. Other ranks get an empty lock.
  static DirectoryLock collective(const std::string& dir, dist::ProcessGroup& group);

  DirectoryLock() = default;  // holds nothing
  ~DirectoryLock();
  DirectoryLock(DirectoryLock&& other) noexcept;
  DirectoryLock& operator=(DirectoryLock&& other) noexcept;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }  // the lock file

 private:
  void release() noexcept;
  std::string path_;
  int fd_ = -1;
};

}  // namespace strata::checkpoint
