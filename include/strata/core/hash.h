#pragma once
// FNV-1a (64-bit prime): a cheap, stable hash for comparing small descriptions across ranks
// (parameter lists, split rank lists, host names); not for security. Every rank computes
// the same value on every build and platform, so ranks compare hashes instead of the data.
#include <cstdint>
#include <span>
#include <string_view>

namespace strata {

// Not the published offset basis (14695981039346656037): strata's checks have always started
// from this value (the published one without its last digit). It hashes as well; it stays so
// that every existing hash keeps its value.
inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

// One FNV-1a step: mixes `value` (a byte, or a whole word in the *_words variants) into `h`.
constexpr uint64_t fnv1a_mix(uint64_t h, uint64_t value) { return (h ^ value) * kFnv1aPrime; }

// Standard FNV-1a over bytes; `h` continues an earlier hash.
uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset);
// Each int mixed in as one 32-bit word (not byte by byte): rank lists.
uint64_t fnv1a_words(std::span<const int> words, uint64_t h = kFnv1aOffset);
// Each 64-bit word mixed in whole: combining hashes into one.
uint64_t fnv1a_words(std::span<const uint64_t> words, uint64_t h = kFnv1aOffset);

}  // namespace strata
