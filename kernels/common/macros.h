#pragma once
// STRATA_HD marks math shared by the CPU loops and the CUDA kernels: one definition, so the
// CPU tests cover the numerics the GPU runs.
#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD inline
#endif
