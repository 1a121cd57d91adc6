#include "results/schedule_h5.hpp"

#include <algorithm>
#include <cstddef>
#include <set>

#include "engine/common/error.hpp"
#include <nlohmann/json.hpp>

#include "results/hdf5_io.hpp"
#include "results/schedule_h5_group.hpp"

namespace mapfuse {
namespace {

using namespace h5io;

constexpr const char* kFormat = "mapfuse-schedule";
constexpr int kSchemaVersion = 1;

// Rows as HDF5 sees them in memory; strings are char* (variable-length).
struct CoreRow {
  char* name;
  double capacity_bits, peak_memory_bits;
  uint8_t offchip;
};
struct LinkRow {
  char* name;
  double bandwidth_bits_per_cc, energy_pj_per_cc;
};
struct TileRow {
  int32_t layer, sub, core, pick;
  double start, end;
};
struct TransferRow {
  int32_t tensor, sender, receiver, tile;
  char* cause;
  uint64_t link_offset, link_count;
  double start, end, bits, bandwidth_bits_per_cc;
  uint8_t occupies_links;
  double link_energy_pj, memory_energy_pj;
};
struct MemoryRow {
  int32_t core;
  double t, bits;
};
struct EnergyRow {
  char* term;
  double pj;
};

struct Compound {
  Handle mem, file;
};

// A compound of `size` bytes from (name, offset, type) members, and its packed file form.
Compound compound(const Context& c, size_t size, std::initializer_list<std::tuple<const char*, size_t, hid_t>> members) {
  Handle m = c.check(H5Tcreate(H5T_COMPOUND, size), H5Tclose, "compound type");
  for (const auto& [name, offset, type] : members) c.check(H5Tinsert(m, name, offset, type), std::string("compound type ") + name);
  Handle f = packed_copy(c, m);
  return {std::move(m), std::move(f)};
}

struct Types {
  Handle str;
  Compound core, link, tile, transfer, memory, energy;
};

Types make_types(const Context& c) {
  Types t;
  t.str = vlen_string_type(c);
  const hid_t s = t.str, i32 = H5T_NATIVE_INT32, f64 = H5T_NATIVE_DOUBLE, u8 = H5T_NATIVE_UINT8, u64 = H5T_NATIVE_UINT64;
  t.core = compound(c, sizeof(CoreRow),
                    {{"name", offsetof(CoreRow, name), s},
                     {"capacity_bits", offsetof(CoreRow, capacity_bits), f64},
                     {"peak_memory_bits", offsetof(CoreRow, peak_memory_bits), f64},
                     {"offchip", offsetof(CoreRow, offchip), u8}});
  t.link = compound(c, sizeof(LinkRow),
                    {{"name", offsetof(LinkRow, name), s},
                     {"bandwidth_bits_per_cc", offsetof(LinkRow, bandwidth_bits_per_cc), f64},
                     {"energy_pj_per_cc", offsetof(LinkRow, energy_pj_per_cc), f64}});
  t.tile = compound(c, sizeof(TileRow),
                    {{"layer", offsetof(TileRow, layer), i32},
                     {"sub", offsetof(TileRow, sub), i32},
                     {"core", offsetof(TileRow, core), i32},
                     {"pick", offsetof(TileRow, pick), i32},
                     {"start", offsetof(TileRow, start), f64},
                     {"end", offsetof(TileRow, end), f64}});
  t.transfer = compound(c, sizeof(TransferRow),
                        {{"tensor", offsetof(TransferRow, tensor), i32},
                         {"sender", offsetof(TransferRow, sender), i32},
                         {"receiver", offsetof(TransferRow, receiver), i32},
                         {"tile", offsetof(TransferRow, tile), i32},
                         {"cause", offsetof(TransferRow, cause), s},
                         {"link_offset", offsetof(TransferRow, link_offset), u64},
                         {"link_count", offsetof(TransferRow, link_count), u64},
                         {"start", offsetof(TransferRow, start), f64},
                         {"end", offsetof(TransferRow, end), f64},
                         {"bits", offsetof(TransferRow, bits), f64},
                         {"bandwidth_bits_per_cc", offsetof(TransferRow, bandwidth_bits_per_cc), f64},
                         {"occupies_links", offsetof(TransferRow, occupies_links), u8},
                         {"link_energy_pj", offsetof(TransferRow, link_energy_pj), f64},
                         {"memory_energy_pj", offsetof(TransferRow, memory_energy_pj), f64}});
  t.memory = compound(c, sizeof(MemoryRow),
                      {{"core", offsetof(MemoryRow, core), i32},
                       {"t", offsetof(MemoryRow, t), f64},
                       {"bits", offsetof(MemoryRow, bits), f64}});
  t.energy = compound(c, sizeof(EnergyRow), {{"term", offsetof(EnergyRow, term), s}, {"pj", offsetof(EnergyRow, pj), f64}});
  return t;
}

void check_record(const ScheduleRecord& r) {
  auto bad = [&](const std::string& what) { throw std::invalid_argument("schedule '" + r.name + "': " + what); };
  if (r.name.empty() || r.name.find('/') != std::string::npos || r.name == "." || r.name == "..")
    bad("a name without '/' is needed");
  const auto cores = int32_t(r.cores.size()), links = int32_t(r.links.size());
  for (const auto& t : r.tiles)
    if (t.core < 0 || t.core >= cores) bad("a tile names core " + std::to_string(t.core));
  for (const auto& t : r.transfers) {
    if (t.sender < 0 || t.sender >= cores || t.receiver < 0 || t.receiver >= cores) bad("a transfer names a core out of range");
    for (int32_t l : t.links)
      if (l < 0 || l >= links) bad("a transfer names link " + std::to_string(l));
  }
  for (const auto& m : r.memory)
    if (m.core < 0 || m.core >= cores) bad("a memory step names core " + std::to_string(m.core));
}

void write_group(const Context& c, const Types& t, hid_t parent, const ScheduleRecord& r) {
  Handle gcpl = c.check(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "group properties");
  c.check(H5Pset_obj_track_times(gcpl, 0), "group properties");
  Handle g = c.check(H5Gcreate2(parent, r.name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose, "group " + r.name);
  write_string_attr(c, g, "semantics", r.semantics, t.str);
  write_string_attr(c, g, "source", r.source, t.str);
  write_double_attr(c, g, "latency_cc", r.latency_cc);
  write_double_attr(c, g, "energy_pj", r.energy_pj);

  std::vector<CoreRow> cores;
  for (const auto& x : r.cores) cores.push_back({cstr(x.name), x.capacity_bits, x.peak_memory_bits, uint8_t(x.offchip)});
  Handle ds = write_dataset(c, g, "cores", t.core.file, t.core.mem, {cores.size()}, cores.data());
  write_string_attr(c, ds, "units", "capacity_bits, peak_memory_bits: bits of the core's top memory", t.str);

  std::vector<LinkRow> links;
  for (const auto& x : r.links) links.push_back({cstr(x.name), x.bandwidth_bits_per_cc, x.energy_pj_per_cc});
  ds = write_dataset(c, g, "links", t.link.file, t.link.mem, {links.size()}, links.data());
  write_string_attr(c, ds, "units", "bandwidth_bits_per_cc: bits/cycle; energy_pj_per_cc: pJ per busy cycle", t.str);

  std::vector<TileRow> tiles;
  for (const auto& x : r.tiles) tiles.push_back({x.layer, x.sub, x.core, x.pick, x.start, x.end});
  ds = write_dataset(c, g, "tiles", t.tile.file, t.tile.mem, {tiles.size()}, tiles.data());
  write_string_attr(c, ds, "units", "start, end: cycles; core: row of cores; pick: position in which the scheduler placed it", t.str);

  std::vector<TransferRow> transfers;
  std::vector<int32_t> path_links;
  for (const auto& x : r.transfers) {
    transfers.push_back({x.tensor, x.sender, x.receiver, x.tile, cstr(x.cause), path_links.size(), x.links.size(), x.start,
                         x.end, x.bits, x.bandwidth_bits_per_cc, uint8_t(x.occupies_links), x.link_energy_pj,
                         x.memory_energy_pj});
    path_links.insert(path_links.end(), x.links.begin(), x.links.end());
  }
  ds = write_dataset(c, g, "transfers", t.transfer.file, t.transfer.mem, {transfers.size()}, transfers.data());
  write_string_attr(c, ds, "units",
                    "start, end: cycles; bits: bits; bandwidth_bits_per_cc: per link of the path; *_energy_pj: pJ; "
                    "sender, receiver: rows of cores; tile: row of tiles; link_offset/link_count: rows of transfer_links",
                    t.str);
  ds = write_dataset(c, g, "transfer_links", H5T_STD_I32LE, H5T_NATIVE_INT32, {path_links.size()}, path_links.data());
  write_string_attr(c, ds, "units", "row of links", t.str);

  std::vector<MemoryRow> memory;
  for (const auto& x : r.memory) memory.push_back({x.core, x.t, x.bits});
  ds = write_dataset(c, g, "memory_trace", t.memory.file, t.memory.mem, {memory.size()}, memory.data());
  write_string_attr(c, ds, "units", "core: row of cores; t: cycles; bits: in use from t until the core's next row", t.str);

  std::vector<EnergyRow> energy;
  for (const auto& [term, pj] : r.energy_breakdown) energy.push_back({cstr(term), pj});
  ds = write_dataset(c, g, "energy", t.energy.file, t.energy.mem, {energy.size()}, energy.data());
  write_string_attr(c, ds, "units", "pj: pJ; the terms sum to the group's energy_pj", t.str);
}

template <class Row>
struct Table {
  std::vector<Row> rows;
  Handle space;
  hid_t mem = -1;
  ~Table() {
    if (!rows.empty()) H5Dvlen_reclaim(mem, space, H5P_DEFAULT, rows.data());
  }
};

template <class Row>
void read_table(const Context& c, hid_t g, const char* name, const Compound& type, Table<Row>& out) {
  out.mem = type.mem;
  out.space = read_rows(c, g, name, type.mem, out.rows);
}

ScheduleRecord read_group(const Context& c, const Types& t, hid_t file, const std::string& name) {
  Handle g = c.check(H5Gopen2(file, name.c_str(), H5P_DEFAULT), H5Gclose, "group " + name);
  ScheduleRecord r;
  r.name = name.substr(name.rfind('/') + 1);
  r.semantics = read_string_attr(c, g, "semantics", t.str);
  r.source = read_string_attr(c, g, "source", t.str);
  r.latency_cc = read_double_attr(c, g, "latency_cc");
  r.energy_pj = read_double_attr(c, g, "energy_pj");
  {
    Table<CoreRow> x;
    read_table(c, g, "cores", t.core, x);
    for (const auto& y : x.rows) r.cores.push_back({take(y.name), y.capacity_bits, y.peak_memory_bits, y.offchip != 0});
  }
  {
    Table<LinkRow> x;
    read_table(c, g, "links", t.link, x);
    for (const auto& y : x.rows) r.links.push_back({take(y.name), y.bandwidth_bits_per_cc, y.energy_pj_per_cc});
  }
  {
    Table<TileRow> x;
    read_table(c, g, "tiles", t.tile, x);
    for (const auto& y : x.rows) r.tiles.push_back({y.layer, y.sub, y.core, y.pick, y.start, y.end});
  }
  {
    std::vector<int32_t> path_links;
    Handle space = read_rows(c, g, "transfer_links", H5T_NATIVE_INT32, path_links);
    Table<TransferRow> x;
    read_table(c, g, "transfers", t.transfer, x);
    for (const auto& y : x.rows) {
      if (y.link_offset > path_links.size() || y.link_count > path_links.size() - y.link_offset)
        throw std::runtime_error("HDF5 file '" + c.path + "': a transfer of " + name + " indexes rows beyond transfer_links");
      ScheduleRecord::Transfer tr{y.tensor, y.sender, y.receiver, y.tile, take(y.cause), {}, y.start, y.end, y.bits,
                                  y.bandwidth_bits_per_cc, y.occupies_links != 0, y.link_energy_pj, y.memory_energy_pj};
      tr.links.assign(path_links.begin() + std::ptrdiff_t(y.link_offset),
                      path_links.begin() + std::ptrdiff_t(y.link_offset + y.link_count));
      r.transfers.push_back(std::move(tr));
    }
  }
  {
    Table<MemoryRow> x;
    read_table(c, g, "memory_trace", t.memory, x);
    for (const auto& y : x.rows) r.memory.push_back({y.core, y.t, y.bits});
  }
  {
    Table<EnergyRow> x;
    read_table(c, g, "energy", t.energy, x);
    for (const auto& y : x.rows) r.energy_breakdown.emplace_back(take(y.term), y.pj);
  }
  return r;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

Handle open_file(const Context& c) {
  Handle fapl = c.check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file properties");
  c.check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "file properties");
  return c.check(H5Fopen(c.path.c_str(), H5F_ACC_RDONLY, fapl), H5Fclose, "cannot open");
}

std::vector<ScheduleRecord> read_all(const Context& c, const Types& t, hid_t file) {
  std::vector<std::string> names;
  Handle all = c.check(H5Gopen2(file, "schedules", H5P_DEFAULT), H5Gclose, "group /schedules");
  c.check(H5Literate(all, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names), "group /schedules");
  std::vector<ScheduleRecord> out;
  for (const auto& n : names) out.push_back(read_group(c, t, file, "schedules/" + n));
  return out;
}

}  // namespace

void write_schedules_group(const h5io::Context& c, hid_t file, const std::vector<ScheduleRecord>& schedules) {
  std::set<std::string> names;
  for (const auto& r : schedules) {
    check_record(r);
    if (!names.insert(r.name).second) throw std::invalid_argument("two schedules named '" + r.name + "'");
  }
  const Types t = make_types(c);
  Handle gcpl = c.check(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "group properties");
  c.check(H5Pset_obj_track_times(gcpl, 0), "group properties");
  Handle all = c.check(H5Gcreate2(file, "schedules", H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose, "group /schedules");
  for (const auto& r : schedules) write_group(c, t, all, r);
}

void write_schedule_h5(const std::string& path, const std::vector<ScheduleRecord>& schedules) {
  std::set<std::string> names;
  for (const auto& r : schedules) {
    check_record(r);
    if (!names.insert(r.name).second) throw std::invalid_argument("two schedules named '" + r.name + "'");
  }
  Context c{path};
  QuietErrors quiet;
  write_atomically(path, [&](const std::string& tmp) {
    Handle fapl = c.check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file properties");
    c.check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "file properties");
    Handle file = c.check(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose, "cannot create");
    const Types t = make_types(c);
    write_string_attr(c, file, "format", kFormat, t.str);
    write_int_attr(c, file, "schema_version", kSchemaVersion, H5T_STD_I32LE);
    write_schedules_group(c, file, schedules);
    c.check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush");
  });
}

bool is_schedule_h5(const std::string& path) {
  Context c{path};
  QuietErrors quiet;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || H5Fis_hdf5(path.c_str()) <= 0) return false;
  try {
    Handle file = open_file(c);
    Handle str = vlen_string_type(c);
    return H5Aexists(file, "format") > 0 && read_string_attr(c, file, "format", str) == kFormat;
  } catch (const std::runtime_error&) {
    return false;
  }
}

std::vector<ScheduleRecord> read_schedule_h5(const std::string& path) {
  Context c{path};
  QuietErrors quiet;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw InputError({path, 0, 0}, "", std::string("cannot open schedule file: ") + std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw InputError({path, 0, 0}, "", "not an HDF5 file");
  try {
    Handle file = open_file(c);
    const Types t = make_types(c);
    if (H5Aexists(file, "format") <= 0 || read_string_attr(c, file, "format", t.str) != kFormat)
      throw InputError({path, 0, 0}, "", "not a mapfuse schedule file (no format = \"mapfuse-schedule\" attribute)");
    const int64_t version = read_int_attr(c, file, "schema_version");
    if (version != kSchemaVersion)
      throw InputError({path, 0, 0}, "schema_version",
                       "schedule file schema version " + std::to_string(version) + "; this mapfuse reads version " +
                           std::to_string(kSchemaVersion) + (version > kSchemaVersion ? "; read it with a newer mapfuse" : ""));
    return read_all(c, t, file);
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw InputError({path, 0, 0}, "", std::string("cannot read the schedule file, half-written or damaged (") + e.what() + ")");
  }
}

std::vector<ScheduleRecord> read_schedules_group(const std::string& path) {
  Context c{path};
  QuietErrors quiet;
  try {
    Handle file = open_file(c);
    if (H5Lexists(file, "schedules", H5P_DEFAULT) <= 0) return {};
    const Types t = make_types(c);
    return read_all(c, t, file);
  } catch (const std::runtime_error& e) {
    throw InputError({path, 0, 0}, "schedules", std::string("cannot read the schedules (") + e.what() + ")");
  }
}

// JSON: short keys per row, arrays of rows as arrays (a 4k-CT schedule is a few MB).
std::string schedule_record_to_json(const ScheduleRecord& r) {
  using nlohmann::json;
  json j;
  j["name"] = r.name;
  j["semantics"] = r.semantics;
  j["source"] = r.source;
  j["latency_cc"] = r.latency_cc;
  j["energy_pj"] = r.energy_pj;
  for (const auto& x : r.cores) j["cores"].push_back({x.name, x.capacity_bits, x.peak_memory_bits, x.offchip});
  for (const auto& x : r.links) j["links"].push_back({x.name, x.bandwidth_bits_per_cc, x.energy_pj_per_cc});
  j["tiles"] = json::array();
  for (const auto& x : r.tiles) j["tiles"].push_back({x.layer, x.sub, x.core, x.pick, x.start, x.end});
  j["transfers"] = json::array();
  for (const auto& x : r.transfers)
    j["transfers"].push_back({x.tensor, x.sender, x.receiver, x.tile, x.cause, x.links, x.start, x.end, x.bits,
                              x.bandwidth_bits_per_cc, x.occupies_links, x.link_energy_pj, x.memory_energy_pj});
  j["memory"] = json::array();
  for (const auto& x : r.memory) j["memory"].push_back({x.core, x.t, x.bits});
  j["energy"] = json::array();
  for (const auto& [term, pj] : r.energy_breakdown) j["energy"].push_back({term, pj});
  return j.dump();
}

ScheduleRecord schedule_record_from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    ScheduleRecord r;
    r.name = j.at("name").get<std::string>();
    r.semantics = j.at("semantics").get<std::string>();
    r.source = j.at("source").get<std::string>();
    r.latency_cc = j.at("latency_cc").get<double>();
    r.energy_pj = j.at("energy_pj").get<double>();
    for (const auto& x : j.value("cores", nlohmann::json::array()))
      r.cores.push_back({x.at(0).get<std::string>(), x.at(1).get<double>(), x.at(2).get<double>(), x.at(3).get<bool>()});
    for (const auto& x : j.value("links", nlohmann::json::array()))
      r.links.push_back({x.at(0).get<std::string>(), x.at(1).get<double>(), x.at(2).get<double>()});
    for (const auto& x : j.at("tiles"))
      r.tiles.push_back({x.at(0).get<int32_t>(), x.at(1).get<int32_t>(), x.at(2).get<int32_t>(), x.at(3).get<int32_t>(),
                         x.at(4).get<double>(), x.at(5).get<double>()});
    for (const auto& x : j.at("transfers"))
      r.transfers.push_back({x.at(0).get<int32_t>(), x.at(1).get<int32_t>(), x.at(2).get<int32_t>(), x.at(3).get<int32_t>(),
                             x.at(4).get<std::string>(), x.at(5).get<std::vector<int32_t>>(), x.at(6).get<double>(),
                             x.at(7).get<double>(), x.at(8).get<double>(), x.at(9).get<double>(), x.at(10).get<bool>(),
                             x.at(11).get<double>(), x.at(12).get<double>()});
    for (const auto& x : j.at("memory")) r.memory.push_back({x.at(0).get<int32_t>(), x.at(1).get<double>(), x.at(2).get<double>()});
    for (const auto& x : j.at("energy")) r.energy_breakdown.emplace_back(x.at(0).get<std::string>(), x.at(1).get<double>());
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed schedule record: ") + e.what());
  }
}

}  // namespace mapfuse
