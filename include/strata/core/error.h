#pragma once
// Errors are values a user can act on: STRATA_CHECK throws strata::Error carrying the
// message, file:line and (once the dist layer knows it) the rank.
#include <sstream>
#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The dist layer sets this once the rank is known; -1 means "not distributed".
void set_error_rank(int rank);
int error_rank();

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail
}  // namespace strata

#define STRATA_CHECK(cond, ...)                                                                 \
  do {                                                                                          \
    if (!(cond)) [[unlikely]]                                                                   \
      ::strata::detail::throw_error(__FILE__, __LINE__, ::strata::detail::concat(__VA_ARGS__)); \
  } while (0)

#define STRATA_FAIL(...) ::strata::detail::throw_error(__FILE__, __LINE__, ::strata::detail::concat(__VA_ARGS__))
