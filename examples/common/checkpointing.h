#pragma once
// How the example trainers keep and restore a training state: the options --save,
// --save-every, --keep-last, --async-save, --resume, --resume-latest, --stop-at, --init-from
// and --export-hf, their validation, and the steps of a run that use them (start from a
// checkpoint's weights, resume, save every N steps and at the end, in the background on
// request). The format is train/distributed_checkpoint.h's: a save loads into any layout.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "strata/checkpoint/directory_lock.h"
#include "strata/distributed/process_group.h"
#include "strata/train/async_checkpointer.h"
#include "strata/train/distributed_checkpoint.h"

namespace strata::examples {

struct CheckpointOptions {
  std::string save;  // checkpoint directory; empty: no saves
  int64_t save_every = 0;
  int64_t keep_last = 2;
  bool async_save = false;
  bool resume_latest = false;
  int64_t stop_at = 0;  // 0: run to --steps
  std::string resume;
  std::string init_from;
  std::string export_hf;
};

// Registers the options above. `export_format` names what --export-hf writes ("HF GPT-2");
// `resume_help` describes what --resume accepts.
void add_checkpoint_options(CLI::App& app, CheckpointOptions& o, const std::string& export_format,
                            const std::string& resume_help);

// Bad values and combinations fail before anything starts, naming the option.
void validate_checkpoint_options(const CheckpointOptions& o);

// The step this run ends at: --stop-at when it comes before --steps.
int64_t end_step(const CheckpointOptions& o, int64_t steps);

class Checkpointing {
 public:
  // Collective, before the model is built: rank 0 checks that --export-hf and --save can be
  // written, so that a bad path fails before any training, and locks --save for the run.
  Checkpointing(const CheckpointOptions& o, dist::ProcessGroup& world);
  Checkpointing(const Checkpointing&) = delete;
  Checkpointing& operator=(const Checkpointing&) = delete;

  // The training state that saves and loads read and write (it must outlive this object).
  void attach(const train::CheckpointTarget& target);

  // Collective. --init-from: the checkpoint's weights (any layout); the optimizer, data order
  // and schedule start fresh. No-op without it.
  void init_weights();
  // Collective. --resume / --resume-latest: restores the training state and returns its step
  // (0: a fresh start). A state saved after the end of this run (`steps`, --stop-at) is
  // refused: a save would label its weights with an earlier step. A single file (an earlier
  // strata's training state) is refused, naming the `strata-ckpt convert` that reads it.
  int64_t resume(int64_t steps);
  // Collective, after every step (`completed` steps done): commits a finished background
  // save, and saves every --save-every steps.
  void after_step(int64_t completed);
  // Collective, after the last step: saves (unless that step was just saved) and waits for a
  // background save to be complete.
  void finish(int64_t completed);
  // Collective, when a run stops early on an error every rank saw alike (a non-finite loss):
  // completes a background save of an earlier step, so that it is not lost, and saves nothing.
  void complete_pending();
  // After finish(`end`): true when --stop-at ended the run before all `steps` (rank 0 says
  // so), and the run skips what comes after its last step (final evaluation, export).
  bool stopped_early(int64_t end, int64_t steps) const;
  // Collective, at the end of a run: --export-hf writes the whole model's weights (gathered
  // from ZeRO-3 shards and tensor-parallel parts) with the attached configuration, in Hugging
  // Face's layout, from rank 0; `trainer` names the program in errors, `format` the model
  // type in the message ("GPT-2"). No-op without --export-hf.
  void export_hf(const std::string& trainer, const std::string& format) const;

 private:
  void save(int64_t completed);
  void report(const std::optional<checkpoint::SaveResult>& r) const;

  const CheckpointOptions& o_;
  dist::ProcessGroup& world_;
  bool lead_;
  std::optional<train::CheckpointTarget> target_;
  checkpoint::DirectoryLock save_lock_;  // rank 0 holds --save's lock until the run ends
  std::unique_ptr<train::AsyncCheckpointer> async_;
  int64_t last_saved_ = -1;
};

}  // namespace strata::examples
