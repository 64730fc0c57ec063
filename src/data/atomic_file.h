#pragma once
// Writing a file so that it appears complete or not at all: write a temporary in the same
// directory, fsync it, rename it over the target, fsync the directory.
// (A local helper for the data layer; the checkpoint layer needs the same and may share it.)
#include <cstddef>
#include <string>

namespace strata::detail {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);  // creates the temporary; throws naming the file
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();  // if not committed: closes and removes the temporary

  void write(const void* data, size_t bytes);
  void commit();  // fsync, close, rename onto the target, fsync the directory

  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace strata::detail
