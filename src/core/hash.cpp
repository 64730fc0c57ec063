#include "strata/core/hash.h"

namespace strata {

uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) h = fnv1a_mix(h, c);
  return h;
}

uint64_t fnv1a_words(std::span<const int> words, uint64_t h) {
  for (int x : words) h = fnv1a_mix(h, static_cast<uint32_t>(x));
  return h;
}

uint64_t fnv1a_words(std::span<const uint64_t> words, uint64_t h) {
  for (uint64_t x : words) h = fnv1a_mix(h, x);
  return h;
}

}  // namespace strata
