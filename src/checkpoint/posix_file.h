#pragma once
// Small POSIX file helpers shared by the checkpoint readers and writers (internal).
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::checkpoint::detail {

// The OS's text for an errno value ("No space left on device"), thread-safe.
std::string os_error(int err);

// A file opened for reading at explicit offsets; errors name the path and the OS error.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(std::string path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly n bytes at offset, or throws (I/O error or end of file).
  void read_at(uint64_t offset, void* dst, size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole file as a string (small files: config.json).
std::string read_text_file(const std::string& path);

}  // namespace strata::checkpoint::detail
