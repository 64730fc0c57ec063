#pragma once
// Checks an example runs before training, so that a bad path or a batch that cannot fit fails
// at once with a clear message instead of after minutes of work (or swapping).
#include <filesystem>
#include <string>

#include "strata/core/device.h"

namespace strata::examples {

// Creates `dir` if needed; fails naming `option` when it cannot be created or written.
void check_writable_dir(const std::filesystem::path& dir, const char* option);

// Whether two paths name one file, also through links or another spelling; paths that do
// not exist yet are compared after resolving their existing directories.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
double available_memory_bytes();

// Fails with "out of memory: requested N bytes for one training step's activations (<what>,
// K rank(s) on this node)" when `rank_bytes` times the ranks on this node (they share its
// memory) exceeds MemAvailable; `what` names the options that set the size. On CUDA
// (`device`) the activations live in GPU memory: nothing is checked here, and a step that does
// not fit fails with the allocator's error naming the bytes requested and free.
void check_step_memory(double rank_bytes, const std::string& what, Device device);

}  // namespace strata::examples
