// ZeroOptimizer's side of layout-independent checkpoints (train/distributed_checkpoint.h):
// which parameter ranges this rank's inner optimizer updates, and refreshing the compute
// parameters after their master weights were loaded.
#include <map>

#include "parallel/data_parallel_state.h"
#include "strata/autograd/grad_mode.h"

namespace strata::parallel {
namespace {

using State = DataParallelState;

// The pieces of `s`'s buckets, numbered by `inner_index` (the inner optimizer's numbering).
void append_owned_pieces(const State& s, const std::map<const void*, int64_t>& inner_index,
                         std::vector<ZeroOptimizer::OwnedPiece>& out) {
  for (const State::Bucket& b : s.buckets) {
    const std::vector<FlatBuffer::Piece> pieces =
        s.options.stage >= 1 ? b.param->pieces(s.rank) : std::vector<FlatBuffer::Piece>{};
    for (size_t k = 0; k < b.pieces.size(); ++k) {
      const Tensor& master = b.pieces[k];
      const FlatBuffer::Entry* entry = nullptr;
      int64_t offset = 0;
      if (s.options.stage >= 1) {
        entry = &b.param->entries()[pieces[k].entry];
        offset = pieces[k].entry_offset;
      } else {
        // Stage 0: piece k is entry k, whole.
        entry = &b.param->entries()[k];
      }
      out.push_back({.name = entry->name,
                     .offset = offset,
                     .numel = master.numel(),
                     .master = master,
                     .inner_index = inner_index.at(master.data_ptr())});
    }
  }
}

}  // namespace

std::vector<ZeroOptimizer::OwnedPiece> ZeroOptimizer::owned_pieces() const {
  // The inner optimizer numbers its parameters group by group.
  std::map<const void*, int64_t> inner_index;
  int64_t next = 0;
  for (const optim::ParamGroup& g : state_->inner->param_groups())
    for (const Tensor& p : g.params) inner_index[p.data_ptr()] = next++;
  std::vector<OwnedPiece> out;
  for (const State* s : states()) append_owned_pieces(*s, inner_index, out);
  return out;
}

void ZeroOptimizer::reload_parameters_from_master() {
  NoGradGuard no_grad;
  std::vector<dist::WorkPtr> works;
  for (State* s : states()) {
    for (State::Bucket& bk : s->buckets) {
      if (bk.master_separate) (s->options.stage == 0 ? bk.param->data() : bk.param_shard).copy_(bk.master);
      if (s->options.stage == 1 || s->options.stage == 2) {
        Tensor full_params = bk.param->data();
        works.push_back(s->group->all_gather(full_params, bk.param_shard));
      }
    }
  }
  for (auto& w : works) w->wait();
  zero_grad();
}

}  // namespace strata::parallel
