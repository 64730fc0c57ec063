#pragma once
// The sharded checkpoint: one format for every layout (docs/checkpoint-format.md).
//
//   <dir>/latest                          "step-20-3f9c0a7e1b2d4c65\n", replaced atomically
//   <dir>/step-20-3f9c0a7e1b2d4c65/index.json
//   <dir>/step-20-3f9c0a7e1b2d4c65/shard_0.safetensors ... shard_<N-1>.safetensors
//
// Every tensor is named and shaped as in one process (its global name and shape). Each rank
// writes the pieces it owns into its own safetensors file; index.json records, per tensor,
// its dtype and global shape and, per piece, the file, the Region it covers and a CRC-32 of
// its bytes. Since pieces are described in global coordinates, any layout reads them back:
// a reader asks for the Region it holds now and gets the overlapping bytes of whichever
// pieces cover it.
//
// Saving is collective; reading needs no communication (every rank reads what it needs from
// the shared directory).
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "strata/checkpoint/region.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/core/dtype.h"
#include "strata/tensor/tensor.h"

namespace strata::dist {
class ProcessGroup;
}

namespace strata::checkpoint {

inline constexpr const char* kShardedFormat = "strata-sharded-v1";
inline constexpr int kShardedFormatVersion = 1;

// One piece that a rank writes: `data` holds region.numel() elements of tensor `name`
// (global shape `global_shape`) in the region's order; any shape, device or layout (it is
// copied to contiguous CPU memory when the save takes its snapshot).
struct SavePiece {
  std::string name;
  Shape global_shape;
  Region region;
  Tensor data;
};

struct SaveOptions {
  int keep_last = 2;  // complete saves kept in the directory (the newest ones); >= 1
};

// What one save wrote, as this rank sees it.
struct SaveResult {
  std::string directory;       // the step directory, "<dir>/step-<step>-<id>"
  uint64_t bytes_written = 0;  // by this rank
  double write_seconds = 0;    // this rank's shard file, from snapshot to fsync
  double total_seconds = 0;    // the whole collective save
};

// A save's pieces as contiguous CPU tensors, taken at a step boundary.
struct SaveSnapshot {
  int64_t step = 0;
  std::vector<SavePiece> pieces;  // own contiguous CPU copies
  Metadata metadata;              // the save's metadata (rank 0's is the one written)
  Metadata rank_metadata;         // this rank's own (e.g. its tensor-parallel RNG state)
};
// With own_copies (for saves written while training goes on) every piece is copied;
// without, contiguous CPU pieces are used as they are (a synchronous save, done before the
// tensors change again).
SaveSnapshot take_snapshot(int64_t step, const std::vector<SavePiece>& pieces, const Metadata& metadata = {},
                           const Metadata& rank_metadata = {}, bool own_copies = true);

// Collective over `group` (every rank of the run; the directory must be visible to all):
// writes a new save of `snapshot` into `dir` and points `dir`/latest at it:
//   1. rank 0 draws the save id and creates "<dir>/.tmp-step-<step>-<id>/";
//   2. every rank writes shard_<rank>.safetensors there (fsynced);
//   3. rank 0 checks that the pieces cover every tensor exactly once with one dtype and
//      shape, writes index.json (checksummed) last, fsyncs, renames the directory to
//      "step-<step>-<id>", fsyncs `dir`, replaces `latest` atomically, and removes all but the
//      newest keep_last saves up to this step, never a newer one (save_directory.h), and leftovers.
// A failure on any rank fails the save on every rank and leaves `latest` and the saves it
// kept untouched; a crash at any moment leaves `latest` naming a complete save.
SaveResult save_sharded(const std::string& dir, dist::ProcessGroup& group, const SaveSnapshot& snapshot,
                        const SaveOptions& options = {});

// The phases of save_sharded, for saves whose files are written in the background
// (train::AsyncCheckpointer): begin_save and finish_save are collective and belong on the
// training thread; write_shard communicates with nobody and may run on any thread.
struct SaveTicket {
  std::string dir;
  int64_t step = 0;
  std::string save_id;
  std::string temp_dir;  // where the shards go until the save is complete
  std::chrono::steady_clock::time_point start;
};
struct ShardWrite {
  std::string description;  // the shard's pieces, for the index (JSON)
  uint64_t bytes = 0;
  double seconds = 0;
  std::string error;  // empty: written and fsynced
};
// Collective: steps 1 (the save id and the temporary directory).
SaveTicket begin_save(const std::string& dir, dist::ProcessGroup& group, int64_t step, const SaveOptions& options = {});
// Step 2 for rank `rank`; never throws (a failure is in ShardWrite::error).
ShardWrite write_shard(const SaveTicket& ticket, int rank, const SaveSnapshot& snapshot) noexcept;
// Collective: step 3, given every rank's write. When a rank failed, the temporary directory is
// removed and every rank throws.
SaveResult finish_save(const SaveTicket& ticket, dist::ProcessGroup& group, const SaveSnapshot& snapshot,
                       const ShardWrite& mine, const SaveOptions& options = {});

// Where a piece's bytes are.
struct PieceLocation {
  std::string file;  // in the step directory
  Region region;
  uint64_t byte_begin = 0;  // absolute offsets in the file
  uint64_t byte_end = 0;
  uint32_t crc32 = 0;  // of those bytes
};

struct TensorEntry {
  DType dtype = DType::Float32;
  Shape shape;  // global
  std::vector<PieceLocation> pieces;
};

// A complete save, opened for reading. Opening reads `latest` (or takes a step directory
// itself), parses index.json and checks its checksum, its format version and that each
// tensor's pieces cover it exactly once; reads check each shard's header and each piece's
// checksum. Every error names the file, the tensor and what was expected.
class ShardedCheckpoint {
 public:
  // `path`: a checkpoint directory with a `latest` file, or one of its step directories.
  static ShardedCheckpoint open(const std::string& path);
  // True when `path` looks like a sharded checkpoint (a `latest` file or an index.json of
  // this format): how callers tell it from the older formats.
  static bool is_sharded(const std::string& path);

