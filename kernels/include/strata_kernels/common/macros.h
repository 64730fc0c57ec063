#pragma once
// STRATA_HD marks math shared by the CPU loops and the CUDA kernels: one definition, so the
// CPU tests cover the numerics the GPU runs.
#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
// always_inline: CPU loops compiled per ISA level (target_clones) must get their own copy.
#define STRATA_HD inline __attribute__((always_inline))
#else
#define STRATA_HD inline
#endif
