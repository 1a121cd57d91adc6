#include "cluster/local_executor.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace mapfuse {

RunReport run_local(std::vector<WorkUnit> units, const UnitFunction& fn, const ResultSink& sink,
                    const RunOptions& options, int rank) {
  order_for_dispatch(units);
  RunReport report;
  report.total = units.size();
  const std::size_t n = units.size();

  auto stop_requested = [&] { return options.stop != nullptr && options.stop->load(std::memory_order_relaxed); };
  auto deliver = [&](const UnitResult& r) {
    if (r.status == UnitResult::Status::Done) ++report.done; else ++report.failed;
    if (sink) sink(r);
    if (options.progress) options.progress(report.done + report.failed, n);
  };

  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = static_cast<int>(std::min<std::size_t>(std::max(threads, 1), std::max<std::size_t>(n, 1)));

  if (threads == 1) {
    // No worker thread: compute and deliver on the calling thread.
    for (const WorkUnit& u : units) {
      if (stop_requested()) break;
      UnitResult r = run_unit_guarded(fn, u, rank);
      ++report.computed_here;
      deliver(r);
    }
  } else {
    std::mutex m;
    std::condition_variable cv;
    std::deque<UnitResult> queue;
    int running = threads;
    std::atomic<std::size_t> next{0};
    std::atomic<bool> abort{false};  // the sink threw: start nothing more

    auto worker = [&] {
      for (;;) {
        if (abort.load(std::memory_order_relaxed) || stop_requested()) break;
        const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= n) break;
        UnitResult r = run_unit_guarded(fn, units[i], rank);
        {
          std::lock_guard<std::mutex> lk(m);
          queue.push_back(std::move(r));
        }
        cv.notify_one();
      }
      {
        std::lock_guard<std::mutex> lk(m);
        --running;
      }
      cv.notify_one();
    };

    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);

    std::exception_ptr error;
    std::deque<UnitResult> batch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [&] { return !queue.empty() || running == 0; });
        if (queue.empty() && running == 0) break;
        batch.swap(queue);
      }
      for (const UnitResult& r : batch) {
        ++report.computed_here;
        if (error) continue;
        try {
          deliver(r);
        } catch (...) {
          error = std::current_exception();
          abort.store(true);
        }
      }
      batch.clear();
    }
    for (std::thread& t : pool) t.join();
    if (error) std::rethrow_exception(error);
  }

  report.not_started = n - report.done - report.failed;
  report.status = report.not_started > 0 ? RunStatus::Interrupted : RunStatus::Completed;
  return report;
}

}  // namespace mapfuse
