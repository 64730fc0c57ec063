#include "strata/parallel/flat_buffer.h"

#include <algorithm>

#include "strata/core/error.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {

FlatBuffer::FlatBuffer(DType dtype, const std::vector<std::pair<std::string, Shape>>& entries, int num_shards,
                       int64_t global_offset)
    : dtype_(dtype), num_shards_(num_shards), global_offset_(global_offset) {
  STRATA_CHECK(num_shards >= 1, "FlatBuffer: num_shards must be >= 1, got ", num_shards);
  STRATA_CHECK(global_offset >= 0, "FlatBuffer: global_offset must be >= 0, got ", global_offset);
  entries_.reserve(entries.size());
  for (const auto& [name, shape] : entries) {
    Entry e;
    e.name = name;
    e.shape = shape;
    e.numel = shape.numel();
    e.offset = used_;
    used_ += e.numel;
    entries_.push_back(std::move(e));
  }
  // Round up to a multiple of the shard count (at least one element per shard, so that a
  // shard is never an empty tensor).
  numel_ = std::max<int64_t>(num_shards, (used_ + num_shards - 1) / num_shards * num_shards);
}

int64_t FlatBuffer::shard_begin(int r) const {
  STRATA_CHECK(r >= 0 && r < num_shards_, "FlatBuffer: shard ", r, " out of range [0, ", num_shards_, ")");
  return static_cast<int64_t>(r) * shard_numel();
}

std::vector<FlatBuffer::Piece> FlatBuffer::pieces(int r) const {
  const int64_t begin = shard_begin(r);
  const int64_t end = begin + shard_numel();
  std::vector<Piece> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const int64_t lo = std::max(begin, e.offset);
    const int64_t hi = std::min(end, e.offset + e.numel);
    if (lo >= hi) continue;
    out.push_back({.entry = i, .entry_offset = lo - e.offset, .shard_offset = lo - begin, .numel = hi - lo});
  }
  return out;
}

void FlatBuffer::allocate(Device device) {
  STRATA_CHECK(!data_.defined(), "FlatBuffer: allocate() called twice");
  data_ = zeros({numel_}, {.dtype = dtype_, .device = device});
}

void FlatBuffer::release() { data().storage()->release(); }

void FlatBuffer::reallocate() { data().storage()->reallocate(); }

bool FlatBuffer::released() const { return !data_.defined() || data_.storage()->released(); }

Tensor FlatBuffer::data() const {
  STRATA_CHECK(data_.defined(), "FlatBuffer: the buffer has no memory yet (call allocate())");
  return data_;
}

// Views are built from the TensorImpl fields rather than narrow(): narrow() reads no data,
// but building them this way keeps them valid (and cheap) while the memory is released.
Tensor FlatBuffer::view(size_t entry) const {
  STRATA_CHECK(entry < entries_.size(), "FlatBuffer: entry ", entry, " out of range (", entries_.size(), " entries)");
  const Entry& e = entries_[entry];
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = data().storage();
  impl->offset = data_.offset() + e.offset;
  impl->shape = e.shape;
  impl->strides = contiguous_strides(e.shape);
  impl->dtype = dtype_;
  return Tensor(std::move(impl));
}

Tensor FlatBuffer::flat_view(size_t entry) const { return view(entry).view({entries_.at(entry).numel}); }

Tensor FlatBuffer::shard(int r) const { return data().narrow(0, shard_begin(r), shard_numel()); }

}  // namespace strata::parallel
