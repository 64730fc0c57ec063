#include "strata/train/async_checkpointer.h"

#include <chrono>

#include "strata/distributed/object_collectives.h"
#include "strata/distributed/process_group.h"
#include "strata/tensor/factory.h"

namespace strata::train {

// One save in flight: the snapshot the thread writes from, and what it wrote.
struct AsyncCheckpointer::Pending {
  checkpoint::SaveTicket ticket;
  checkpoint::SaveSnapshot snapshot;
  checkpoint::ShardWrite write;
  std::atomic<bool> written{false};
  std::thread thread;
};

AsyncCheckpointer::AsyncCheckpointer(std::string dir, dist::ProcessGroup& world, checkpoint::SaveOptions options)
    : dir_(std::move(dir)), world_(world), options_(options) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (pending_ && pending_->thread.joinable()) pending_->thread.join();
}

void AsyncCheckpointer::save(const CheckpointTarget& target, int64_t step, const checkpoint::Metadata& extra) {
  finish();
  const auto start = std::chrono::steady_clock::now();
  auto p = std::make_unique<Pending>();
  p->ticket = checkpoint::begin_save(dir_, world_, step, options_);
  std::string error;
  try {
    p->snapshot = snapshot_training_state(target, step, extra);
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(world_, error, "AsyncCheckpointer::save '" + dir_ + "' (step " + std::to_string(step) + ")");
  Pending* raw = p.get();
  const int rank = world_.rank();
  p->thread = std::thread([raw, rank] {
    raw->write = checkpoint::write_shard(raw->ticket, rank, raw->snapshot);
    raw->written.store(true, std::memory_order_release);
  });
  pending_ = std::move(p);
  last_snapshot_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::optional<checkpoint::SaveResult> AsyncCheckpointer::poll() {
  if (!pending_) return std::nullopt;
  // The save commits when the slowest rank has written: every rank must agree on when.
  Tensor all_written =
      full({1}, pending_->written.load(std::memory_order_acquire) ? 1.0 : 0.0, {.dtype = DType::Int64});
  if (world_.size() > 1) world_.all_reduce(all_written, dist::ReduceOp::Min)->wait();
  if (all_written.to_vector<int64_t>()[0] == 0) return std::nullopt;
  return commit();
}

std::optional<checkpoint::SaveResult> AsyncCheckpointer::finish() {
  if (!pending_) return std::nullopt;
  return commit();
}

std::optional<checkpoint::SaveResult> AsyncCheckpointer::commit() {
  std::unique_ptr<Pending> p = std::move(pending_);
  p->thread.join();
  return checkpoint::finish_save(p->ticket, world_, p->snapshot, p->write, options_);
}

}  // namespace strata::train
