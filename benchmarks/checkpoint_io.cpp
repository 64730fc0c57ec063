// Checkpoint I/O bandwidth: under mpirun -np N, every rank holds --mb MB of float32 state as
// --tensors global tensors of which it owns one disjoint flat range each (Region::flat), the
// way ZeRO shards are described. Each repetition:
//   save  take_snapshot, then save_sharded (keep_last 1, so the disk does not fill);
//         per rank bytes_written / write_seconds (its shard file, to fsync), and the
//         aggregate: all ranks' bytes / the slowest rank's total_seconds (the whole
//         collective: index, renames, directory fsyncs, pruning the previous save)
//   load  after dropping the page cache (rank 0, when permitted), ShardedCheckpoint::open
//         and read of the rank's own pieces into preallocated tensors; per rank bytes /
//         seconds, and the aggregate over the slowest rank
// Prints one machine-readable line per repetition and rank ("rep=... rank=..."), then the
// best and median of each figure. benchmarks/run_checkpoint_io.sh runs it beside dd.
// One untimed repetition comes first: on a VM, the first touch of guest memory that the host
// has not backed yet (the state, the snapshot, new page-cache pages) can run several times
// slower than the disk and would be timed as checkpoint I/O.
//   bench_checkpoint_io [--dir D] [--mb 256] [--tensors 8] [--reps 5] [--warmup 1] [--no-drop-caches]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "strata/checkpoint/sharded.h"
#include "strata/distributed/init.h"
#include "strata/strata.h"

using namespace strata;
using bench::median;
using checkpoint::Region;

