#pragma once
#include <fstream>
#include <map>
#include <string>
#include <variant>

namespace strata::train {

// Appends one JSON object per line (JSONL): {"step": 10, "loss": 2.3, ...}. Flushed after
// each record so that a crash loses at most the line being written.
class MetricsWriter {
 public:
  using Value = std::variant<int64_t, double, std::string>;
  // An empty path disables writing. append=false truncates (a fresh run); a resumed run appends.
  explicit MetricsWriter(const std::string& path, bool append = false);
  void write(const std::map<std::string, Value>& record);
  bool enabled() const { return out_.is_open(); }

 private:
  std::ofstream out_;
  std::string path_;
};

}  // namespace strata::train
