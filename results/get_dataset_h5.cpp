#include "results/get_dataset_h5.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "engine/common/error.hpp"
#include "results/get_dataset_h5_group.hpp"

namespace mapfuse {

namespace {

using namespace h5io;

struct Row {
  char* scheme;
  char* network;
  int32_t network_index, shard, split;
  double buffer_kb, buffer_need_bytes;
  uint8_t supported, valid;
  char* group;
};

struct Types {
  Handle str, mem, file;
};

Types make_types(const Context& c) {
  Types t;
  t.str = vlen_string_type(c);
  t.mem = c.check(H5Tcreate(H5T_COMPOUND, sizeof(Row)), H5Tclose, "get_dataset type");
  const hid_t s = t.str, i32 = H5T_NATIVE_INT32, f64 = H5T_NATIVE_DOUBLE, u8 = H5T_NATIVE_UINT8;
  for (const auto& [name, offset, type] : std::initializer_list<std::tuple<const char*, size_t, hid_t>>{
           {"scheme", offsetof(Row, scheme), s},
           {"network", offsetof(Row, network), s},
           {"network_index", offsetof(Row, network_index), i32},
           {"shard", offsetof(Row, shard), i32},
           {"split", offsetof(Row, split), i32},
           {"buffer_kb", offsetof(Row, buffer_kb), f64},
           {"buffer_need_bytes", offsetof(Row, buffer_need_bytes), f64},
           {"supported", offsetof(Row, supported), u8},
           {"valid", offsetof(Row, valid), u8},
           {"group", offsetof(Row, group), s}})
    c.check(H5Tinsert(t.mem, name, offset, type), std::string("get_dataset type ") + name);
  t.file = packed_copy(c, t.mem);
  return t;
}

}  // namespace

std::string get_dataset_rows_to_json(const std::vector<GetDatasetRow>& rows) {
  // Columns as arrays: a unit of a few thousand rows stays a compact line.
  nlohmann::json j;
  for (const GetDatasetRow& r : rows) {
    j["scheme"].push_back(r.scheme);
    j["network"].push_back(r.network);
    j["network_index"].push_back(r.network_index);
    j["shard"].push_back(r.shard);
    j["split"].push_back(r.split);
    j["buffer_kb"].push_back(r.buffer_kb);
    j["buffer_need_bytes"].push_back(r.buffer_need_bytes);
    j["supported"].push_back(r.supported ? 1 : 0);
    j["valid"].push_back(r.valid ? 1 : 0);
    j["group"].push_back(r.group);
  }
  if (rows.empty()) j = nlohmann::json::object();
  return j.dump();
}

std::vector<GetDatasetRow> get_dataset_rows_from_json(const std::string& text) {
  std::vector<GetDatasetRow> rows;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.empty()) return rows;
    const size_t n = j.at("group").size();
    for (const char* k : {"scheme", "network", "network_index", "shard", "split", "buffer_kb", "buffer_need_bytes",
                          "supported", "valid"})
      if (j.at(k).size() != n) throw std::runtime_error(std::string("column '") + k + "' differs in length");
    for (size_t i = 0; i < n; ++i) {
      GetDatasetRow r;
      r.scheme = j["scheme"][i].get<std::string>();
      r.network = j["network"][i].get<std::string>();
      r.network_index = j["network_index"][i].get<int32_t>();
      r.shard = j["shard"][i].get<int32_t>();
      r.split = j["split"][i].get<int32_t>();
      r.buffer_kb = j["buffer_kb"][i].get<double>();
      r.buffer_need_bytes = j["buffer_need_bytes"][i].get<double>();
      r.supported = j["supported"][i].get<int>() != 0;
      r.valid = j["valid"][i].get<int>() != 0;
      r.group = j["group"][i].get<std::string>();
      rows.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed get_dataset rows: ") + e.what());
  }
  return rows;
}

void sort_get_dataset_rows(std::vector<GetDatasetRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const GetDatasetRow& a, const GetDatasetRow& b) {
    return std::tie(a.scheme, a.network_index, a.shard) < std::tie(b.scheme, b.network_index, b.shard);
  });
}

void write_get_dataset_group(const Context& c, hid_t file, const std::vector<GetDatasetRow>& rows) {
  const Types t = make_types(c);
  std::vector<Row> out;
  out.reserve(rows.size());
  for (const GetDatasetRow& r : rows)
    out.push_back({cstr(r.scheme), cstr(r.network), r.network_index, r.shard, r.split, r.buffer_kb, r.buffer_need_bytes,
                   static_cast<uint8_t>(r.supported), static_cast<uint8_t>(r.valid), cstr(r.group)});
  Handle ds = write_dataset(c, file, "get_dataset", t.file, t.mem, {out.size()}, out.data());
  write_string_attr(c, ds, "units",
                    "one row per (fusion group, buffer size); split: 0 train, 1 validation, 2 test; buffer_kb: KiB; "
                    "buffer_need_bytes: F_beta in bytes; group: operator names joined by ';'",
                    t.str);
}

std::vector<GetDatasetRow> read_get_dataset_h5(const std::string& path) {
  Context c{path};
  QuietErrors quiet;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw InputError({path, 0, 0}, "--dataset", std::string("cannot open the dataset file: ") + std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw InputError({path, 0, 0}, "--dataset", "not an HDF5 file; expected a study file of get_dataset units or a CSV");
  std::vector<GetDatasetRow> rows;
  try {
    Handle fapl = c.check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file properties");
    c.check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "file properties");
    Handle file = c.check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), H5Fclose, "cannot open");
    if (H5Lexists(file, "get_dataset", H5P_DEFAULT) <= 0)
      throw InputError({path, 0, 0}, "--dataset",
                       "the file has no /get_dataset table; expected the study file of a [[get_dataset]] study "
                       "(`mapfuse run experiments/get_dataset.toml`)");
    const Types t = make_types(c);
    std::vector<Row> raw;
    Handle space = read_rows(c, file, "get_dataset", t.mem, raw);
    for (const Row& r : raw)
      rows.push_back({take(r.scheme), take(r.network), r.network_index, r.shard, r.split, r.buffer_kb,
                      r.buffer_need_bytes, r.supported != 0, r.valid != 0, take(r.group)});
    if (!raw.empty()) H5Dvlen_reclaim(t.mem, space, H5P_DEFAULT, raw.data());
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw InputError({path, 0, 0}, "--dataset", std::string("cannot read /get_dataset (") + e.what() + ")");
  }
  return rows;
}

}  // namespace mapfuse
