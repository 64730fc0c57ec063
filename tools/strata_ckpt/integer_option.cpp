#include "strata_ckpt/integer_option.h"

#include <charconv>
#include <string>

namespace strata::ckpt_tool {

CLI::Validator integer_at_most(uint64_t max) {
  const std::string range = "[0, " + std::to_string(max) + "]";
  return CLI::Validator(
      [max, range](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        // from_chars takes neither a sign nor spaces; it reports overflow instead of clamping.
        const auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || stop != end || value > max)
          return text + " is not an integer in " + range;
        return "";
      },
      "INT in " + range);
}

}  // namespace strata::ckpt_tool
