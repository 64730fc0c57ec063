#include "strata/train/metrics.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "strata/core/error.h"

namespace strata::train {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  STRATA_CHECK(out_.is_open(), "metrics: cannot open '", path, "' for writing");
}

void MetricsWriter::write(const std::map<std::string, Value>& record) {
  if (!out_.is_open()) return;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : record) {
    const std::string& key = name;  // a structured binding: clang cannot capture it (P1091)
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, double>) {
            j[key] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);  // JSON has no NaN
          } else {
            j[key] = v;
          }
        },
        value);
  }
  out_ << j.dump() << '\n';
  out_.flush();
  STRATA_CHECK(out_.good(), "metrics: write to '", path_, "' failed");
}

}  // namespace strata::train
