// all_reduce, all_gather and reduce_scatter of float32 buffers through strata's world
// ProcessGroup and through the raw MPI calls (MPI_Allreduce in place, MPI_Allgather,
// MPI_Reduce_scatter_block) in the same run, alternating iteration by iteration so that
// both see the same machine. Run it under mpirun or srun (benchmarks/run_collectives.sh).
//
// Per op and size it prints the median time (each iteration starts after a barrier and
// counts the slowest rank), algbw and busbw as nccl-tests define them, and strata/raw of
// busbw (above 1: strata is faster):
//   S      = the full buffer in bytes (all_reduce: the buffer; all_gather: the gathered
//            output; reduce_scatter: the input), rounded down to a multiple of 4 x ranks
//   algbw  = S / time
//   busbw  = algbw x 2(n-1)/n (all_reduce), algbw x (n-1)/n (all_gather, reduce_scatter)
// Before timing, every op and size is run once on known values and the result checked.
//
// Built with STRATA_BENCH_RAW_ONLY (CMake does so while src/distributed/mpi/ does not exist yet)
// it times only the raw MPI half.
//
// --compare-flat (strata only): for groups over several nodes (docs/distributed.md,
// "Hierarchical collectives"), times strata twice beside raw MPI, on two copies of the world
// made with STRATA_MPI_HIERARCHICAL=0 (flat ring) and as the environment says (the automatic
// choice: hierarchical), and prints both with ratios hier/raw and hier/flat.
//
// --late-peer-ms T (strata only) then measures what the MPI worker costs while it waits:
// rank 0 enters a 4 MiB all_reduce that the last rank joins T ms late, and prints the CPU
// time rank 0's process used meanwhile (its main thread sleeps in wait()).
//
//   bench_collectives [--min-bytes B] [--max-bytes B] [--factor F] [--iters N] [--warmup N]
//                     [--ops all_reduce,all_gather,reduce_scatter] [--raw-only]
//                     [--compare-flat] [--late-peer-ms T]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#ifndef STRATA_BENCH_RAW_ONLY
#include "strata/distributed/init.h"
#include "strata/tensor/factory.h"
#endif

