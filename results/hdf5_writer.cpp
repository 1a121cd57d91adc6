#include "results/hdf5_writer.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "engine/common/error.hpp"
#include "results/get_dataset_h5_group.hpp"
#include "results/hdf5_io.hpp"
#include "results/schedule_h5_group.hpp"

#ifndef MAPFUSE_VERSION
#define MAPFUSE_VERSION "unknown"
#endif

namespace mapfuse {

std::string mapfuse_version_string() { return MAPFUSE_VERSION; }

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string iso8601_now() { return iso8601_utc(std::chrono::system_clock::now()); }

namespace {

using namespace h5io;

constexpr const char* kFormat = "mapfuse-study";
// 2: parameter columns in /units (docs/results.md). Files of version 1 (no such columns) still read.
constexpr int kSchemaVersion = 2;
constexpr int kOldestSchemaVersion = 1;

Handle status_type(const Context& c) {
  Handle t = c.check(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose, "status type");
  const uint8_t done = 0, failed = 1;
  c.check(H5Tenum_insert(t, "done", &done), "status type");
  c.check(H5Tenum_insert(t, "failed", &failed), "status type");
  return t;
}

// Row layouts in memory. Strings are char* (HDF5 variable-length strings).
struct UnitRow {
  char* id;
  char* kind;
  char* label;
  uint8_t status;
  char* message;
  int32_t rank;
  double wall_seconds;
  double energy_pj;
  double cycles;
  double edp;
  char* best_mapping;
  uint64_t level_offset, level_count;
  uint64_t trace_offset, trace_count;
  uint64_t pareto_offset, pareto_count;
};

struct LevelRow {
  char* name;
  double energy_pj;
  double cycles;
};

struct ParetoRow {
  double energy_pj;
  double cycles;
  char* mapping;
};

struct MetricRow {
  uint64_t unit;  // row of /units
  char* name;
  double value;
};

struct Types {
  Handle str, status, unit_mem, unit_file, level_mem, level_file, pareto_mem, pareto_file, metric_mem, metric_file;
};

// The /units compound in memory: the fixed fields of UnitRow at the start of a row of
// `row_size` bytes (the parameter columns follow them, 8 bytes each).
Handle unit_type(const Context& c, const Types& t, size_t row_size) {
  Handle u = c.check(H5Tcreate(H5T_COMPOUND, row_size), H5Tclose, "units type");
  auto ins = [&](const char* name, size_t off, hid_t type) { c.check(H5Tinsert(u, name, off, type), "units type"); };
  ins("id", HOFFSET(UnitRow, id), t.str);
  ins("kind", HOFFSET(UnitRow, kind), t.str);
  ins("label", HOFFSET(UnitRow, label), t.str);
  ins("status", HOFFSET(UnitRow, status), t.status);
  ins("message", HOFFSET(UnitRow, message), t.str);
  ins("rank", HOFFSET(UnitRow, rank), H5T_NATIVE_INT32);
  ins("wall_seconds", HOFFSET(UnitRow, wall_seconds), H5T_NATIVE_DOUBLE);
  ins("energy_pj", HOFFSET(UnitRow, energy_pj), H5T_NATIVE_DOUBLE);
  ins("cycles", HOFFSET(UnitRow, cycles), H5T_NATIVE_DOUBLE);
  ins("edp", HOFFSET(UnitRow, edp), H5T_NATIVE_DOUBLE);
  ins("best_mapping", HOFFSET(UnitRow, best_mapping), t.str);
  ins("level_offset", HOFFSET(UnitRow, level_offset), H5T_NATIVE_UINT64);
  ins("level_count", HOFFSET(UnitRow, level_count), H5T_NATIVE_UINT64);
  ins("trace_offset", HOFFSET(UnitRow, trace_offset), H5T_NATIVE_UINT64);
  ins("trace_count", HOFFSET(UnitRow, trace_count), H5T_NATIVE_UINT64);
  ins("pareto_offset", HOFFSET(UnitRow, pareto_offset), H5T_NATIVE_UINT64);
  ins("pareto_count", HOFFSET(UnitRow, pareto_count), H5T_NATIVE_UINT64);
  return u;
}

Types make_types(const Context& c) {
  Types t;
  t.str = vlen_string_type(c);
  t.status = status_type(c);
  t.unit_mem = unit_type(c, t, sizeof(UnitRow));
  t.unit_file = packed_copy(c, t.unit_mem);
  {
    Handle l = c.check(H5Tcreate(H5T_COMPOUND, sizeof(LevelRow)), H5Tclose, "levels type");
    c.check(H5Tinsert(l, "name", HOFFSET(LevelRow, name), t.str), "levels type");
    c.check(H5Tinsert(l, "energy_pj", HOFFSET(LevelRow, energy_pj), H5T_NATIVE_DOUBLE), "levels type");
    c.check(H5Tinsert(l, "cycles", HOFFSET(LevelRow, cycles), H5T_NATIVE_DOUBLE), "levels type");
    t.level_file = packed_copy(c, l);
    t.level_mem = std::move(l);
  }
  {
    Handle p = c.check(H5Tcreate(H5T_COMPOUND, sizeof(ParetoRow)), H5Tclose, "pareto type");
    c.check(H5Tinsert(p, "energy_pj", HOFFSET(ParetoRow, energy_pj), H5T_NATIVE_DOUBLE), "pareto type");
    c.check(H5Tinsert(p, "cycles", HOFFSET(ParetoRow, cycles), H5T_NATIVE_DOUBLE), "pareto type");
    c.check(H5Tinsert(p, "mapping", HOFFSET(ParetoRow, mapping), t.str), "pareto type");
    t.pareto_file = packed_copy(c, p);
    t.pareto_mem = std::move(p);
  }
  {
    Handle m = c.check(H5Tcreate(H5T_COMPOUND, sizeof(MetricRow)), H5Tclose, "metrics type");
    c.check(H5Tinsert(m, "unit", HOFFSET(MetricRow, unit), H5T_NATIVE_UINT64), "metrics type");
    c.check(H5Tinsert(m, "name", HOFFSET(MetricRow, name), t.str), "metrics type");
    c.check(H5Tinsert(m, "value", HOFFSET(MetricRow, value), H5T_NATIVE_DOUBLE), "metrics type");
    t.metric_file = packed_copy(c, m);
    t.metric_mem = std::move(m);
  }
  return t;
}

hid_t column_mem_type(const Types& t, UnitColumn::Type type) {
  return type == UnitColumn::Type::Text ? t.str.get() : type == UnitColumn::Type::Integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
}

// ---- writing -------------------------------------------------------------------------------

void write_file(const Context& c, const std::string& tmp, const StudyMeta& meta,
                const std::vector<UnitResult>& results) {
  Handle fapl = c.check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file properties");
  c.check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "file properties");
  Handle file = c.check(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose, "cannot create");
  Types t = make_types(c);

