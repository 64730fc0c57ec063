#pragma once
// Asynchronous training checkpoints: the step that saves pays for a copy of this rank's part
// of the training state; a background thread writes and fsyncs the shard file while training
// goes on, and a later step boundary commits the save (index.json, rename, `latest`) once every
// rank's file is written. The format and the crash safety are save_training_checkpoint's.
//
//   train::AsyncCheckpointer ckpt("runs/ckpt", world);
//   for (step ...) {
//     ... train the step ...
//     ckpt.poll();                                  // every step, on every rank
//     if (step % 100 == 0) ckpt.save(target, step);  // returns after the snapshot
//   }
//   ckpt.finish();                                  // the last save is complete
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "strata/checkpoint/sharded.h"
#include "strata/train/distributed_checkpoint.h"

namespace strata::train {

class AsyncCheckpointer {
 public:
  // Saves go to `dir` (shared by the ranks of `world`, which every collective call spans).
  AsyncCheckpointer(std::string dir, dist::ProcessGroup& world, checkpoint::SaveOptions options = {});
  // Not collective: waits for the background write, then abandons an uncommitted save (its
  // temporary directory is removed by the next save into `dir`). Call finish() to keep it.
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Collective, at a step boundary: completes a save still pending (waiting for it), copies
  // this rank's part of the training state and starts writing it in the background.
  void save(const CheckpointTarget& target, int64_t step, const checkpoint::Metadata& extra = {});
  // Collective, once per step: commits the pending save when every rank has written its file
  // and returns its result. Costs one 8-byte all_reduce while a save is pending, nothing
  // otherwise. A failed save throws on every rank (the previous saves are kept).
  std::optional<checkpoint::SaveResult> poll();
  // Collective: waits for the pending save (if any) and commits it.
  std::optional<checkpoint::SaveResult> finish();
  bool pending() const { return pending_ != nullptr; }
  // Seconds the last save() spent before returning (the snapshot: what a step pays).
  double last_snapshot_seconds() const { return last_snapshot_seconds_; }

 private:
  struct Pending;
  std::optional<checkpoint::SaveResult> commit();

  std::string dir_;
  dist::ProcessGroup& world_;
  checkpoint::SaveOptions options_;
  std::unique_ptr<Pending> pending_;
  double last_snapshot_seconds_ = 0;
};

}  // namespace strata::train
