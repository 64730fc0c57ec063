#pragma once
// FlatBuffer: one contiguous 1-D tensor of one dtype holding a list of tensors back to back,
// padded at the end so that its length divides by the number of shards. It is the unit of
// communication and sharding of ZeRO (a "bucket" in stages 1 and 2, a "unit" such as one
// transformer block in stage 3) and the unit of a sharded checkpoint:
//
//   [ entry 0 | entry 1 | ... | entry k-1 | padding ]   numel() = N * shard_numel()
//   [ shard 0        | shard 1        | ... | shard N-1 ]
//
// Shard r is the range [r * S, (r + 1) * S), S = numel() / N: exactly chunk r of
// ProcessGroup's all_gather / reduce_scatter rule, so a shard is the output of a
// reduce_scatter and the input of an all_gather with no copy. A buffer also knows where it
// starts in the model's flat index space (global_offset), so that a shard is named by a
// global range in checkpoints.
//
// The layout is fixed at construction; the memory is allocated separately (allocate()) and
// may be released and reallocated (ZeRO-3 keeps a unit's full parameters only while it runs):
// tensors made with view() keep viewing the buffer across a release and reallocate.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/shape.h"
#include "strata/tensor/tensor.h"

namespace strata::parallel {

class FlatBuffer {
 public:
  struct Entry {
    std::string name = {};
    Shape shape = {};
    int64_t offset = 0;  // in elements, from the start of the buffer
    int64_t numel = 0;
  };
  // The part of an entry that lies in one shard.
  struct Piece {
    size_t entry = 0;          // index into entries()
    int64_t entry_offset = 0;  // first element of the piece within the entry
    int64_t shard_offset = 0;  // first element of the piece within the shard
    int64_t numel = 0;
  };

  // Entries are laid out in the order given. `num_shards` >= 1. No memory is allocated.
  FlatBuffer(DType dtype, const std::vector<std::pair<std::string, Shape>>& entries, int num_shards,
             int64_t global_offset = 0);

  DType dtype() const { return dtype_; }
  const std::vector<Entry>& entries() const { return entries_; }
  int num_shards() const { return num_shards_; }
  int64_t numel() const { return numel_; }            // padded
  int64_t used_numel() const { return used_; }        // sum of the entries
  int64_t padding() const { return numel_ - used_; }  // < num_shards
  int64_t shard_numel() const { return numel_ / num_shards_; }
  int64_t shard_begin(int r) const;  // first element of shard r within the buffer
  int64_t global_offset() const { return global_offset_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  // The pieces of the entries that fall in shard r, in buffer order (padding is in none).
  std::vector<Piece> pieces(int r) const;

  // Memory: allocate() zero-fills a fresh [numel] tensor; release() frees it while keeping
  // every view valid for a later reallocate() (contents undefined until written).
  void allocate(Device device = Device::cpu());
  bool allocated() const { return data_.defined(); }
  void release();
  void reallocate();
  bool released() const;

  Tensor data() const;                   // [numel], 1-D (a handle to the memory)
  Tensor view(size_t entry) const;       // entry shaped as its tensor (shares the memory)
  Tensor flat_view(size_t entry) const;  // entry as [numel]
  Tensor shard(int r) const;             // [shard_numel]

 private:
  DType dtype_;
  std::vector<Entry> entries_;
  int num_shards_;
  int64_t used_ = 0;
  int64_t numel_ = 0;
  int64_t global_offset_ = 0;
  Tensor data_;
};

}  // namespace strata::parallel
