// `mapfuse run study.toml`: cut the study into work units, compute them locally or over MPI
// ranks, journal each result as it arrives (resume skips journaled units), then write the HDF5
// study file from the journal. With --slice i/n only slice i of n of the units (a job-array
// task's share, partitioners/slice.hpp), into a partial file that `mapfuse merge` combines.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cli/commands.hpp"
#include "cli/study_units.hpp"
#include "cluster/executor.hpp"
#include "cluster/local_executor.hpp"
#include "cluster/mpi_executor.hpp"
#include "engine/common/error.hpp"
#include "engine/search/stream/tile_cost_cache.hpp"
#include "partitioners/slice.hpp"
#include "results/hdf5_writer.hpp"
#include "results/journal.hpp"

namespace mapfuse::cli {

// Exit status of a run that was stopped by SIGINT/SIGTERM before finishing (resume with the same
// command). Distinct from 0 (all done), 1 (some units failed) and 2 (bad input).
inline constexpr int kExitInterrupted = 3;

// Launched by mpirun / srun? (Open MPI, PMIx and Slurm PMI set these.) Otherwise the study runs
// on the local executor without initialising MPI at all.
static bool under_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

Command add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a study (experiments/*.toml): locally, or over MPI ranks under mpirun/srun");
  struct Options {
    std::string study, output, slice, tile_cache;
    int threads = 0;
    double cache_every = 60;
    bool quiet = false, recompute_stale = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("study", o->study, "study TOML")->required();
  cmd->add_option("--output", o->output,
                  "HDF5 file to write (default: out/<study name>.h5; with --slice i/n: out/<study name>.part<i>of<n>.h5)");
  auto* slice_opt = cmd->add_option("--slice", o->slice,
                  "i/n: run only slice i (0 <= i < n) of a deterministic partition of the units into n, balanced by "
                  "cost, into a partial file for `mapfuse merge` (one job-array task per slice)");
  cmd->add_option("--threads", o->threads, "units computed at once per rank (0 = all cores)");
  cmd->add_flag("--quiet", o->quiet, "no progress line");
  cmd->add_option("--tile-cache", o->tile_cache,
                  "schedule studies: the tile-cost cache file (default: <output>.tilecache; none: no file), "
                  "loaded at the start and kept up to date by rank 0 (docs/studies.md, \"Tile-cost cache\")");
  cmd->add_option("--tile-cache-every", o->cache_every,
                  "schedule studies, one rank: also save the tile-cost cache every S seconds while units run, when "
                  "it has new entries (a killed run keeps the per-tile searches of its unfinished units)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--recompute-stale", o->recompute_stale,
                "resume a journal some of whose results another mapfuse version or cost model computed: "
                "compute those units again (their new results replace the old ones)");
  return {cmd, [o, slice_opt]() {
            const StudySlice slice = slice_opt->count() > 0 ? parse_slice(o->slice) : StudySlice{};
            std::unique_ptr<MpiSession> mpi;
            if (under_mpi_launcher()) mpi = std::make_unique<MpiSession>(nullptr, nullptr);
            MpiSession* g_mpi = mpi && mpi->size() > 1 ? mpi.get() : nullptr;
            const bool master = !g_mpi || g_mpi->is_master();
            const Study study = load_study(o->study);
            if (!slice.whole() && std::find(study.method.names.begin(), study.method.names.end(), "ffm") != study.method.names.end())
              throw InputError({}, "--slice",
                               "FFM's join needs every generation slice in one run: distribute an ffm study over MPI "
                               "ranks (mpirun / srun) instead of job-array slices");
            const std::string output =
                !o->output.empty() ? o->output
                : slice.whole()    ? "out/" + study.name + ".h5"
                                   : fmt::format("out/{}.part{}of{}.h5", study.name, slice.index, slice.count);
            std::vector<WorkUnit> units = partition_study(study, &study_layers);
            if (!slice.whole()) units = units_of_slice(std::move(units), slice);
            const std::string what = slice.whole() ? study.name : study.name + " " + describe(slice);
            const size_t total = units.size();
            std::unique_ptr<JournalWriter> journal;
            std::vector<UnitResult> results;
            if (master) {
              std::filesystem::path dir = std::filesystem::path(output).parent_path();
              std::error_code ec;
              if (!dir.empty()) std::filesystem::create_directories(dir, ec);
              if (ec || (!dir.empty() && access(dir.c_str(), W_OK) != 0))
                throw InputError({}, "--output", "cannot write to directory '" + dir.string() + "'");
              journal = std::make_unique<JournalWriter>(journal_path(output), study.toml_text, true, slice);
              results = journal->recovered().results;
            }
            // Only the master dispatches: it leaves out the units its journal already holds. A
            // journaled result of a unit the study no longer has (its units' parameters changed,
            // e.g. with another mapfuse version) would be kept beside its recomputed twin: refuse.
            std::set<std::string> finished, ids;
            for (const WorkUnit& u : units) ids.insert(u.id);
            size_t stale = 0;
            const std::string producer = result_producer();
            std::map<std::string, size_t> other_producers;  // producer -> results
            for (const auto& r : results) {
              if (r.producer != producer) {
                ++other_producers[r.producer.empty() ? "an unrecorded version" : r.producer];
                if (o->recompute_stale) continue;  // not finished: computed again, replacing it
              }
              if (r.kind == "ffm_join") continue;  // made by the master from the slices, not a unit
              stale += ids.count(r.unit_id) == 0;
              finished.insert(r.unit_id);
            }
            if (!other_producers.empty() && !o->recompute_stale) {
              std::string which;
              for (const auto& [p, n] : other_producers) which += fmt::format("{}{} by {}", which.empty() ? "" : ", ", n, p);
              throw InputError({}, journal_path(output),
                               fmt::format("holds results computed by another mapfuse version or cost model ({}); this "
                                           "is {} (version/model fingerprint). Resuming would mix two cost models in one "
                                           "file: pass --recompute-stale to compute those units again, or write to a "
                                           "new --output",
                                           which, producer));
            }
            // Recomputed units replace their old results (the journal keeps a unit's last line).
            if (o->recompute_stale)
              std::erase_if(results, [&](const UnitResult& r) { return r.producer != producer; });
            if (stale > 0)
              throw InputError({}, journal_path(output),
                               fmt::format("holds {} results of units this study does not have (their parameters "
                                           "changed since the journal was written, e.g. with another mapfuse "
                                           "version, or the study's relative paths now resolve differently: they "
                                           "are joined to the study's path as given, '{}', so give it as the run "
                                           "that wrote the journal did, from the same directory); resume with the "
                                           "version and spelling that wrote it, or write to a new --output",
                                           stale, study.file));
            std::erase_if(units, [&](const WorkUnit& u) { return finished.count(u.id) > 0; });
            if (master && !finished.empty() && !o->quiet)
              fmt::print(stderr, "resuming {}: {} of {} units already journaled\n", what, finished.size(), total);
            // The tile-cost cache (docs/studies.md, "Tile-cost cache"): one per process, shared by
            // the units it computes; every rank loads the file, and rank 0 alone writes it, from
            // the new entries each result brings (UnitResult::side_data).
            const std::string cache_path = study.schedule.empty() || o->tile_cache == "none" ? std::string()
                                           : o->tile_cache.empty()                            ? output + ".tilecache"
                                                                                              : o->tile_cache;
            TileCostCache tile_cache, rank0_store;
            TileCostCache& file_cache = g_mpi ? rank0_store : tile_cache;  // what rank 0 writes
            if (!cache_path.empty()) {
              const CacheLoadResult lr = load_tile_cost_cache(cache_path, g_mpi && master ? rank0_store : tile_cache);
              if (master && lr.status == CacheLoad::Stale) fmt::print(stderr, "warning: {}\n", lr.message);
              if (master && lr.status == CacheLoad::Loaded && !o->quiet)
                fmt::print(stderr, "tile-cost cache {}: {} entries\n", cache_path, lr.entries);
            }
            auto compute = [&](const WorkUnit& u) {
              UnitResult r = run_unit(u, cache_path.empty() ? nullptr : &tile_cache);
              if (!cache_path.empty()) r.side_data = tile_cache.take_fresh();
              return r;
            };
            std::atomic<bool> stop{false};
            StopSignals signals(stop);
            RunOptions opts;
            opts.threads = o->threads;
            opts.stop = &stop;
            const bool tty = isatty(STDERR_FILENO) && !o->quiet;
            const auto start = std::chrono::steady_clock::now();
            opts.progress = [&, tty](size_t done, size_t n) {
              if (!tty) return;
              const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              const double rate = done / std::max(secs, 1e-9);
              fmt::print(stderr, "\r{} / {} units  {:.1f}/s  ETA {:.0f} s   ", done, n, rate, rate > 0 ? (n - done) / rate : 0.0);
              if (done == n) fmt::print(stderr, "\n");
            };
            std::mutex save_mutex;  // the sink's saves and the checkpoints' write the same file
            auto sink = [&](UnitResult r) {
              if (!r.side_data.empty()) {
                file_cache.add_lines(r.side_data, "the entries of unit '" + r.label + "'");
                std::lock_guard lock(save_mutex);
                save_tile_cost_cache(cache_path, file_cache);
                r.side_data.clear();
              }
              r.producer = producer;
              journal->append(r);
              results.push_back(std::move(r));
            };
            // One rank: the cache is also saved while units run (map_tile_costs inserts each search
            // as it ends), so a unit killed after an hour of per-tile searches keeps them. Over MPI
            // the workers' entries reach rank 0 with their results only.
            std::jthread checkpoint;
            if (!cache_path.empty() && !g_mpi)
              checkpoint = std::jthread([&](std::stop_token stop_token) {
                std::mutex m;
                std::condition_variable_any cv;
                size_t saved = tile_cache.size();
                const auto every = std::chrono::duration<double>(o->cache_every);
                std::unique_lock lock(m);
                // Wakes every `every`, or at once when the run ends (stop requested).
                while (!cv.wait_for(lock, stop_token, every, [] { return false; }) && !stop_token.stop_requested()) {
                  if (const size_t now = tile_cache.size(); now != saved) {
                    std::lock_guard save(save_mutex);
                    try {
                      save_tile_cost_cache(cache_path, tile_cache);
                      saved = now;
                    } catch (const std::exception& e) {  // the units go on; the sink's save reports again
                      fmt::print(stderr, "warning: {}\n", e.what());
                    }
                  }
                }
              });
            const RunReport report = g_mpi ? run_mpi(units, compute, sink, opts)
                                           : run_local(units, compute, sink, opts);
            if (checkpoint.joinable()) checkpoint.request_stop(), checkpoint.join();
            if (!master) return 0;
            // Entries of a unit that failed after mapping some (its result carried none): kept too.
            if (!cache_path.empty() && !g_mpi && !tile_cache.take_fresh().empty()) save_tile_cost_cache(cache_path, tile_cache);
            StudyMeta meta;
            meta.name = study.name;
            meta.mapfuse_version = producer;
            meta.study_id = journal->study_id();
            meta.toml_text = study.toml_text;
            meta.start_time = journal->start_time();  // the first run's, kept across resumes
            meta.end_time = iso8601_now();
            meta.ranks = g_mpi ? g_mpi->size() : 1;
            meta.threads = o->threads;
            meta.slice = slice;
            if (report.status == RunStatus::Interrupted) {
              fmt::print(stderr, "interrupted: {} of {} units journaled in {}; run the same command to resume\n",
                         results.size(), total, journal_path(output));
              return kExitInterrupted;
            }
            // FFM: the master joins the generated pmappings of each (point, workload) once all its
            // slices are in (a sliced run leaves that to `mapfuse merge`).
            if (slice.whole()) complete_ffm_joins(study, results, [&](const UnitResult& r) { journal->append(r); });
            write_study_h5(output, meta, results);
            size_t failed = 0;
            for (const auto& r : results) failed += r.status == UnitResult::Status::Failed;
            fmt::print("{}: {} units ({} computed now, {} failed) -> {}\n", what, results.size(), report.done + report.failed,
                       failed, output);
            const bool get_study = !study.get.empty(), dataset_study = !study.get_dataset.empty();
            if (get_study)
              fmt::print("| unit | DRAM MB (sample: valid share) | MBU KB | plans |\n|---|---|---|---|\n");
            else if (dataset_study)
              fmt::print("| unit | groups | samples | valid samples |\n|---|---|---|---|\n");
            else
              fmt::print("| unit | energy_pj | cycles | EDP |\n|---|---|---|---|\n");
            std::vector<const UnitResult*> sorted;
            for (const auto& r : results) sorted.push_back(&r);
            std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->label < b->label; });
            for (const UnitResult* r : sorted)
              if (r->status == UnitResult::Status::Done && get_study)
                fmt::print("| {} | {:.6g} | {:.6g} | {:.0f} |\n", r->label, r->metric("dram_mb", r->metric("valid_share", 0)),
                           r->metric("mbu_kb", 0), r->metric("plans", 0));
              else if (r->status == UnitResult::Status::Done && dataset_study)
                fmt::print("| {} | {:.0f} | {:.0f} | {:.0f} |\n", r->label, r->metric("groups", 0), r->metric("samples", 0),
                           r->metric("valid_samples", 0));
              else if (r->status == UnitResult::Status::Done)
                fmt::print("| {} | {:.6g} | {:.6g} | {:.6g} |\n", r->label, r->energy_pj, r->cycles, r->edp);
              else
                fmt::print("| {} | failed: {} | | |\n", r->label, r->message);
            // Failures go to stderr as well, --quiet or not: a caller that keeps only stderr (a
            // script, a Slurm log) must still see why the exit status is 1.
            if (failed) {
              fmt::print(stderr, "{} of {} units failed:\n", failed, results.size());
              for (const UnitResult* r : sorted)
                if (r->status == UnitResult::Status::Failed) fmt::print(stderr, "  {}: {}\n", r->label, r->message);
            }
            return failed ? 1 : 0;
          }};
}

}  // namespace mapfuse::cli