  write_string_attr(c, file, "format", kFormat, t.str);
  write_int_attr(c, file, "schema_version", kSchemaVersion, H5T_STD_I32LE);

  std::size_t failed = 0;
  for (const auto& r : results) failed += r.status == UnitResult::Status::Failed;
  {
    Handle gcpl = c.check(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "group properties");
    c.check(H5Pset_obj_track_times(gcpl, 0), "group properties");
    Handle g = c.check(H5Gcreate2(file, "study", H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose, "group /study");
    write_string_attr(c, g, "name", meta.name, t.str);
    write_string_attr(c, g, "study_id", meta.study_id, t.str);
    write_string_attr(c, g, "toml", meta.toml_text, t.str);
    write_string_attr(c, g, "mapfuse_version", meta.mapfuse_version, t.str);
    write_string_attr(c, g, "start_time", meta.start_time, t.str);
    write_string_attr(c, g, "end_time", meta.end_time, t.str);
    write_int_attr(c, g, "ranks", meta.ranks, H5T_STD_I32LE);
    write_int_attr(c, g, "threads", meta.threads, H5T_STD_I32LE);
    write_int_attr(c, g, "unit_count", static_cast<int64_t>(results.size()), H5T_STD_I64LE);
    write_int_attr(c, g, "failed_count", static_cast<int64_t>(failed), H5T_STD_I64LE);
    if (!meta.slice.whole()) {  // only in a slice's partial file: a whole study's file has neither
      write_int_attr(c, g, "slice_index", meta.slice.index, H5T_STD_I32LE);
      write_int_attr(c, g, "slice_count", meta.slice.count, H5T_STD_I32LE);
    }
  }

  std::vector<UnitRow> units;
  std::vector<LevelRow> levels;
  std::vector<double> trace;  // row-major N x 3
  std::vector<ParetoRow> pareto;
  std::vector<MetricRow> metrics;
  units.reserve(results.size());
  for (const auto& r : results) {
    for (const auto& m : r.metrics) metrics.push_back({units.size(), cstr(m.name), m.value});
    const std::size_t nl = r.level_names.size();
    if (r.level_energy_pj.size() != nl || r.level_cycles.size() != nl)
      throw std::invalid_argument("unit " + r.unit_id + ": level_names, level_energy_pj and level_cycles differ in length");
    UnitRow u{};
    u.id = cstr(r.unit_id);
    u.kind = cstr(r.kind);
    u.label = cstr(r.label);
    u.status = r.status == UnitResult::Status::Done ? 0 : 1;
    u.message = cstr(r.message);
    u.rank = r.rank;
    u.wall_seconds = r.wall_seconds;
    u.energy_pj = r.energy_pj;
    u.cycles = r.cycles;
    u.edp = r.edp;
    u.best_mapping = cstr(r.best_mapping);
    u.level_offset = levels.size();
    u.level_count = nl;
    for (std::size_t i = 0; i < nl; ++i) levels.push_back({cstr(r.level_names[i]), r.level_energy_pj[i], r.level_cycles[i]});
    u.trace_offset = trace.size() / 3;
    u.trace_count = r.trace.size();
    for (const auto& p : r.trace) {
      trace.push_back(p.seconds);
      trace.push_back(static_cast<double>(p.evaluations));
      trace.push_back(p.best);
    }
    u.pareto_offset = pareto.size();
    u.pareto_count = r.pareto.size();
    for (const auto& p : r.pareto) pareto.push_back({p.energy_pj, p.cycles, cstr(p.mapping)});
    units.push_back(u);
  }

  {
    // Rows of UnitRow followed by one 8-byte cell per parameter column.
    const std::vector<UnitColumn> columns = table_columns(results);
    const size_t row_size = sizeof(UnitRow) + 8 * columns.size();
    Handle mem = unit_type(c, t, row_size);
    for (size_t j = 0; j < columns.size(); ++j)
      c.check(H5Tinsert(mem, columns[j].name.c_str(), sizeof(UnitRow) + 8 * j, column_mem_type(t, columns[j].type)), "units type");
    Handle file_type = packed_copy(c, mem);
    std::vector<unsigned char> rows(row_size * units.size());
    std::vector<std::string> texts(columns.size() * units.size());
    for (size_t i = 0; i < units.size(); ++i) {
      unsigned char* row = rows.data() + i * row_size;
      std::memcpy(row, &units[i], sizeof(UnitRow));
      for (size_t j = 0; j < columns.size(); ++j) {
        const UnitColumn* given = find_column(results[i].columns, columns[j].name);
        const UnitColumn& cell = given ? *given : columns[j];
        unsigned char* at = row + sizeof(UnitRow) + 8 * j;
        if (cell.type == UnitColumn::Type::Text) {
          texts[i * columns.size() + j] = cell.text;
          char* p = cstr(texts[i * columns.size() + j]);
          std::memcpy(at, &p, sizeof p);
        } else if (cell.type == UnitColumn::Type::Integer) {
          std::memcpy(at, &cell.integer, 8);
        } else {
          std::memcpy(at, &cell.real, 8);
        }
      }
    }
    Handle ds = write_dataset(c, file, "units", file_type, mem, {units.size()}, rows.data());
    write_string_attr(c, ds, "units",
                      "wall_seconds: s; energy_pj: pJ; cycles: cycles; edp: pJ*cycles; "
                      "*_offset/*_count: rows of /levels, /trace, /pareto; sweep parameter columns: "
                      "the architecture parameter's own unit",
                      t.str);
  }
  {
    Handle ds = write_dataset(c, file, "levels", t.level_file, t.level_mem, {levels.size()}, levels.data());
    write_string_attr(c, ds, "units", "energy_pj: pJ; cycles: cycles", t.str);
  }
  {
    Handle ds = write_dataset(c, file, "trace", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {trace.size() / 3, 3}, trace.data());
    write_string_attr(c, ds, "columns", "seconds,evaluations,best", t.str);
    write_string_attr(c, ds, "units", "seconds: s since the unit started; evaluations: count; best: objective", t.str);
  }
  {
    Handle ds = write_dataset(c, file, "pareto", t.pareto_file, t.pareto_mem, {pareto.size()}, pareto.data());
    write_string_attr(c, ds, "units", "energy_pj: pJ; cycles: cycles", t.str);
  }
  if (!metrics.empty()) {  // only in files of kinds that report named metrics (get_partition)
    Handle ds = write_dataset(c, file, "metrics", t.metric_file, t.metric_mem, {metrics.size()}, metrics.data());
    write_string_attr(c, ds, "units", "unit: row of /units; value: in the unit its name says (dram_mb: MiB, mbu_kb: KiB, ...)",
                      t.str);
  }
  // "schedule" units carry their schedule in UnitResult::data: /schedules, as in a schedule file.
  std::vector<ScheduleRecord> schedules;
  for (const auto& r : results)
    if (r.kind == "schedule" && r.status == UnitResult::Status::Done && !r.data.empty())
      schedules.push_back(schedule_record_from_json(r.data));
  if (!schedules.empty()) write_schedules_group(c, file, schedules);
  // "get_dataset" units carry their labelled groups: /get_dataset, in the single-process order.
  std::vector<GetDatasetRow> dataset;
  for (const auto& r : results)
    if (r.kind == "get_dataset" && r.status == UnitResult::Status::Done && !r.data.empty()) {
      std::vector<GetDatasetRow> rows = get_dataset_rows_from_json(r.data);
      dataset.insert(dataset.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    }
  if (!dataset.empty()) {
    sort_get_dataset_rows(dataset);
    write_get_dataset_group(c, file, dataset);
  }
  c.check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush");
  // Types and file close here (H5F_CLOSE_STRONG: everything still open goes with the file).
}

// ---- reading -------------------------------------------------------------------------------

// The parameter columns of /units (none in a schema-1 file), per row; missing cells left out.
std::vector<std::vector<UnitColumn>> read_unit_columns(const Context& c, hid_t file, const Types& t) {
  Handle ds = c.check(H5Dopen2(file, "units", H5P_DEFAULT), H5Dclose, "dataset units");
  Handle type = c.check(H5Dget_type(ds), H5Tclose, "dataset units");
  Handle space = c.check(H5Dget_space(ds), H5Sclose, "dataset units");
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const int members = H5Tget_nmembers(type);
  if (n < 0 || members < 0) c.fail("dataset units");
  std::vector<UnitColumn> columns;
  for (int k = 0; k < members; ++k) {
    char* name = H5Tget_member_name(type, static_cast<unsigned>(k));
    const std::string s = take(name);
    H5free_memory(name);
    if (is_fixed_unit_field(s)) continue;
    const H5T_class_t cls = H5Tget_member_class(type, static_cast<unsigned>(k));
    const UnitColumn::Type ct = cls == H5T_STRING    ? UnitColumn::Type::Text
                                : cls == H5T_INTEGER ? UnitColumn::Type::Integer
                                : cls == H5T_FLOAT   ? UnitColumn::Type::Real
                                                     : throw std::runtime_error("HDF5 file '" + c.path + "': units column '" + s +
                                                                                "' is not a string, integer or float");
    columns.push_back({s, ct, {}, 0, 0});
  }
  std::vector<std::vector<UnitColumn>> out(static_cast<size_t>(n));
  if (columns.empty() || n == 0) return out;
  Handle mem = c.check(H5Tcreate(H5T_COMPOUND, 8 * columns.size()), H5Tclose, "units columns type");
  for (size_t j = 0; j < columns.size(); ++j)
    c.check(H5Tinsert(mem, columns[j].name.c_str(), 8 * j, column_mem_type(t, columns[j].type)), "units columns type");
  std::vector<unsigned char> cells(8 * columns.size() * static_cast<size_t>(n));
  c.check(H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, cells.data()), "dataset units");
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < columns.size(); ++j) {
      const unsigned char* at = cells.data() + 8 * (i * columns.size() + j);
      UnitColumn cell{columns[j].name, columns[j].type, {}, 0, 0};
      if (cell.type == UnitColumn::Type::Text) {
        char* p;
        std::memcpy(&p, at, sizeof p);
        cell.text = take(p);
      } else if (cell.type == UnitColumn::Type::Integer) {
        std::memcpy(&cell.integer, at, 8);
      } else {
        std::memcpy(&cell.real, at, 8);
      }
      if (!is_missing_cell(cell)) out[i].push_back(std::move(cell));
    }
  H5Dvlen_reclaim(mem, space, H5P_DEFAULT, cells.data());
  return out;
}

}  // namespace

