#pragma once
// How a CUDA entry point is declared: once, with STRATA_CUDA_ENTRY(signature). With CUDA
// (STRATA_HAS_CUDA=1) that is the declaration, defined in backend/cuda/ or beside it. Without,
// it is an inline definition that refuses naming the function, so the no-CUDA build needs no
// list of stubs kept by hand. Ops refuse before it, in on_device, by their public name and
// device (backend/dispatch/device_dispatch.h), so this refusal is a last line, not the
// message users see.
#if !defined(STRATA_HAS_CUDA)
#error "STRATA_HAS_CUDA must be 0 or 1 (set by src/CMakeLists.txt for the library and the tree's tests)"
#endif

namespace strata::detail {
[[noreturn]] void cuda_not_built(const char* function);
}  // namespace strata::detail

#if STRATA_HAS_CUDA
#define STRATA_CUDA_ENTRY(...) __VA_ARGS__;
#else
// The parameters go unused in the refusing body: -Wunused-parameter is silenced for the
// headers that declare entry points (STRATA_CUDA_ENTRIES_BEGIN/END).
#define STRATA_CUDA_ENTRY(...) \
  [[noreturn]] inline __VA_ARGS__ { ::strata::detail::cuda_not_built(__func__); }
#endif

#define STRATA_CUDA_ENTRIES_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"")
#define STRATA_CUDA_ENTRIES_END _Pragma("GCC diagnostic pop")
