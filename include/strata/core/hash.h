#pragma once
// FNV-1a (64-bit prime): a cheap, stable hash for comparing small descriptions across ranks
// (parameter lists, split rank lists, host names); not for security. The value does not
// depend on the platform, so ranks compare hashes instead of the data.
#include <cstdint>
#include <span>
#include <string_view>

namespace strata {

// The published 64-bit FNV offset basis and prime. Hashes are compared only between ranks of
// one job (never stored), so every rank runs the same build and the same values.
inline constexpr uint64_t kFnv1aOffset = 14695981039346656037ull;
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
