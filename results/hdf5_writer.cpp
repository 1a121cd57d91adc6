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
#include <stdexcept>

#include "engine/common/error.hpp"

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

constexpr const char* kFormat = "mapfuse-study";
constexpr int kSchemaVersion = 1;

// ---- HDF5 plumbing -------------------------------------------------------------------------

// The HDF5 error stack prints itself to stderr by default; we turn failures into exceptions.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

herr_t innermost_error(unsigned n, const H5E_error2_t* e, void* data) {
  if (n == 0 && e->desc) *static_cast<std::string*>(data) = e->desc;
  return 0;
}

std::string hdf5_error() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_error, &s);
  return s.empty() ? "HDF5 error" : s;
}

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

struct Context {
  std::string path;
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("HDF5 file '" + path + "': " + what + ": " + hdf5_error());
  }
  Handle check(hid_t id, Handle::Closer close, const std::string& what) const {
    if (id < 0) fail(what);
    return Handle(id, close);
  }
  void check(herr_t status, const std::string& what) const {
    if (status < 0) fail(what);
  }
};

Handle vlen_string_type(const Context& c) {
  Handle t = c.check(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  c.check(H5Tset_size(t, H5T_VARIABLE), "string type");
  c.check(H5Tset_cset(t, H5T_CSET_UTF8), "string type");
  return t;
}

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

struct Types {
  Handle str, status, unit_mem, unit_file, level_mem, level_file, pareto_mem, pareto_file;
};

Handle packed_copy(const Context& c, hid_t mem) {
  Handle f = c.check(H5Tcopy(mem), H5Tclose, "compound type");
  c.check(H5Tpack(f), "compound type");
  return f;
}

Types make_types(const Context& c) {
  Types t;
  t.str = vlen_string_type(c);
  t.status = status_type(c);
  {
    Handle u = c.check(H5Tcreate(H5T_COMPOUND, sizeof(UnitRow)), H5Tclose, "units type");
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
    t.unit_file = packed_copy(c, u);
    t.unit_mem = std::move(u);
  }
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
  return t;
}

char* cstr(const std::string& s) { return const_cast<char*>(s.c_str()); }

// ---- writing -------------------------------------------------------------------------------

void write_string_attr(const Context& c, hid_t obj, const char* name, const std::string& value, hid_t str) {
  Handle space = c.check(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle a = c.check(H5Acreate2(obj, name, str, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                     std::string("attribute ") + name);
  const char* p = value.c_str();
  c.check(H5Awrite(a, str, &p), std::string("attribute ") + name);
}

void write_int_attr(const Context& c, hid_t obj, const char* name, int64_t value, hid_t file_type) {
  Handle space = c.check(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle a = c.check(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                     std::string("attribute ") + name);
  c.check(H5Awrite(a, H5T_NATIVE_INT64, &value), std::string("attribute ") + name);
}

Handle write_dataset(const Context& c, hid_t parent, const char* name, hid_t file_type, hid_t mem_type,
                     const std::vector<hsize_t>& dims, const void* data) {
  Handle space = c.check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                         std::string("dataspace of ") + name);
  Handle dcpl = c.check(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
  c.check(H5Pset_obj_track_times(dcpl, 0), "dataset properties");  // same data, same file
  Handle ds = c.check(H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
                      std::string("dataset ") + name);
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (n > 0) c.check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), std::string("dataset ") + name);
  return ds;
}

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
  units.reserve(results.size());
  for (const auto& r : results) {
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
    Handle ds = write_dataset(c, file, "units", t.unit_file, t.unit_mem, {units.size()}, units.data());
    write_string_attr(c, ds, "units",
                      "wall_seconds: s; energy_pj: pJ; cycles: cycles; edp: pJ*cycles; "
                      "*_offset/*_count: rows of /levels, /trace, /pareto",
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
  c.check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush");
  // Types and file close here (H5F_CLOSE_STRONG: everything still open goes with the file).
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    if (directory) return;  // best effort
    throw std::runtime_error("cannot reopen '" + path + "' to sync it: " + std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !directory) throw std::runtime_error("cannot sync '" + path + "': " + std::strerror(err));
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// ---- reading -------------------------------------------------------------------------------

std::string read_string_attr(const Context& c, hid_t obj, const char* name, hid_t str) {
  Handle a = c.check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("attribute ") + name);
  Handle space = c.check(H5Aget_space(a), H5Sclose, std::string("attribute ") + name);
  char* p = nullptr;
  c.check(H5Aread(a, str, &p), std::string("attribute ") + name);
  std::string out = p ? p : "";
  H5Dvlen_reclaim(str, space, H5P_DEFAULT, &p);
  return out;
}

int64_t read_int_attr(const Context& c, hid_t obj, const char* name) {
  Handle a = c.check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("attribute ") + name);
  int64_t v = 0;
  c.check(H5Aread(a, H5T_NATIVE_INT64, &v), std::string("attribute ") + name);
  return v;
}

// Reads a whole dataset of `rows` rows into `out` (resized); returns its dataspace for reclaiming.
template <class Row>
Handle read_rows(const Context& c, hid_t file, const char* name, hid_t mem_type, std::vector<Row>& out) {
  Handle ds = c.check(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, std::string("dataset ") + name);
  Handle space = c.check(H5Dget_space(ds), H5Sclose, std::string("dataset ") + name);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) c.fail(std::string("dataset ") + name);
  out.assign(static_cast<std::size_t>(n), Row{});
  if (n > 0) c.check(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), std::string("dataset ") + name);
  return space;
}

