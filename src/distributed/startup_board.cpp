#include "distributed/startup_board.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>
#include <vector>

#include "distributed/env_settings.h"

namespace strata::dist::detail {
namespace {

namespace fs = std::filesystem;

const char* phase_token(StartupPhase p) {
  switch (p) {
    case StartupPhase::MpiInit: return "mpi_init";
    case StartupPhase::WorldSetup: return "world_setup";
    case StartupPhase::Done: return "done";
    case StartupPhase::TimedOut: return "timed_out";
  }
  return "?";
}

bool parse_phase(const std::string& token, StartupPhase& out) {
  for (StartupPhase p : {StartupPhase::MpiInit, StartupPhase::WorldSetup, StartupPhase::Done, StartupPhase::TimedOut})
    if (token == phase_token(p)) {
      out = p;
      return true;
    }
  return false;
}

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

struct Entry {
  bool present = false;
  StartupPhase phase = StartupPhase::MpiInit;
  long pid = 0;
  std::string host;
};

Entry read_entry(const std::string& path) {
  Entry e;
  std::ifstream in(path);
  std::string token;
  if (!(in >> token >> e.pid >> e.host) || !parse_phase(token, e.phase)) return e;
  e.present = true;
  return e;
}

// The process's state letter from /proc/<pid>/stat ('R', 'S', 'T', ...); 0 when it is gone.
char process_state(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

bool process_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

std::string board_prefix() { return "strata-startup-" + std::to_string(::getuid()) + "-"; }

// Boards of earlier jobs on this host whose every process has ended (killed jobs never
// reach finalize, which removes a rank's entry): removed, so that /dev/shm does not fill up.
void sweep_dead_boards(const fs::path& base, const fs::path& mine, const std::string& host) {
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(base, ec)) {
    const std::string name = d.path().filename().string();
    if (name.rfind(board_prefix(), 0) != 0 || d.path() == mine || !d.is_directory(ec)) continue;
    std::vector<fs::path> files;
    bool dead = true;
    for (const fs::directory_entry& f : fs::directory_iterator(d.path(), ec)) {
      files.push_back(f.path());
      if (f.path().extension() == ".tmp") continue;
      Entry e = read_entry(f.path().string());
      if (!e.present || e.host != host || !process_gone(e.pid)) dead = false;
    }
    if (!dead || files.empty()) continue;  // an empty board may be a job that is starting
    for (const fs::path& f : files) fs::remove(f, ec);
    fs::remove(d.path(), ec);
  }
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string ranks_word(const std::vector<int>& v) { return (v.size() == 1 ? "rank " : "ranks ") + join(v); }

}  // namespace

const char* startup_phase_name(StartupPhase phase) {
  switch (phase) {
    case StartupPhase::MpiInit: return "MPI initialisation";
    case StartupPhase::WorldSetup: return "world group setup";
    case StartupPhase::Done:
    case StartupPhase::TimedOut: return "startup";
  }
  return "startup";
}

StartupBoard::StartupBoard(LauncherView view, std::string dir, std::string host)
    : view_(std::move(view)), dir_(std::move(dir)), host_(std::move(host)) {}

std::unique_ptr<StartupBoard> StartupBoard::open(const LauncherView& view) {
  if (view.job.empty() || view.rank < 0 || view.size <= 1) return nullptr;
  std::error_code ec;
  fs::path base = startup_board_base_dir();
  if (base.empty()) base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path(ec);
  if (base.empty()) return nullptr;
  const fs::path dir = base / (board_prefix() + view.job);
  const std::string host = this_host();
  sweep_dead_boards(base, dir, host);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return nullptr;
  return std::unique_ptr<StartupBoard>(new StartupBoard(view, dir.string(), host));
}

StartupBoard::~StartupBoard() {
  if (!posted_) return;
  ::unlink(path_of(view_.rank).c_str());
  ::rmdir(dir_.c_str());  // fails while peers' entries remain: the last one out removes it
}

std::string StartupBoard::path_of(int rank) const { return dir_ + "/rank-" + std::to_string(rank); }

void StartupBoard::post(StartupPhase phase) {
  // Written aside and renamed into place, so that a reader never sees half an entry.
  const std::string path = path_of(view_.rank);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fprintf(f, "%s %ld %s\n", phase_token(phase), static_cast<long>(::getpid()), host_.c_str());
  const bool ok = std::fclose(f) == 0;
  if (ok && std::rename(tmp.c_str(), path.c_str()) == 0) posted_ = true;
  else ::unlink(tmp.c_str());
}

std::string StartupBoard::describe_peers() const {
  // (what became of them, in which phase) -> ranks; the key orders culprits first.
  enum Fate { NotReached, Stopped, Exited, Waiting, TimedOut, Finished };
  std::map<std::pair<Fate, StartupPhase>, std::vector<int>> groups;
  std::map<int, long> pids;
  for (int r = 0; r < view_.size; ++r) {
    if (r == view_.rank) continue;
    const Entry e = read_entry(path_of(r));
    Fate fate = Waiting;
    if (!e.present) {
      fate = NotReached;
    } else if (e.phase == StartupPhase::Done) {
      fate = Finished;
    } else if (e.phase == StartupPhase::TimedOut) {
      fate = TimedOut;             // its process may be gone already: that is not what stopped startup
    } else if (e.host == host_) {  // its pid means something here
      const char state = process_state(e.pid);
      if (state == 0 || state == 'Z' || state == 'X') fate = Exited;
      else if (state == 'T' || state == 't') fate = Stopped;
      pids[r] = e.pid;
    }
    groups[{fate, e.phase}].push_back(r);
  }
  std::vector<std::string> clauses;
  for (const auto& [key, ranks] : groups) {
    const auto [fate, phase] = key;
    const bool one = ranks.size() == 1;
    std::string c = ranks_word(ranks);
    switch (fate) {
      case NotReached:
        c += std::string(one ? " has" : " have") + " not reached startup (no entry on the startup board " + dir_;
        if (view_.local_size > 0 && view_.local_size < view_.size) c += "; ranks on other nodes are not seen";
        c += ")";
        break;
      case Stopped: {
        std::vector<int> ids;
        for (int r : ranks) ids.push_back(static_cast<int>(pids[r]));
        c += std::string(one ? " is" : " are") + " stopped in " + startup_phase_name(phase) + " (pid " + join(ids) +
             ": SIGSTOP or a debugger)";
        break;
      }
      case Exited: c += std::string(" exited during ") + startup_phase_name(phase); break;
      case Waiting: c += std::string(one ? " was" : " were") + " waiting in " + startup_phase_name(phase); break;
      case TimedOut: c += std::string(one ? " has" : " have") + " timed out too"; break;
      case Finished: c += " had finished startup"; break;
    }
    clauses.push_back(c);
  }
  std::string out;
  for (size_t i = 0; i < clauses.size(); ++i) out += (i ? "; " : "") + clauses[i];
  return out;
}

}  // namespace strata::dist::detail