void write_study_h5(const std::string& path, const StudyMeta& meta, std::vector<UnitResult> results) {
  std::sort(results.begin(), results.end(),
            [](const UnitResult& a, const UnitResult& b) { return a.unit_id < b.unit_id; });
  for (std::size_t i = 1; i < results.size(); ++i)
    if (results[i].unit_id == results[i - 1].unit_id)
      throw std::invalid_argument("two results for unit " + results[i].unit_id);

  Context c{path};
  QuietErrors quiet;
  write_atomically(path, [&](const std::string& tmp) { write_file(c, tmp, meta, results); });
}

namespace {

StudyFile read_study_file(const std::string& path) {
  Context c{path};
  QuietErrors quiet;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw InputError({path, 0, 0}, "", std::string("cannot open study file: ") + std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw InputError({path, 0, 0}, "", "not an HDF5 file");
  Handle fapl = c.check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file properties");
  c.check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "file properties");
  Handle file = c.check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), H5Fclose, "cannot open");
  Types t = make_types(c);

  if (H5Aexists(file, "format") <= 0 || read_string_attr(c, file, "format", t.str) != kFormat)
    throw InputError({path, 0, 0}, "", "not a mapfuse study file (no format = \"mapfuse-study\" attribute)");
  const int64_t version = read_int_attr(c, file, "schema_version");
  if (version > kSchemaVersion)
    throw InputError({path, 0, 0}, "", "written by a newer mapfuse: study file schema version " + std::to_string(version) +
                                           ", this mapfuse reads versions " + std::to_string(kOldestSchemaVersion) + " to " +
                                           std::to_string(kSchemaVersion) + "; read it with a newer mapfuse");
  if (version < kOldestSchemaVersion)
    throw InputError({path, 0, 0}, "", "study file schema version " + std::to_string(version) + " is not supported (this mapfuse reads " +
                                           std::to_string(kOldestSchemaVersion) + " to " + std::to_string(kSchemaVersion) + ")");

  StudyFile out;
  {
    Handle g = c.check(H5Gopen2(file, "study", H5P_DEFAULT), H5Gclose, "group /study");
    out.meta.name = read_string_attr(c, g, "name", t.str);
    out.meta.study_id = read_string_attr(c, g, "study_id", t.str);
    out.meta.toml_text = read_string_attr(c, g, "toml", t.str);
    out.meta.mapfuse_version = read_string_attr(c, g, "mapfuse_version", t.str);
    out.meta.start_time = read_string_attr(c, g, "start_time", t.str);
    out.meta.end_time = read_string_attr(c, g, "end_time", t.str);
    out.meta.ranks = static_cast<int>(read_int_attr(c, g, "ranks"));
    out.meta.threads = static_cast<int>(read_int_attr(c, g, "threads"));
    if (H5Aexists(g, "slice_count") > 0) {
      out.meta.slice.index = static_cast<int>(read_int_attr(c, g, "slice_index"));
      out.meta.slice.count = static_cast<int>(read_int_attr(c, g, "slice_count"));
    }
  }

  std::vector<UnitRow> units;
  std::vector<LevelRow> levels;
  std::vector<ParetoRow> pareto;
  std::vector<MetricRow> metrics;
  std::vector<double> trace;
  Handle units_space = read_rows(c, file, "units", t.unit_mem, units);
  Handle levels_space, pareto_space, metrics_space;
  try {
    levels_space = read_rows(c, file, "levels", t.level_mem, levels);
    pareto_space = read_rows(c, file, "pareto", t.pareto_mem, pareto);
    if (H5Lexists(file, "metrics", H5P_DEFAULT) > 0) metrics_space = read_rows(c, file, "metrics", t.metric_mem, metrics);
    {
      Handle ds = c.check(H5Dopen2(file, "trace", H5P_DEFAULT), H5Dclose, "dataset trace");
      Handle space = c.check(H5Dget_space(ds), H5Sclose, "dataset trace");
      hsize_t dims[2] = {0, 0};
      if (H5Sget_simple_extent_ndims(space) != 2 || H5Sget_simple_extent_dims(space, dims, nullptr) < 0 || dims[1] != 3)
        throw std::runtime_error("HDF5 file '" + path + "': dataset trace is not N x 3");
      trace.assign(dims[0] * 3, 0.0);
      if (dims[0] > 0) c.check(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, trace.data()), "dataset trace");
    }
    std::vector<std::vector<UnitColumn>> columns = read_unit_columns(c, file, t);
    if (columns.size() != units.size()) c.fail("dataset units");
    auto in_range = [](uint64_t off, uint64_t count, std::size_t size) { return off <= size && count <= size - off; };
    out.results.reserve(units.size());
    for (size_t ui = 0; ui < units.size(); ++ui) {
      const UnitRow& u = units[ui];
      UnitResult r;
      r.unit_id = take(u.id);
      r.kind = take(u.kind);
      r.label = take(u.label);
      r.columns = std::move(columns[ui]);
      r.status = u.status == 0 ? UnitResult::Status::Done : UnitResult::Status::Failed;
      r.message = take(u.message);
      r.rank = u.rank;
      r.wall_seconds = u.wall_seconds;
      r.energy_pj = u.energy_pj;
      r.cycles = u.cycles;
      r.edp = u.edp;
      r.best_mapping = take(u.best_mapping);
      if (!in_range(u.level_offset, u.level_count, levels.size()) ||
          !in_range(u.trace_offset, u.trace_count, trace.size() / 3) ||
          !in_range(u.pareto_offset, u.pareto_count, pareto.size()))
        throw std::runtime_error("HDF5 file '" + path + "': unit " + r.unit_id + " indexes rows beyond its tables");
      for (uint64_t i = u.level_offset; i < u.level_offset + u.level_count; ++i) {
        r.level_names.push_back(take(levels[i].name));
        r.level_energy_pj.push_back(levels[i].energy_pj);
        r.level_cycles.push_back(levels[i].cycles);
      }
      for (uint64_t i = u.trace_offset; i < u.trace_offset + u.trace_count; ++i)
        r.trace.push_back({trace[3 * i], static_cast<int64_t>(std::llround(trace[3 * i + 1])), trace[3 * i + 2]});
      for (uint64_t i = u.pareto_offset; i < u.pareto_offset + u.pareto_count; ++i)
        r.pareto.push_back({pareto[i].energy_pj, pareto[i].cycles, take(pareto[i].mapping)});
      out.results.push_back(std::move(r));
    }
    for (const MetricRow& m : metrics) {
      if (m.unit >= out.results.size())
        throw std::runtime_error("HDF5 file '" + path + "': a metric names unit row " + std::to_string(m.unit) +
                                 " beyond /units");
      out.results[m.unit].metrics.push_back({take(m.name), m.value});
    }
  } catch (...) {
    if (!units.empty()) H5Dvlen_reclaim(t.unit_mem, units_space, H5P_DEFAULT, units.data());
    if (!levels.empty()) H5Dvlen_reclaim(t.level_mem, levels_space, H5P_DEFAULT, levels.data());
    if (!pareto.empty()) H5Dvlen_reclaim(t.pareto_mem, pareto_space, H5P_DEFAULT, pareto.data());
    if (!metrics.empty()) H5Dvlen_reclaim(t.metric_mem, metrics_space, H5P_DEFAULT, metrics.data());
    throw;
  }
  if (!units.empty()) H5Dvlen_reclaim(t.unit_mem, units_space, H5P_DEFAULT, units.data());
  if (!levels.empty()) H5Dvlen_reclaim(t.level_mem, levels_space, H5P_DEFAULT, levels.data());
  if (!pareto.empty()) H5Dvlen_reclaim(t.pareto_mem, pareto_space, H5P_DEFAULT, pareto.data());
  if (!metrics.empty()) H5Dvlen_reclaim(t.metric_mem, metrics_space, H5P_DEFAULT, metrics.data());
  // A run refuses to mix producers, so the file's version/fingerprint is every result's.
  for (UnitResult& r : out.results) r.producer = out.meta.mapfuse_version;
  return out;
}

}  // namespace

StudyFile read_study_h5(const std::string& path) {
  try {
    return read_study_file(path);
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    // HDF5 cannot read it: a file cut short (copied while written, a full disk) or damaged.
    std::string why = e.what();
    const std::string prefix = "HDF5 file '" + path + "': ";
    if (why.starts_with(prefix)) why = why.substr(prefix.size());
    throw InputError({path, 0, 0}, "", "cannot read the study file, half-written or damaged (" + why + ")");
  }
}

}  // namespace mapfuse