std::string take(char* p) { return p ? std::string(p) : std::string(); }

}  // namespace

void write_study_h5(const std::string& path, const StudyMeta& meta, std::vector<UnitResult> results) {
  std::sort(results.begin(), results.end(),
            [](const UnitResult& a, const UnitResult& b) { return a.unit_id < b.unit_id; });
  for (std::size_t i = 1; i < results.size(); ++i)
    if (results[i].unit_id == results[i - 1].unit_id)
      throw std::invalid_argument("two results for unit " + results[i].unit_id);

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  Context c{path};
  QuietErrors quiet;
  try {
    write_file(c, tmp, meta, results);
    fsync_path(tmp, false);
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  fsync_path(dir_of(path), true);
}

StudyFile read_study_h5(const std::string& path) {
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
  if (version != kSchemaVersion)
    throw InputError({path, 0, 0}, "", "study file schema version " + std::to_string(version) +
                                           " is not supported (expected " + std::to_string(kSchemaVersion) + ")");

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
  std::vector<double> trace;
  Handle units_space = read_rows(c, file, "units", t.unit_mem, units);
  Handle levels_space, pareto_space;
  try {
    levels_space = read_rows(c, file, "levels", t.level_mem, levels);
    pareto_space = read_rows(c, file, "pareto", t.pareto_mem, pareto);
    {
      Handle ds = c.check(H5Dopen2(file, "trace", H5P_DEFAULT), H5Dclose, "dataset trace");
      Handle space = c.check(H5Dget_space(ds), H5Sclose, "dataset trace");
      hsize_t dims[2] = {0, 0};
      if (H5Sget_simple_extent_ndims(space) != 2 || H5Sget_simple_extent_dims(space, dims, nullptr) < 0 || dims[1] != 3)
        throw std::runtime_error("HDF5 file '" + path + "': dataset trace is not N x 3");
      trace.assign(dims[0] * 3, 0.0);
      if (dims[0] > 0) c.check(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, trace.data()), "dataset trace");
    }
    auto in_range = [](uint64_t off, uint64_t count, std::size_t size) { return off <= size && count <= size - off; };
    out.results.reserve(units.size());
    for (const UnitRow& u : units) {
      UnitResult r;
      r.unit_id = take(u.id);
      r.kind = take(u.kind);
      r.label = take(u.label);
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
  } catch (...) {
    if (!units.empty()) H5Dvlen_reclaim(t.unit_mem, units_space, H5P_DEFAULT, units.data());
    if (!levels.empty()) H5Dvlen_reclaim(t.level_mem, levels_space, H5P_DEFAULT, levels.data());
    if (!pareto.empty()) H5Dvlen_reclaim(t.pareto_mem, pareto_space, H5P_DEFAULT, pareto.data());
    throw;
  }
  if (!units.empty()) H5Dvlen_reclaim(t.unit_mem, units_space, H5P_DEFAULT, units.data());
  if (!levels.empty()) H5Dvlen_reclaim(t.level_mem, levels_space, H5P_DEFAULT, levels.data());
  if (!pareto.empty()) H5Dvlen_reclaim(t.pareto_mem, pareto_space, H5P_DEFAULT, pareto.data());
  // A run refuses to mix producers, so the file's version/fingerprint is every result's.
  for (UnitResult& r : out.results) r.producer = out.meta.mapfuse_version;
  return out;
}

}  // namespace mapfuse
