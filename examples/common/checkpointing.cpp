#include "common/checkpointing.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/full_weights.h"
#include "common/preflight.h"
#include "common/train_options.h"
#include "strata/checkpoint/save_directory.h"
#include "strata/core/error.h"
#include "strata/train/model_registry.h"

namespace strata::examples {

void add_checkpoint_options(CLI::App& app, CheckpointOptions& o, const std::string& export_format,
                            const std::string& resume_help) {
  const CLI::Validator& fits = fits_int64();
  app.add_option("--save", o.save,
                 "checkpoint directory: step-<N>-<id>/ saves (each rank writes its part) and a "
                 "'latest' file naming the newest complete one; loads into any layout; stores the model configuration; "
                 "locked while the run lasts (.save.lock)");
  app.add_option("--save-every", o.save_every, "save every N steps (and at the end)")->check(fits);
  app.add_flag("--async-save", o.async_save,
               "write checkpoints in the background: a save costs the step a copy of "
               "this rank's state; the save is complete once every rank has written (a later step)");
  app.add_option("--keep-last", o.keep_last, "complete saves kept in --save")->capture_default_str()->check(fits);
  app.add_flag("--resume-latest", o.resume_latest,
               "resume from --save when it holds a complete checkpoint (without "
               "'latest': its newest save that verifies), else start fresh (for restarts)");
  app.add_option("--stop-at", o.stop_at,
                 "stop after this step, keeping the schedule of --steps (for jobs in time slices)")
      ->check(fits);
  app.add_option("--resume", o.resume, resume_help);
  app.add_option("--init-from", o.init_from,
                 "start from the weights of this checkpoint (any layout; e.g. a Hugging "
                 "Face model imported with `strata-ckpt import`); optimizer, data and schedule start fresh");
  app.add_option("--export-hf", o.export_hf, "directory for model.safetensors + config.json (" + export_format + ")");
}

void validate_checkpoint_options(const CheckpointOptions& o) {
  check_not_negative({{"--save-every", o.save_every}, {"--stop-at", o.stop_at}});
  check_at_least_one({{"--keep-last", o.keep_last}});
  // SaveOptions counts in an int: a larger value would wrap and prune saves it should keep.
  STRATA_CHECK(o.keep_last <= std::numeric_limits<int>::max(), "--keep-last ", o.keep_last, " is too large (at most ",
               std::numeric_limits<int>::max(), ")");
  STRATA_CHECK(!o.resume_latest || !o.save.empty(), "--resume-latest resumes from the --save directory: pass --save");
  STRATA_CHECK(!o.resume_latest || o.resume.empty(), "pass either --resume or --resume-latest");
  STRATA_CHECK(o.init_from.empty() || (o.resume.empty() && !o.resume_latest),
               "--init-from starts a new run from a checkpoint's weights: it excludes --resume and --resume-latest");
  STRATA_CHECK(o.save.empty() || !std::filesystem::is_regular_file(o.save), "--save '", o.save,
               "' is a file (a single-file training state of an earlier strata?): checkpoints are now directories; "
               "pass a new path");
}

int64_t end_step(const CheckpointOptions& o, int64_t steps) {
  return o.stop_at > 0 ? std::min(o.stop_at, steps) : steps;
}

Checkpointing::Checkpointing(const CheckpointOptions& o, dist::ProcessGroup& world)
    : o_(o), world_(world), lead_(world.rank() == 0) {
  if (lead_ && !o.export_hf.empty()) check_writable_dir(o.export_hf, "--export-hf");
  // The directory itself, not only its parent: an existing read-only one fails now, not at the
  // first save. The lock (rank 0, until the run ends) keeps a second run from saving there; it
  // is taken before resume reads the directory.
  if (lead_ && !o.save.empty()) check_writable_dir(o.save, "--save");
  if (!o.save.empty()) save_lock_ = checkpoint::DirectoryLock::collective(o.save, world);
  if (o.async_save && !o.save.empty()) {
    const checkpoint::SaveOptions options{.keep_last = static_cast<int>(o.keep_last)};
    async_ = std::make_unique<train::AsyncCheckpointer>(o.save, world, options);
  }
}

void Checkpointing::attach(const train::CheckpointTarget& target) { target_.emplace(target); }

void Checkpointing::init_weights() {
  if (o_.init_from.empty()) return;
  STRATA_CHECK(target_.has_value(), "Checkpointing::init_weights before attach()");
  train::load_training_checkpoint(o_.init_from, *target_, nullptr, {.weights_only = true});
  if (lead_) std::printf("initialised the weights from %s\n", o_.init_from.c_str());
}

int64_t Checkpointing::resume(int64_t steps) {
  // --resume-latest on an empty --save directory is a fresh start; without `latest` but with
  // saves there, the newest that verifies (never step 0 beside them). Collective.
  std::string path = o_.resume;
  if (o_.resume_latest) {
    std::string note;
    path = checkpoint::resume_latest_path(o_.save, world_, &note);
    if (lead_ && !note.empty()) std::printf("%s\n", note.c_str());
  }
  if (path.empty()) return 0;
  STRATA_CHECK(target_.has_value(), "Checkpointing::resume before attach()");
  STRATA_CHECK(!std::filesystem::is_regular_file(path), "'", path,
               "' is a single-file training state (an earlier "
               "strata's format); convert it once with `strata-ckpt convert ",
               path,
               " --out DIR` and resume from DIR, "
               "which loads into any layout");
  const int64_t start = train::load_training_checkpoint(path, *target_);
  // Training from `start` to an earlier end would save weights of step `start` labelled
  // with the earlier step (and a later resume would repeat the steps in between).
  const int64_t end = end_step(o_, steps);
  STRATA_CHECK(start <= end, "'", path, "' was saved at step ", start, ", after the requested end (",
               o_.stop_at > 0 && o_.stop_at < steps ? "--stop-at " : "--steps ", end,
               "): nothing to train, and a save would label step-", start, " weights as step ", end,
               "; pass --steps/--stop-at of at least ", start);
  if (target_->scheduler != nullptr) target_->scheduler->set_last_step(start);
  if (lead_) std::printf("resumed from %s at step %lld\n", path.c_str(), static_cast<long long>(start));
  return start;
}

void Checkpointing::report(const std::optional<checkpoint::SaveResult>& r) const {
  if (!r || !lead_) return;
  std::printf("saved %s (%.1f MB on this rank, written in %.2f s)\n", r->directory.c_str(),
              static_cast<double>(r->bytes_written) / 1e6, r->write_seconds);
  // A run resumed from an older save keeps the newer ones (a save never prunes them): say so.
  const std::string step = std::filesystem::path(r->directory).filename().string();
  for (const std::string& newer : checkpoint::newer_saves(o_.save, checkpoint::save_step(step)))
    std::printf(
        "note: %s/latest names %s, an older step than %s, which is kept (this run resumed from an older "
        "save)\n",
        o_.save.c_str(), step.c_str(), newer.c_str());
}

void Checkpointing::save(int64_t completed) {
  if (o_.save.empty() || completed == last_saved_) return;
  STRATA_CHECK(target_.has_value(), "Checkpointing::save before attach()");
  last_saved_ = completed;
  if (async_) {
    async_->save(*target_, completed);  // returns after the snapshot; poll() commits it
  } else {
    report(train::save_training_checkpoint(o_.save, *target_, completed, {},
                                           {.keep_last = static_cast<int>(o_.keep_last)}));
  }
}

void Checkpointing::after_step(int64_t completed) {
  if (async_) report(async_->poll());
  if (o_.save_every > 0 && completed % o_.save_every == 0) save(completed);
}

void Checkpointing::finish(int64_t completed) {
  save(completed);
  if (async_) report(async_->finish());
}

void Checkpointing::complete_pending() {
  if (async_) report(async_->finish());
}

bool Checkpointing::stopped_early(int64_t end, int64_t steps) const {
  if (end >= steps) return false;
  if (lead_)
    std::printf("stopped at step %lld of %lld (--stop-at)\n", static_cast<long long>(end),
                static_cast<long long>(steps));
  return true;
}

void Checkpointing::export_hf(const std::string& trainer, const std::string& format) const {
  if (o_.export_hf.empty()) return;
  STRATA_CHECK(target_.has_value(), "Checkpointing::export_hf before attach()");
  const StateDict weights = full_weights(target_->model, target_->tensor, target_->zero);  // collective
  if (!lead_) return;
  train::family_of(target_->config, trainer).export_hf(o_.export_hf, weights, target_->config, trainer);
  std::printf("exported Hugging Face %s weights to %s\n", format.c_str(), o_.export_hf.c_str());
}

}  // namespace strata::examples
