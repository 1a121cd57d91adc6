#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cluster/executor.hpp"
#include "cluster/local_executor.hpp"
#include "cluster/wire.hpp"

using namespace mapfuse;

namespace {

std::vector<WorkUnit> make_units(int n) {
  std::vector<WorkUnit> units;
  for (int i = 0; i < n; ++i) {
    WorkUnit u;
    u.kind = "test";
    u.payload = std::to_string(i);
    u.id = stable_id(u.kind + ":" + u.payload);
    u.label = "unit " + u.payload;
    u.cost_hint = static_cast<double>((i * 7919) % 13);
    units.push_back(u);
  }
  return units;
}

UnitResult square(const WorkUnit& u) {
  UnitResult r;
  const double x = std::stod(u.payload);
  r.energy_pj = x * x;
  r.cycles = x;
  r.edp = r.energy_pj * r.cycles;
  return r;
}

}  // namespace

TEST_CASE("cluster: local executor delivers every unit exactly once on the calling thread") {
  for (int threads : {1, 2, 4, 8}) {
    CAPTURE(threads);
    const auto units = make_units(500);
    std::multiset<std::string> seen;
    std::atomic<int> in_sink{0};
    bool concurrent = false, other_thread = false;
    const auto caller = std::this_thread::get_id();
    std::vector<std::size_t> progress;
    RunOptions opt;
    opt.threads = threads;
    opt.progress = [&](std::size_t done, std::size_t total) {
      CHECK(total == 500);
      progress.push_back(done);
    };
    const RunReport rep = run_local(
        units, square,
        [&](const UnitResult& r) {
          if (in_sink.fetch_add(1) != 0) concurrent = true;
          if (std::this_thread::get_id() != caller) other_thread = true;
          seen.insert(r.unit_id);
          CHECK(r.status == UnitResult::Status::Done);
          CHECK(r.energy_pj == std::stod(r.label.substr(5)) * std::stod(r.label.substr(5)));
          CHECK(r.rank == 0);
          CHECK(r.wall_seconds >= 0);
          in_sink.fetch_sub(1);
        },
        opt);
    CHECK_FALSE(concurrent);
    CHECK_FALSE(other_thread);
    CHECK(rep.status == RunStatus::Completed);
    CHECK(rep.total == 500);
    CHECK(rep.done == 500);
    CHECK(rep.failed == 0);
    CHECK(rep.not_started == 0);
    CHECK(rep.computed_here == 500);
    CHECK(seen.size() == 500);
    std::set<std::string> unique(seen.begin(), seen.end());
    CHECK(unique.size() == 500);
    for (const auto& u : units) CHECK(unique.count(u.id) == 1);
    REQUIRE(progress.size() == 500);
    for (std::size_t i = 0; i < progress.size(); ++i) CHECK(progress[i] == i + 1);
  }
  // Nothing to do is fine.
  int calls = 0;
  const RunReport rep = run_local({}, square, [&](const UnitResult&) { ++calls; });
  CHECK(calls == 0);
  CHECK(rep.status == RunStatus::Completed);
}

TEST_CASE("cluster: exceptions from the unit function become Failed results with the message") {
  const auto units = make_units(100);
  std::map<std::string, UnitResult> got;
  RunOptions opt;
  opt.threads = 3;
  const RunReport rep = run_local(
      units,
      [](const WorkUnit& u) -> UnitResult {
        const int i = std::stoi(u.payload);
        if (i % 10 == 3) throw std::runtime_error("no valid mapping for " + u.payload);
        if (i % 10 == 7) throw 42;  // not a std::exception
        UnitResult r = square(u);
        r.unit_id = "wrong id";  // the executor names results after their unit
        r.rank = 99;
        return r;
      },
      [&](const UnitResult& r) { CHECK(got.emplace(r.unit_id, r).second); }, opt);
  CHECK(rep.status == RunStatus::Completed);
  CHECK(rep.done == 80);
  CHECK(rep.failed == 20);
  REQUIRE(got.size() == 100);
  for (const auto& u : units) {
    REQUIRE(got.count(u.id) == 1);
    const UnitResult& r = got.at(u.id);
    CHECK(r.kind == u.kind);
    CHECK(r.label == u.label);
    CHECK(r.rank == 0);
    const int i = std::stoi(u.payload);
    if (i % 10 == 3) {
      CHECK(r.status == UnitResult::Status::Failed);
      CHECK(r.message == "no valid mapping for " + u.payload);
    } else if (i % 10 == 7) {
      CHECK(r.status == UnitResult::Status::Failed);
      CHECK(r.message.find("unknown exception") != std::string::npos);
    } else {
      CHECK(r.status == UnitResult::Status::Done);
      CHECK(r.message.empty());
    }
  }
}

