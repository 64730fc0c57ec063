#pragma once
// The saves a checkpoint directory holds ("<dir>/step-<step>-<id>/", docs/checkpoint-format.md)
// and which of them a run that resumes "if present" continues from.
#include <cstdint>
#include <string>
#include <vector>

namespace strata::dist {
class ProcessGroup;
}

namespace strata::checkpoint {

struct SaveEntry {
  std::string name;  // "step-<step>-<id>"
  int64_t step = 0;
  bool complete = false;  // holds index.json (save_sharded renames a save into place only then)
};

// Every "step-<step>-<id>" directory in `dir`, highest step first (equal steps: the newest
// directory first). Empty when `dir` does not exist or cannot be read.
std::vector<SaveEntry> list_saves(const std::string& dir);

// Step number of a "step-<step>-<id>" name; -1 for any other name.
int64_t save_step(const std::string& name);

// The saves in `dir` of a higher step than `step`. A save never removes them (a run that
// resumed from an older save must not delete newer progress), so after a save of `step` into
// `dir`, `latest` names an older step than these: callers say so (train_gpt prints a note).
std::vector<std::string> newer_saves(const std::string& dir, int64_t step);

// Collective over `group` (rank 0 looks, every rank gets the answer): where a run resuming from
// `dir` if it holds a checkpoint (train_gpt --resume-latest) starts.
//   - `dir` itself when it has a `latest` file (load_training_checkpoint follows it);
//   - when `latest` is missing but complete saves are there, the newest one that opens and
//     verifies (every checksum is read: this costs a full read of the save); `note` (rank 0)
//     then says which, and why newer ones were passed over;
//   - "" when `dir` holds no complete save: a fresh start.
// Throws, naming every save and its problem, when there are complete saves and none verifies:
// starting afresh would train from step 0 and its saves would prune the ones there.
std::string resume_latest_path(const std::string& dir, dist::ProcessGroup& group, std::string* note = nullptr);

}  // namespace strata::checkpoint
