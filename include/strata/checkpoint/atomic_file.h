#pragma once
// Files that appear whole or not at all: the bytes go to a temporary next to the target,
// which is fsynced and renamed over it, and the directory is fsynced so that the rename
// itself survives a crash. A failed write leaves any previous file at the path untouched.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace strata::checkpoint {

class AtomicFileWriter {
 public:
  // Creates a uniquely named temporary in the directory of `path`; throws strata::Error
  // naming the path and the OS error when it cannot.
  explicit AtomicFileWriter(std::string path);
  // Without a successful commit(), removes the temporary (the target stays as it was).
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends all `nbytes` (retrying short writes) or throws strata::Error naming the
  // path and the OS error (e.g. "No space left on device").
  void write(const void* data, size_t nbytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync, close, rename over the target, fsync the directory. Throws on failure (the
  // temporary is then removed); afterwards no more writes are accepted.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  void discard() noexcept;
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

// Runs `writer` on a fresh AtomicFileWriter for `path` and commits it. If `writer` throws,
// its exception propagates unchanged and the previous file at `path` is untouched.
void write_file_atomic(const std::string& path, const std::function<void(AtomicFileWriter&)>& writer);
void write_file_atomic(const std::string& path, std::string_view contents);

// fsync of a directory, so that entries created or renamed in it are durable.
void fsync_directory(const std::string& dir);

}  // namespace strata::checkpoint