namespace {

enum class Op { AllReduce, AllGather, ReduceScatter };

const char* op_name(Op op) {
  switch (op) {
    case Op::AllReduce: return "all_reduce";
    case Op::AllGather: return "all_gather";
    case Op::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

// nccl-tests' bus bandwidth factor: what each rank's link carries relative to S / time.
double bus_factor(Op op, int n) { return op == Op::AllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n; }

struct Options {
  int64_t min_bytes = 4 << 10;
  int64_t max_bytes = 64 << 20;
  int64_t factor = 4;
  int iters = 0;  // 0: by size (see iterations_for)
  int warmup = 3;
  bool strata = true;
  bool compare_flat = false;
  int late_peer_ms = 0;
  std::vector<Op> ops = {Op::AllReduce, Op::AllGather, Op::ReduceScatter};
};

int iterations_for(const Options& o, int64_t bytes) {
  if (o.iters > 0) return o.iters;
  return bytes <= (1 << 20) ? 50 : bytes <= (16 << 20) ? 20 : 10;
}

// Parses the command line; returns an error message or "".
std::string parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--raw-only") {
      o.strata = false;
      continue;
    }
    if (k == "--compare-flat") {
      o.compare_flat = true;
      continue;
    }
    if (i + 1 >= argc) return k + " needs a value";
    const std::string v = argv[++i];
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    const bool is_int = end && *end == '\0' && !v.empty();
    if (k == "--min-bytes" && is_int && x > 0) o.min_bytes = x;
    else if (k == "--max-bytes" && is_int && x > 0) o.max_bytes = x;
    else if (k == "--factor" && is_int && x >= 2) o.factor = x;
    else if (k == "--iters" && is_int && x > 0) o.iters = static_cast<int>(x);
    else if (k == "--warmup" && is_int && x >= 0) o.warmup = static_cast<int>(x);
    else if (k == "--late-peer-ms" && is_int && x >= 0) o.late_peer_ms = static_cast<int>(x);
    else if (k == "--ops") {
      o.ops.clear();
      size_t start = 0;
      while (start <= v.size()) {
        const size_t comma = std::min(v.find(',', start), v.size());
        const std::string name = v.substr(start, comma - start);
        if (name == "all_reduce") o.ops.push_back(Op::AllReduce);
        else if (name == "all_gather") o.ops.push_back(Op::AllGather);
        else if (name == "reduce_scatter") o.ops.push_back(Op::ReduceScatter);
        else return "unknown op '" + name + "' in --ops (all_reduce, all_gather, reduce_scatter)";
        start = comma + 1;
      }
    } else {
      return "bad option or value: " + k + " " + v;
    }
  }
  if (o.min_bytes > o.max_bytes) return "--min-bytes is larger than --max-bytes";
  return "";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// One timed call: a barrier, the op, and the slowest rank's time.
double timed(const std::function<void()>& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  op();
  double dt = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

// 64-byte aligned float buffers for the raw half (strata's CPU allocator aligns the same).
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;
Buffer make_buffer(int64_t n) {
  const size_t bytes = (static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) {
    std::fprintf(stderr, "bench_collectives: cannot allocate %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return Buffer(p);
}

// Known inputs and the exact expected outputs (small integers: exact in float32).
//   all_reduce:     rank r, element i: r + 1 + (i % 7)      -> n(n+1)/2 + n (i % 7)
//   all_gather:     global element i: i % 4096              -> i % 4096
//   reduce_scatter: rank r, element i: r + (i % 1024)       -> n(n-1)/2 + n (i % 1024)
void fill_input(Op op, float* in, int64_t count, int64_t offset, int r) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t g = offset + i;
    in[i] = op == Op::AllReduce   ? static_cast<float>(r + 1 + g % 7)
            : op == Op::AllGather ? static_cast<float>(g % 4096)
                                  : static_cast<float>(r + g % 1024);
  }
}
float expected_output(Op op, int64_t g, int n) {
  return op == Op::AllReduce   ? static_cast<float>(n * (n + 1) / 2 + n * (g % 7))
         : op == Op::AllGather ? static_cast<float>(g % 4096)
                               : static_cast<float>(n * (n - 1) / 2 + n * (g % 1024));
}
// Number of wrong output elements; `offset` is the global index of out[0].
int64_t count_wrong(Op op, const float* out, int64_t count, int64_t offset, int n) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += out[i] != expected_output(op, offset + i, n);
  return wrong;
}

// The buffers of one op and size, per half. `total` elements in the full buffer S, `chunk`
// = total / n per rank. in/out counts: all_reduce total/total (in place: in == out),
// all_gather chunk/total, reduce_scatter total/chunk.
struct Layout {
  int64_t in_count, out_count, in_offset, out_offset;
};
Layout layout_of(Op op, int64_t total, int64_t chunk, int r) {
  switch (op) {
    case Op::AllReduce: return {total, total, 0, 0};
    case Op::AllGather: return {chunk, total, r * chunk, 0};
    case Op::ReduceScatter: return {total, chunk, 0, r * chunk};
  }
  return {};
}

// The raw MPI half: buffers and the call.
struct RawCase {
  Op op;
  int64_t chunk;
  Buffer in, out;
  RawCase(Op op_, const Layout& s, int64_t chunk_) : op(op_), chunk(chunk_), in(make_buffer(s.in_count)) {
    if (op != Op::AllReduce) out = make_buffer(s.out_count);
  }
  float* output() { return op == Op::AllReduce ? in.get() : out.get(); }
  void run(int64_t total) {
    switch (op) {
      case Op::AllReduce:
        MPI_Allreduce(MPI_IN_PLACE, in.get(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Op::AllGather:
        MPI_Allgather(in.get(), static_cast<int>(chunk), MPI_FLOAT, out.get(), static_cast<int>(chunk), MPI_FLOAT,
                      MPI_COMM_WORLD);
        break;
      case Op::ReduceScatter:
        MPI_Reduce_scatter_block(in.get(), out.get(), static_cast<int>(chunk), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
  }
};

#ifndef STRATA_BENCH_RAW_ONLY
// The strata half: tensors and the ProcessGroup call (waited for, as a user would).
struct StrataCase {
  Op op;
  strata::Tensor in, out;
  StrataCase(Op op_, const Layout& s) : op(op_), in(strata::zeros({s.in_count})) {
    if (op != Op::AllReduce) out = strata::zeros({s.out_count});
  }
  float* input() { return in.data<float>(); }
  float* output() { return op == Op::AllReduce ? in.data<float>() : out.data<float>(); }
  void run(strata::dist::ProcessGroup& g) {
    switch (op) {
      case Op::AllReduce: g.all_reduce(in)->wait(); break;
      case Op::AllGather: g.all_gather(out, in)->wait(); break;
      case Op::ReduceScatter: g.reduce_scatter(out, in)->wait(); break;
    }
  }
};
#endif

// Checks one half's output on every rank; aborts the run when any rank saw a wrong value.
void verify(const char* half, Op op, const float* out, const Layout& s, int n, int r, int64_t bytes) {
  long long wrong = count_wrong(op, out, s.out_count, s.out_offset, n), all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (all_wrong != 0) {
    if (r == 0)
      std::fprintf(stderr, "bench_collectives: %s %s of %lld bytes: %lld wrong output elements over all ranks\n", half,
                   op_name(op), static_cast<long long>(bytes), all_wrong);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (1 << 20) && b % (1 << 20) == 0) std::snprintf(buf, sizeof buf, "%lldM", static_cast<long long>(b >> 20));
  else if (b >= (1 << 10) && b % (1 << 10) == 0)
    std::snprintf(buf, sizeof buf, "%lldK", static_cast<long long>(b >> 10));
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(b));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef STRATA_BENCH_RAW_ONLY
  MPI_Init(&argc, &argv);
  const bool have_strata = false;
#else
  strata::dist::ProcessGroup* world_group = nullptr;
  try {
    world_group = &strata::dist::init();
  } catch (const std::exception& e) {  // e.g. an invalid STRATA_* setting
    std::fprintf(stderr, "bench_collectives: %s\n", e.what());
    return 1;
  }
  strata::dist::ProcessGroup& world = *world_group;
  const bool have_strata = true;
#endif
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  Options o;
  const std::string error = parse(argc, argv, o);
  if (!error.empty()) {
    if (r == 0) std::fprintf(stderr, "bench_collectives: %s\n", error.c_str());
#ifdef STRATA_BENCH_RAW_ONLY
    MPI_Finalize();
#else
    strata::dist::finalize();
#endif
    return 2;
  }
  const bool run_strata = have_strata && o.strata;
#ifndef STRATA_BENCH_RAW_ONLY
  if (world.size() != n || world.rank() != r) {
    std::fprintf(stderr, "bench_collectives: strata's world (rank %d of %d) is not MPI_COMM_WORLD (rank %d of %d)\n",
                 world.rank(), world.size(), r, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
#endif

  if (r == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[std::strcspn(version, "\n,")] = '\0';
    int thread_level = 0;
    MPI_Query_thread(&thread_level);
    std::printf("# bench_collectives: %d ranks, float32, %s; %s; MPI thread level %d\n", n, version,
                run_strata
                    ? "strata ProcessGroup vs raw MPI"
                    : (have_strata ? "raw MPI only (--raw-only)" : "raw MPI only (built without strata's MPI backend)"),
                thread_level);
    std::printf(
        "# median of N iterations after %d warm-up (barrier before each; slowest rank); GB/s = 1e9 B/s; "
        "ratio = strata busbw / raw busbw\n",
        o.warmup);
    if (o.compare_flat && run_strata)
      std::printf("%-15s %9s %5s | %10s %9s | %10s %9s | %10s %9s | %8s %9s\n", "op", "bytes", "iters", "raw_us",
                  "busbw", "flat_us", "busbw", "hier_us", "busbw", "hier/raw", "hier/flat");
    else
      std::printf("%-15s %9s %5s | %10s %9s %9s | %10s %9s %9s | %7s\n", "op", "bytes", "iters", "raw_us", "algbw",
                  "busbw", "strata_us", "algbw", "busbw", "ratio");
  }
#ifndef STRATA_BENCH_RAW_ONLY
  // --compare-flat: the same world twice, one group made with the flat ring forced.
  std::unique_ptr<strata::dist::ProcessGroup> flat_group, hier_group;
  if (run_strata && o.compare_flat) {
    std::vector<int> all(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    const char* before = std::getenv("STRATA_MPI_HIERARCHICAL");
    const std::string saved = before ? before : "";
    setenv("STRATA_MPI_HIERARCHICAL", "0", 1);
    flat_group = world.split(all, "flat");
    if (before) setenv("STRATA_MPI_HIERARCHICAL", saved.c_str(), 1);
    else unsetenv("STRATA_MPI_HIERARCHICAL");
    hier_group = world.split(all, "hier");
  }
#endif

  for (Op op : o.ops) {
    for (int64_t size = o.min_bytes; size <= o.max_bytes; size *= o.factor) {
      const int64_t chunk = size / static_cast<int64_t>(sizeof(float)) / n;
      if (chunk == 0) continue;
      const int64_t total = chunk * n;
      const int64_t bytes = total * static_cast<int64_t>(sizeof(float));
      const Layout s = layout_of(op, total, chunk, r);

      RawCase raw(op, s, chunk);
      fill_input(op, raw.in.get(), s.in_count, s.in_offset, r);
      raw.run(total);
      verify("raw MPI", op, raw.output(), s, n, r, bytes);
      // In-place all_reduce would grow its values without bound: time it on zeros.
      if (op == Op::AllReduce) std::fill_n(raw.in.get(), total, 0.0f);
#ifndef STRATA_BENCH_RAW_ONLY
      std::unique_ptr<StrataCase> st, st_flat;
      if (run_strata) {
        strata::dist::ProcessGroup& main_group = hier_group ? *hier_group : world;
        st = std::make_unique<StrataCase>(op, s);
        fill_input(op, st->input(), s.in_count, s.in_offset, r);
        st->run(main_group);
        verify("strata", op, st->output(), s, n, r, bytes);
        if (op == Op::AllReduce) std::fill_n(st->input(), total, 0.0f);
        if (flat_group) {
          st_flat = std::make_unique<StrataCase>(op, s);
          fill_input(op, st_flat->input(), s.in_count, s.in_offset, r);
          st_flat->run(*flat_group);
          verify("strata (flat)", op, st_flat->output(), s, n, r, bytes);
          if (op == Op::AllReduce) std::fill_n(st_flat->input(), total, 0.0f);
        }
      }
#endif

      const int iters = iterations_for(o, bytes);
      std::vector<double> t_raw, t_strata, t_flat;
      for (int it = 0; it < o.warmup + iters; ++it) {
        const double a = timed([&] { raw.run(total); });
        if (it >= o.warmup) t_raw.push_back(a);
#ifndef STRATA_BENCH_RAW_ONLY
        if (st) {
          const double b = timed([&] { st->run(hier_group ? *hier_group : world); });
          if (it >= o.warmup) t_strata.push_back(b);
        }
        if (st_flat) {
          const double c = timed([&] { st_flat->run(*flat_group); });
          if (it >= o.warmup) t_flat.push_back(c);
        }
#endif
      }

      if (r == 0) {
        const double bf = bus_factor(op, n);
        const double raw_s = median(t_raw);
        const double raw_alg = static_cast<double>(bytes) / raw_s / 1e9;
        if (!t_flat.empty()) {
          const double flat_s = median(t_flat), hier_s = median(t_strata);
          std::printf("%-15s %9s %5d | %10.1f %9.3f | %10.1f %9.3f | %10.1f %9.3f | %8.3f %9.3f\n", op_name(op),
                      human_bytes(bytes).c_str(), iters, raw_s * 1e6, static_cast<double>(bytes) / raw_s / 1e9 * bf,
                      flat_s * 1e6, static_cast<double>(bytes) / flat_s / 1e9 * bf, hier_s * 1e6,
                      static_cast<double>(bytes) / hier_s / 1e9 * bf, raw_s / hier_s, flat_s / hier_s);
          std::fflush(stdout);
          continue;
        }
        char strata_cols[64] = "           -         -         - |       -";
        if (!t_strata.empty()) {
          const double st_s = median(t_strata);
          const double st_alg = static_cast<double>(bytes) / st_s / 1e9;
          std::snprintf(strata_cols, sizeof strata_cols, "%10.1f %9.3f %9.3f | %7.3f", st_s * 1e6, st_alg, st_alg * bf,
                        (st_alg * bf) / (raw_alg * bf));
        }
        std::printf("%-15s %9s %5d | %10.1f %9.3f %9.3f | %s\n", op_name(op), human_bytes(bytes).c_str(), iters,
                    raw_s * 1e6, raw_alg, raw_alg * bf, strata_cols);
        std::fflush(stdout);
      }
    }
  }

#ifndef STRATA_BENCH_RAW_ONLY
  if (run_strata && o.late_peer_ms > 0 && n > 1) {
    strata::Tensor t = strata::zeros({1 << 20});
    world.barrier()->wait();
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(o.late_peer_ms));
    const double cpu0 = process_cpu_seconds(), t0 = MPI_Wtime();
    world.all_reduce(t)->wait();
    const double cpu = process_cpu_seconds() - cpu0, wall = MPI_Wtime() - t0;
    if (r == 0)
      std::printf(
          "# late peer: rank 0 waited %.1f ms for a 4 MiB all_reduce (last rank %d ms late) and used "
          "%.1f ms of CPU (%.1f%% of one core)\n",
          wall * 1e3, o.late_peer_ms, cpu * 1e3, 100 * cpu / wall);
  }
#endif

#ifdef STRATA_BENCH_RAW_ONLY
  MPI_Finalize();
#else
  strata::dist::finalize();
#endif
  return 0;
}