namespace {

struct Options {
  std::string dir = "ckpt-io-bench";
  int64_t mb = 256;  // per rank, 1 MB = 1e6 bytes
  int tensors = 8;
  int reps = 5;
  int warmup = 1;  // untimed repetitions first (see the note on first touches above)
  bool drop_caches = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--dir" && has_value) o.dir = argv[++i];
    else if (a == "--mb" && has_value) o.mb = std::atoll(argv[++i]);
    else if (a == "--tensors" && has_value) o.tensors = std::atoi(argv[++i]);
    else if (a == "--reps" && has_value) o.reps = std::atoi(argv[++i]);
    else if (a == "--warmup" && has_value) o.warmup = std::atoi(argv[++i]);
    else if (a == "--no-drop-caches") o.drop_caches = false;
    else {
      std::fprintf(stderr, "usage: %s [--dir D] [--mb MB] [--tensors K] [--reps R] [--warmup W] [--no-drop-caches]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  STRATA_CHECK(o.mb > 0 && o.tensors > 0 && o.reps > 0 && o.warmup >= 0, "--mb, --tensors and --reps must be positive");
  return o;
}

// One global tensor [rows, 1024] of which this rank owns elements [begin, end).
struct Piece {
  std::string name;
  Shape shape;
  Region region;
  Tensor data;  // what is saved
  Tensor back;  // what is read into
};

std::vector<Piece> make_pieces(const Options& o, int rank, int world) {
  constexpr int64_t kCols = 1024;
  const int64_t per_tensor = o.mb * 1000000 / 4 / o.tensors / kCols * kCols;  // this rank's elements
  STRATA_CHECK(per_tensor > 0, "--mb too small for --tensors");
  Generator gen(1234 + static_cast<uint64_t>(rank));
  std::vector<Piece> pieces;
  for (int k = 0; k < o.tensors; ++k) {
    const Shape shape{world * per_tensor / kCols, kCols};
    const Region region = Region::flat(shape, rank * per_tensor, (rank + 1) * per_tensor);
    // Random values: zero pages could flatter a filesystem or disk that compresses.
    pieces.push_back(
        {"layer" + std::to_string(k) + ".weight", shape, region, randn({per_tensor}, {}, &gen), zeros({per_tensor})});
  }
  return pieces;
}

// sync, then drop clean page-cache pages so that the load reads the disk. Needs root.
bool drop_page_cache() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "3\n";
  f.flush();
  return static_cast<bool>(f);
}

// This rank's figures of one repetition, in the order of kFields.
constexpr const char* kFields[] = {"bytes", "write_s", "save_s", "snapshot_s", "load_s"};
constexpr int kNumFields = 5;

std::vector<double> run_once(const Options& o, dist::ProcessGroup& world, std::vector<Piece>& pieces, int64_t step,
                             bool& dropped) {
  std::vector<checkpoint::SavePiece> save;
  for (const Piece& p : pieces) save.push_back({p.name, p.shape, p.region, p.data});
  world.barrier()->wait();
  auto t0 = bench::Clock::now();
  const checkpoint::SaveSnapshot snap = checkpoint::take_snapshot(step, save);
  const double snapshot_s = bench::ms_since(t0) / 1e3;
  const checkpoint::SaveResult r = checkpoint::save_sharded(o.dir, world, snap, {.keep_last = 1});

  // The page cache holds the shards just written: drop it (rank 0, once for the machine).
  Tensor ok = zeros({1}, {.dtype = DType::Int64});
  if (o.drop_caches && world.rank() == 0) ok.data<int64_t>()[0] = drop_page_cache() ? 1 : 0;
  world.broadcast(ok, 0)->wait();
  dropped = ok.data<int64_t>()[0] != 0;
  world.barrier()->wait();
  t0 = bench::Clock::now();
  const checkpoint::ShardedCheckpoint c = checkpoint::ShardedCheckpoint::open(o.dir);
  for (Piece& p : pieces) c.read(p.name, p.shape, p.region, p.back);
  const double load_s = bench::ms_since(t0) / 1e3;
  for (const Piece& p : pieces)
    STRATA_CHECK(std::memcmp(p.back.raw_data(), p.data.raw_data(), p.data.nbytes()) == 0, "tensor '", p.name,
                 "' read back differs from what was saved");
  return {static_cast<double>(r.bytes_written), r.write_seconds, r.total_seconds, snapshot_s, load_s};
}

void print_summary(const char* what, const std::vector<double>& mbps) {
  std::vector<double> sorted = mbps;
  std::sort(sorted.begin(), sorted.end());
  std::printf("  %-28s best %8.1f  median %8.1f MB/s\n", what, sorted.back(), median(mbps));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  auto& world = dist::init();
  const int n = world.size();
  std::vector<Piece> pieces = make_pieces(o, world.rank(), n);
  std::vector<double> rank_save, agg_save, rank_load, agg_load;
  bool dropped = false;
  for (int w = 0; w < o.warmup; ++w) run_once(o, world, pieces, w, dropped);
  for (int rep = 0; rep < o.reps; ++rep) {
    Tensor mine = from_vector(run_once(o, world, pieces, o.warmup + rep, dropped), {kNumFields});
    Tensor all = zeros({kNumFields * n}, {.dtype = DType::Float64});
    world.all_gather(all, mine)->wait();
    if (world.rank() != 0) continue;
    const double* f = all.data<double>();
    double bytes = 0, save_s = 0, load_s = 0;
    for (int r = 0; r < n; ++r) {
      const double* x = f + kNumFields * r;
      std::printf("rep=%d rank=%d", rep, r);
      for (int k = 0; k < kNumFields; ++k) std::printf(" %s=%.6g", kFields[k], x[k]);
      std::printf(" write_mbps=%.1f load_mbps=%.1f\n", x[0] / x[1] / 1e6, x[0] / x[4] / 1e6);
      rank_save.push_back(x[0] / x[1] / 1e6);
      rank_load.push_back(x[0] / x[4] / 1e6);
      bytes += x[0];
      save_s = std::max(save_s, x[2]);
      load_s = std::max(load_s, x[4]);
    }
    agg_save.push_back(bytes / save_s / 1e6);
    agg_load.push_back(bytes / load_s / 1e6);
    std::printf("rep=%d aggregate save_mbps=%.1f load_mbps=%.1f\n", rep, agg_save.back(), agg_load.back());
    std::fflush(stdout);
  }
  if (world.rank() == 0) {
    std::printf("checkpoint I/O: %d ranks x %lld MB in %d tensors, %d reps, dir %s; page cache %s before loads\n", n,
                static_cast<long long>(o.mb), o.tensors, o.reps, o.dir.c_str(),
                dropped ? "dropped" : "NOT dropped (loads are cache-warm)");
    print_summary("save, per rank (write)", rank_save);
    print_summary("save, aggregate (collective)", agg_save);
    print_summary("load, per rank", rank_load);
    print_summary("load, aggregate", agg_load);
    std::printf("drop_caches=%d\n", dropped ? 1 : 0);
  }
  dist::finalize();
  return 0;
}