  const std::string& directory() const { return directory_; }  // the step directory
  int64_t step() const { return step_; }
  const std::string& save_id() const { return save_id_; }
  int world_size() const { return static_cast<int>(rank_metadata_.size()); }
  const Metadata& metadata() const { return metadata_; }
  const Metadata& rank_metadata(int rank) const;
  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorEntry& tensor(const std::string& name) const;  // error names a missing tensor
  // The shard files the index lists (one per saving rank, in the step directory), by name.
  std::vector<std::string> files() const;

  // Fills `dest` (region.numel() elements, contiguous CPU, any floating or integer dtype:
  // values are converted) with `region` of tensor `name`. `expected_shape` is the global
  // shape the caller's model has: a different one is an error naming both.
  void read(const std::string& name, const Shape& expected_shape, const Region& region, Tensor& dest) const;
  // The whole tensor in its stored dtype.
  Tensor read_whole(const std::string& name) const;

  // Reads every piece and checks every checksum and every shard file's size and header
  // (coverage was checked by open()). Returns the problems found (empty: all good).
  std::vector<std::string> verify() const;

 private:
  std::string directory_;
  int64_t step_ = 0;
  std::string save_id_;
  Metadata metadata_;
  std::vector<Metadata> rank_metadata_;
  std::map<std::string, TensorEntry> tensors_;
  std::map<std::string, uint32_t> file_header_crc_;
  std::map<std::string, uint64_t> file_bytes_;     // each shard file's size at the save, where recorded
  mutable std::set<std::string> headers_checked_;  // files whose header matched the index
  // The piece read last (file, first byte) and its checked bytes: the sections of a fused
  // tensor-parallel projection ask for parts of one piece in turn.
  mutable std::pair<std::string, uint64_t> last_piece_key_;
  mutable Tensor last_piece_;
  // Throws naming the file when its size or its header differs from what the index recorded
  // (bytes appended, a truncated file, a shard of another save, or a replaced file).
  void check_header(const std::string& file) const;
};

}  // namespace strata::checkpoint