namespace {
// Runs `body` in a child process (a crash kills it) and returns what it wrote to stderr.
template <class Body>
std::string child_stderr(Body body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    body();
    ::_exit(9);
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(k));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return err;
}
}  // namespace

TEST_CASE("cluster: a unit that crashes its process is named on stderr before it dies") {
  WorkUnit u;
  u.kind = "test";
  u.id = "c0ffee";
  u.label = "schedule crashy fused @ somewhere";
  const std::string crashed = child_stderr([&] {
    (void)run_unit_guarded([](const WorkUnit&) -> UnitResult {
      ::raise(SIGSEGV);  // the handler writes, restores the handler before it and returns here
      ::_exit(7);
    }, u, 0);
  });
  CHECK_MESSAGE(crashed.find("mapfuse: crashed while running unit c0ffee 'schedule crashy fused @ somewhere'") !=
                    std::string::npos,
                crashed);
  // After the unit has finished, a crash names no unit.
  const std::string after = child_stderr([&] {
    (void)run_unit_guarded([](const WorkUnit&) { return UnitResult{}; }, u, 0);
    ::raise(SIGSEGV);
    ::_exit(7);
  });
  CHECK_MESSAGE(after.find("crashed while running") == std::string::npos, after);
}

TEST_CASE("cluster: local executor starts the largest cost hint first") {
  auto units = make_units(60);
  auto expected = units;
  order_for_dispatch(expected);
  {  // one thread: start order and arrival order are the dispatch order exactly
    std::vector<std::string> started, arrived;
    RunOptions opt;
    opt.threads = 1;
    run_local(
        units,
        [&](const WorkUnit& u) {
          started.push_back(u.id);
          return square(u);
        },
        [&](const UnitResult& r) { arrived.push_back(r.unit_id); }, opt);
    REQUIRE(started.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(started[i] == expected[i].id);
    CHECK(arrived == started);
  }
  {  // four threads: units are taken in dispatch order; what a thread records may lag behind
     // the at most three units the other threads took before it, never more.
    std::mutex m;
    std::vector<std::string> started;
    RunOptions opt;
    opt.threads = 4;
    run_local(
        units,
        [&](const WorkUnit& u) {
          std::lock_guard<std::mutex> lk(m);
          started.push_back(u.id);
          return square(u);
        },
        {}, opt);
    REQUIRE(started.size() == 60);
    for (std::size_t k = 0; k < started.size(); ++k) {
      const auto d = static_cast<std::size_t>(
          std::find_if(expected.begin(), expected.end(), [&](const WorkUnit& u) { return u.id == started[k]; }) -
          expected.begin());
      CHECK(d <= k + 3);
    }
  }
}

TEST_CASE("cluster: the stop flag stops dispatch, drains running units and reports an interruption") {
  const auto units = make_units(200);
  SUBCASE("one thread: exactly the units before the flag") {
    std::atomic<bool> stop{false};
    int delivered = 0;
    RunOptions opt;
    opt.threads = 1;
    opt.stop = &stop;
    const RunReport rep = run_local(units, square, [&](const UnitResult&) {
      if (++delivered == 10) stop = true;
    }, opt);
    CHECK(delivered == 10);
    CHECK(rep.status == RunStatus::Interrupted);
    CHECK(rep.done == 10);
    CHECK(rep.not_started == 190);
  }
  SUBCASE("four threads: every started unit is delivered, nothing more starts") {
    std::atomic<bool> stop{false};
    std::mutex m;
    std::set<std::string> started, delivered;
    RunOptions opt;
    opt.threads = 4;
    opt.stop = &stop;
    const RunReport rep = run_local(
        units,
        [&](const WorkUnit& u) {
          {
            std::lock_guard<std::mutex> lk(m);
            started.insert(u.id);
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          return square(u);
        },
        [&](const UnitResult& r) {
          CHECK(delivered.insert(r.unit_id).second);
          if (delivered.size() == 20) stop = true;
        },
        opt);
    CHECK(rep.status == RunStatus::Interrupted);
    CHECK(delivered.size() >= 20);
    CHECK(delivered.size() < 200);
    CHECK(delivered == started);  // drained: no started unit lost
    CHECK(rep.done == delivered.size());
    CHECK(rep.not_started == 200 - delivered.size());
  }
  SUBCASE("flag already set: nothing runs") {
    std::atomic<bool> stop{true};
    RunOptions opt;
    opt.threads = 2;
    opt.stop = &stop;
    int delivered = 0;
    const RunReport rep = run_local(units, square, [&](const UnitResult&) { ++delivered; }, opt);
    CHECK(delivered == 0);
    CHECK(rep.status == RunStatus::Interrupted);
    CHECK(rep.not_started == 200);
  }
  SUBCASE("SIGINT and SIGTERM set the flag through StopSignals") {
    std::atomic<bool> stop{false};
    struct sigaction before {};
    sigaction(SIGINT, nullptr, &before);
    {
      StopSignals guard(stop);
      std::raise(SIGINT);
      CHECK(stop.load());
      CHECK(StopSignals::last_signal() == SIGINT);
      stop = false;
      std::raise(SIGTERM);
      CHECK(stop.load());
      CHECK(StopSignals::last_signal() == SIGTERM);
      stop = false;
      std::raise(SIGUSR1);  // Slurm's warning before the time limit; forwarded by mpirun
      CHECK(stop.load());
      CHECK(StopSignals::last_signal() == SIGUSR1);
      std::atomic<bool> other{false};
      CHECK_THROWS_AS(StopSignals{other}, std::logic_error);
    }
    struct sigaction now {};
    sigaction(SIGINT, nullptr, &now);
    const bool restored = now.sa_handler == before.sa_handler;
    CHECK(restored);
  }
}

TEST_CASE("cluster: an exception from the sink propagates after the workers finish") {
  const auto units = make_units(100);
  std::atomic<int> calls{0};
  RunOptions opt;
  opt.threads = 4;
  CHECK_THROWS_WITH_AS(run_local(
                           units,
                           [&](const WorkUnit& u) {
                             ++calls;
                             return square(u);
                           },
                           [&](const UnitResult&) { throw std::runtime_error("disk full"); }, opt),
                       "disk full", std::runtime_error);
  CHECK(calls.load() >= 1);
  CHECK(calls.load() <= 100);
}

TEST_CASE("cluster: work units survive their byte form") {
  WorkUnit u;
  u.id = stable_id("x");
  u.kind = "map_layer";
  u.label = "resnet18/conv1 @ pe16 \"q\"\n";
  u.cost_hint = 0.1 + 0.2;  // not exactly representable in decimal
  u.payload = std::string("{\"a\":1}\0binary\xff", 16);
  const std::string bytes = encode_unit(u);
  const WorkUnit b = decode_unit(bytes);
  CHECK(b.id == u.id);
  CHECK(b.kind == u.kind);
  CHECK(b.label == u.label);
  CHECK(b.cost_hint == u.cost_hint);
  CHECK(b.payload == u.payload);
  CHECK(decode_unit(encode_unit(WorkUnit{})).cost_hint == 1.0);
  CHECK_THROWS_AS(decode_unit(bytes.substr(0, bytes.size() - 1)), std::runtime_error);
  CHECK_THROWS_AS(decode_unit(bytes + "x"), std::runtime_error);
  CHECK_THROWS_AS(decode_unit(std::string(8, '\xff')), std::runtime_error);
}
