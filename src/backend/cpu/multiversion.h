#pragma once
// The library is built for baseline x86-64 (SSE2), but the exp-heavy loops (softmax,
// cross-entropy, GELU, attention, the same-shape elementwise maps such as SiLU) run 2-4x
// faster with AVX2/AVX-512. Functions marked
// STRATA_MULTIVERSION are compiled once per ISA level and the best version is picked when
// the library loads (GCC function multi-versioning through ifunc); OpenMP bodies inside
// them are versioned too. Helpers they call must be STRATA_ALWAYS_INLINE (or trivially
// inlined) to be compiled into each version rather than once for the baseline.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(STRATA_NO_MULTIVERSION)
#define STRATA_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STRATA_MULTIVERSION
#endif

#if defined(__GNUC__)
#define STRATA_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define STRATA_ALWAYS_INLINE inline
#endif
