#pragma once
// Collectives over text (JSON descriptions, error messages) rather than tensors: process
// groups move numbers, so the bytes travel in int64 words, lengths first.
#include <string>
#include <vector>

#include "strata/distributed/process_group.h"

namespace strata::dist {

// Collective: every rank's `text`, indexed by group rank, on every rank.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text);
// Collective: `root`'s text on every rank (the others' argument is ignored).
std::string broadcast_string(ProcessGroup& group, const std::string& text, int root = 0);

// Collective: every rank learns whether all succeeded (`error` empty). A failing rank throws
// "<what>: <its error>"; the others throw "<what>: rank <r> failed (see its error)" naming the
// lowest failing rank. Returns normally only when every rank passed an empty error.
void agree_on_success(ProcessGroup& group, const std::string& error, const std::string& what);

}  // namespace strata::dist
