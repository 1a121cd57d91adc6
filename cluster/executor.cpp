#include "cluster/executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <exception>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>

namespace mapfuse {

const char* to_string(RunStatus s) { return s == RunStatus::Completed ? "completed" : "interrupted"; }

// ---- crashes --------------------------------------------------------------------------------
// A unit that crashes the process (a fault, not an exception) takes its rank down, and mpirun's
// report names a PID, not the unit: each thread keeps what it runs in a fixed buffer, and a fault
// handler writes it to stderr (write(2) only) before the previous handler (Open MPI's backtrace, or
// the default core dump) runs.
namespace {
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_crash_old[std::size(kCrashSignals)];
thread_local char t_running[512];
thread_local std::size_t t_running_len = 0;

void put(const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(2, s, n);
    if (k <= 0) return;
    s += k, n -= std::size_t(k);
  }
}

extern "C" void mapfuse_crash_handler(int sig) {
  if (t_running_len > 0) {
    static const char head[] = "mapfuse: crashed while running unit ";
    put(head, sizeof head - 1);
    put(t_running, t_running_len);
    put("\n", 1);
  }
  // Back to the handler before ours; returning re-runs the faulting instruction (or abort()
  // raises again), which reaches it.
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i)
    if (kCrashSignals[i] == sig) {
      struct sigaction back = g_crash_old[i];
      if (!(back.sa_flags & SA_SIGINFO) && back.sa_handler == mapfuse_crash_handler) back.sa_handler = SIG_DFL;
      sigaction(sig, &back, nullptr);
    }
}

bool is_ours(const struct sigaction& a) { return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == mapfuse_crash_handler; }

// Before each unit, since whatever runs between units (MPI_Init, a test framework) may have put
// its own handler in place; that one becomes the handler ours passes on to.
void install_crash_handler() {
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i) {
    struct sigaction cur {};
    sigaction(kCrashSignals[i], nullptr, &cur);
    if (is_ours(cur)) continue;
    struct sigaction sa {};
    sa.sa_handler = mapfuse_crash_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(kCrashSignals[i], &sa, &g_crash_old[i]);
  }
}

// While alive, the thread's crash report names `unit`.
struct Running {
  explicit Running(const WorkUnit& unit) {
    const std::string text = unit.id + " '" + unit.label + "'";
    t_running_len = std::min(text.size(), sizeof t_running);
    std::memcpy(t_running, text.data(), t_running_len);
  }
  ~Running() { t_running_len = 0; }
};
}  // namespace

UnitResult run_unit_guarded(const UnitFunction& fn, const WorkUnit& unit, int rank) {
  install_crash_handler();
  const Running running(unit);
  const auto t0 = std::chrono::steady_clock::now();
  UnitResult r;
  try {
    r = fn(unit);
  } catch (const std::exception& e) {
    r = UnitResult{};
    r.status = UnitResult::Status::Failed;
    r.message = e.what();
    if (r.message.empty()) r.message = "exception without a message";
  } catch (...) {
    r = UnitResult{};
    r.status = UnitResult::Status::Failed;
    r.message = "unknown exception (not derived from std::exception)";
  }
  r.unit_id = unit.id;
  r.kind = unit.kind;
  r.label = unit.label;
  r.columns.insert(r.columns.begin(), unit.columns.begin(), unit.columns.end());  // the unit's, then the result's own
  r.rank = rank;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// ---- signals --------------------------------------------------------------------------------

namespace {
std::atomic<std::atomic<bool>*> g_stop_flag{nullptr};
volatile std::sig_atomic_t g_last_signal = 0;

extern "C" void mapfuse_stop_handler(int sig) {
  g_last_signal = sig;
  if (std::atomic<bool>* f = g_stop_flag.load()) f->store(true);
}
}  // namespace

struct StopSignals::Saved {
  struct sigaction old_int {};
  struct sigaction old_term {};
  struct sigaction old_usr1 {};
};

StopSignals::StopSignals(std::atomic<bool>& flag) : saved_(new Saved) {
  static_assert(std::atomic<bool>::is_always_lock_free, "the stop flag must be lock-free");
  std::atomic<bool>* expected = nullptr;
  if (!g_stop_flag.compare_exchange_strong(expected, &flag)) {
    delete saved_;
    throw std::logic_error("StopSignals: another instance is active");
  }
  g_last_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = mapfuse_stop_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &saved_->old_int);
  sigaction(SIGTERM, &sa, &saved_->old_term);
  // Slurm's --signal=USR1@<seconds> warns before the time limit, and mpirun forwards SIGUSR1 to
  // every rank (it does not forward SIGINT/SIGTERM as such): both mean "stop and flush".
  sigaction(SIGUSR1, &sa, &saved_->old_usr1);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &saved_->old_int, nullptr);
  sigaction(SIGTERM, &saved_->old_term, nullptr);
  sigaction(SIGUSR1, &saved_->old_usr1, nullptr);
  g_stop_flag.store(nullptr);
  delete saved_;
}

int StopSignals::last_signal() { return g_last_signal; }

}  // namespace mapfuse
