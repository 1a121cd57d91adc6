#include "engine/arch/stream_yaml.hpp"

#include <algorithm>
#include <cctype>
#include <type_traits>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "engine/arch/topology.hpp"
#include "engine/common/yaml_file.hpp"

namespace mapfuse {
namespace fs = std::filesystem;
namespace {

constexpr int kWordBits = 8;  // Stream's activations and weights; capacities are counted in bytes

struct Ctx {
  std::string file;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& key, const std::string& msg) const {
    throw InputError(yaml_location(file, n), key, msg);
  }
  YAML::Node need(const YAML::Node& parent, const std::string& key, const std::string& path) const {
    if (!parent.IsMap()) fail(parent, path, "expected a map");
    YAML::Node n = parent[key];
    if (!n) fail(parent, path.empty() ? key : path + "." + key, "missing required key");
    return n;
  }
  template <class T>
  T as(const YAML::Node& n, const std::string& key, const char* what) const {
    try {
      if constexpr (std::is_arithmetic_v<T>) {
        // Stream reads its files with PyYAML (YAML 1.1), where `32_000` is the number 32000
        // (fusemax_dram.yaml); yaml-cpp (YAML 1.2) does not know digit separators.
        if (n.IsScalar() && n.Scalar().find('_') != std::string::npos) {
          std::string digits;
          for (char ch : n.Scalar())
            if (ch != '_') digits += ch;
          if (!digits.empty() && std::isdigit(static_cast<unsigned char>(digits.back())))
            return YAML::Node(digits).as<T>();
        }
      }
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, key, std::string("expected ") + what);
    }
  }
};

struct Port {
  std::string type;
  double bw_max = 0;
};

struct StreamMemory {
  std::string name;
  double size_bits = 0, r_cost = 0, w_cost = 0;
  RoleMask roles = 0;
  std::vector<Port> ports;
  std::set<std::string> served;
  YAML::Node node;
};

StreamMemory read_memory(const Ctx& c, const std::string& name, const YAML::Node& m, const std::string& key) {
  StreamMemory s;
  s.name = name;
  s.node = m;
  s.size_bits = c.as<double>(c.need(m, "size", key), key + ".size", "a size in bits");
  if (s.size_bits <= 0) c.fail(m, key + ".size", "expected a positive size in bits");
  s.r_cost = c.as<double>(c.need(m, "r_cost", key), key + ".r_cost", "pJ per read access");
  s.w_cost = c.as<double>(c.need(m, "w_cost", key), key + ".w_cost", "pJ per write access");
  for (const auto& op : c.need(m, "operands", key)) {
    const std::string o = c.as<std::string>(op, key + ".operands", "an operand name");
    if (o == "I1") s.roles |= role_bit(TensorRole::Input);
    else if (o == "I2") s.roles |= role_bit(TensorRole::Weight);
    else if (o == "O") s.roles |= role_bit(TensorRole::Output);
    else c.fail(op, key + ".operands", "unknown operand '" + o + "'; expected I1, I2 or O");
  }
  // ZigZag's older memory form (classic's fusemax_vec.yaml rf_O): `r_bw` / `w_bw` bits per cycle
  // and `r_port` / `w_port` / `rw_port` counts, ports as maps of allocations without a type.
  if (m["r_bw"] || m["w_bw"]) {
    const double r_bw = c.as<double>(c.need(m, "r_bw", key), key + ".r_bw", "bits per cycle");
    const double w_bw = c.as<double>(c.need(m, "w_bw", key), key + ".w_bw", "bits per cycle");
    if (r_bw <= 0 || w_bw <= 0) c.fail(m, key + ".r_bw", "expected positive r_bw and w_bw (bits per cycle)");
    auto count = [&](const char* k) {
      return m[k] ? c.as<int64_t>(m[k], key + "." + k, "a number of ports") : int64_t{0};
    };
    const int64_t r = count("r_port"), w = count("w_port"), rw = count("rw_port");
    if (r + w + rw < 1) c.fail(m, key + ".r_port", "expected at least one of r_port, w_port, rw_port >= 1");
    for (int64_t i = 0; i < r; ++i) s.ports.push_back({"read", r_bw});
    for (int64_t i = 0; i < w; ++i) s.ports.push_back({"write", w_bw});
    for (int64_t i = 0; i < rw; ++i) s.ports.push_back({"read_write", std::max(r_bw, w_bw)});
    if (m["served_dimensions"])
      for (const auto& d : m["served_dimensions"]) s.served.insert(c.as<std::string>(d, key + ".served_dimensions", "a dimension name"));
    return s;
  }
  for (const auto& p : c.need(m, "ports", key)) {
    Port port;
    port.type = c.as<std::string>(c.need(p, "type", key + ".ports"), key + ".ports.type", "read, write or read_write");
    if (port.type != "read" && port.type != "write" && port.type != "read_write")
      c.fail(p, key + ".ports.type", "'" + port.type + "'; expected read, write or read_write");
    port.bw_max = c.as<double>(c.need(p, "bandwidth_max", key + ".ports"), key + ".ports.bandwidth_max", "bits per cycle");
    if (port.bw_max <= 0) c.fail(p, key + ".ports.bandwidth_max", "expected a positive number of bits per cycle");
    s.ports.push_back(port);
  }
  if (m["served_dimensions"])
    for (const auto& d : m["served_dimensions"]) s.served.insert(c.as<std::string>(d, key + ".served_dimensions", "a dimension name"));
  return s;
}

// Capacity, per-word energies and bandwidths (words per cycle) of a ZigZag memory.
Level to_level(const StreamMemory& m) {
  Level lv;
  lv.name = m.name;
  lv.word_bits = kWordBits;
  lv.entries = static_cast<int64_t>(m.size_bits / kWordBits);
  double rd = 0, wr = 0, rw = 0, rd_width = 0, wr_width = 0;
  for (const Port& p : m.ports) {
    if (p.type == "read") rd += p.bw_max;
    if (p.type == "write") wr += p.bw_max;
    if (p.type == "read_write") rw += p.bw_max;
    if (p.type != "write" && rd_width == 0) rd_width = p.bw_max;
    if (p.type != "read" && wr_width == 0) wr_width = p.bw_max;
  }
  if (rd == 0 && wr == 0) {
    lv.shared_bandwidth = rw / kWordBits;
  } else {
    lv.read_bandwidth = (rd + rw) / kWordBits;
    lv.write_bandwidth = (wr + rw) / kWordBits;
  }
  // r_cost / w_cost are per access of bandwidth_max bits (ZigZag); per word:
  lv.read_pj = rd_width > 0 ? m.r_cost * kWordBits / rd_width : m.r_cost;
  lv.write_pj = lv.update_pj = wr_width > 0 ? m.w_cost * kWordBits / wr_width : m.w_cost;
  lv.may_keep = m.roles;
  return lv;
}

struct Axis {
  std::vector<std::string> ranks;
  RoleMask reuse = 0;
  int64_t size = 1;
};

// Stream's loop names (ZigZag's conv naming) as mapfuse rank names. A guard role keeps a name that
// means something else in another Einsum off the axis: K (output channels) must not index inputs,
// so a matmul's reduction rank K is refused there and its output rank N accepted.
Axis translate(const Ctx& c, const YAML::Node& where, const std::string& key, const std::string& dim, bool mac_core) {
  Axis a;
  if (!mac_core && (dim == "K" || dim == "C")) return {{"C"}, 0, 1};  // channels of pooling / element-wise
  if (dim == "K") return {{"K", "N"}, role_bit(TensorRole::Input), 1};
  if (dim == "C") return {{"C", "K"}, role_bit(TensorRole::Output), 1};
  if (dim == "FX") return {{"S"}, role_bit(TensorRole::Output), 1};
  if (dim == "FY") return {{"R"}, role_bit(TensorRole::Output), 1};
  if (dim == "OX") return {{"Q", "M"}, role_bit(TensorRole::Weight), 1};
  if (dim == "OY") return {{"P", "M"}, role_bit(TensorRole::Weight), 1};
  if (dim == "D") return {{"M", "P"}, role_bit(TensorRole::Weight), 1};
  if (dim == "B") return {{"N"}, role_bit(TensorRole::Weight), 1};
  if (dim == "G") return {{"G"}, 0, 1};
  c.fail(where, key, "unknown loop dimension '" + dim + "'; expected one of K, C, FX, FY, OX, OY, B, G, D");
}

// "K, 32" (or [K, 32]) -> (K, 32)
std::pair<std::string, int64_t> unroll_entry(const Ctx& c, const YAML::Node& e, const std::string& key) {
  std::string text;
  if (e.IsSequence() && e.size() == 2) {
    text = c.as<std::string>(e[0], key, "a loop name") + "," + c.as<std::string>(e[1], key, "an unroll size");
  } else {
    text = c.as<std::string>(e, key, "'<loop>, <size>'");
  }
  const auto comma = text.find(',');
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  if (comma == std::string::npos) c.fail(e, key, "'" + text + "': expected '<loop>, <size>' such as 'K, 32'");
  const std::string dim = trim(text.substr(0, comma)), size = trim(text.substr(comma + 1));
  char* end = nullptr;
  const long long v = std::strtoll(size.c_str(), &end, 10);
  if (dim.empty() || size.empty() || *end != 0 || v < 1)
    c.fail(e, key, "'" + text + "': expected '<loop>, <size>' with a positive integer size");
  return {dim, v};
}

OpMask runs_from_operator_types(const Ctx& c, const YAML::Node& list, const std::string& key) {
  OpMask m = 0;
  for (const auto& t : list) {
    const std::string s = c.as<std::string>(t, key, "an ONNX operator name");
    if (s == "MatMul" || s == "Gemm" || s == "Conv" || s == "Einsum") m |= op_bit(OpKind::Mac);
    else if (s.find("Pool") != std::string::npos) m |= op_bit(OpKind::Pool);
    else if (s == "Softmax" || s.rfind("Reduce", 0) == 0) m |= op_bit(OpKind::Softmax);
    else m |= op_bit(OpKind::Elementwise);
  }
  return m;
}

Core read_compute_core(const Ctx& c, const YAML::Node& doc, const std::string& name, const std::string& stem,
                       const Level& dram) {
  Core core;
  core.name = name;
  if (doc["operator_types"]) core.runs = runs_from_operator_types(c, doc["operator_types"], "operator_types");
  else if (stem.find("pool") != std::string::npos) core.runs = op_bit(OpKind::Pool);
  else if (stem.find("simd") != std::string::npos || stem.find("vec") != std::string::npos)
    core.runs = op_bit(OpKind::Elementwise) | op_bit(OpKind::Softmax);
  const bool mac_core = core.can_run(OpKind::Mac);

  // `multipliers` is ZigZag's older name of the operational array (classic's meta_prototype.yaml).
  const YAML::Node oa = doc["multipliers"] && !doc["operational_array"] ? doc["multipliers"]
                                                                        : c.need(doc, "operational_array", "");
  core.compute.name = "MAC";
  core.compute.energy_pj = c.as<double>(c.need(oa, "unit_energy", "operational_array"), "operational_array.unit_energy",
                                         "pJ per operation");
  std::vector<std::string> dims;
  std::vector<int64_t> sizes;
  for (const auto& d : c.need(oa, "dimensions", "operational_array"))
    dims.push_back(c.as<std::string>(d, "operational_array.dimensions", "a dimension name"));
  for (const auto& s : c.need(oa, "sizes", "operational_array"))
    sizes.push_back(c.as<int64_t>(s, "operational_array.sizes", "an integer size"));
  if (dims.size() != sizes.size())
    c.fail(oa, "operational_array.sizes", fmt::format("{} sizes for {} dimensions; expected one size per dimension",
                                                      sizes.size(), dims.size()));
  // Every array dimension's spatial axes: the dataflow's unrollings (each its own axis, so a
  // mixed C|FX|FY on one physical dimension keeps each rank to its own size), else one axis
  // open to any rank.
  std::map<std::string, std::vector<Axis>> axes;
  const YAML::Node df = doc["dataflows"];
  if (df && !df.IsMap()) c.fail(df, "dataflows", "expected a map from array dimension to '<loop>, <size>' entries");
  for (size_t i = 0; i < dims.size(); ++i) {
    std::vector<Axis> v;
    if (df && df[dims[i]]) {
      const YAML::Node entries = df[dims[i]];
      if (!entries.IsSequence() || entries.size() == 0)
        c.fail(entries, "dataflows." + dims[i], "expected a list of '<loop>, <size>' entries");
      int64_t product = 1;
      for (const auto& e : entries) {
        auto [dim, size] = unroll_entry(c, e, "dataflows." + dims[i]);
        Axis a = translate(c, e, "dataflows." + dims[i], dim, mac_core);
        a.size = size;
        product *= size;
        v.push_back(std::move(a));
      }
      if (product > sizes[i]) {
        // ZigZag never unrolls beyond the array: a single unrolling is clipped (Stream's
        // eyeriss_like: K 16 on 14 columns); several that overflow are an error.
        if (v.size() > 1)
          c.fail(entries, "dataflows." + dims[i],
                 fmt::format("unrolls {} on a dimension of {}; expected at most the array's size", product, sizes[i]));
        v[0].size = sizes[i];
      }
    } else if (sizes[i] > 1) {
      v.push_back({{}, 0, sizes[i]});
    }
    axes[dims[i]] = std::move(v);
  }
  if (df)
    for (const auto& kv : df)
      if (std::find(dims.begin(), dims.end(), kv.first.as<std::string>()) == dims.end())
        c.fail(kv.first, "dataflows." + kv.first.as<std::string>(),
               "names no dimension of the operational array; expected one of " + fmt::format("{}", fmt::join(dims, ", ")));

  std::vector<StreamMemory> mems;
  const YAML::Node memories = c.need(doc, "memories", "");
  if (!memories.IsMap() || memories.size() == 0) c.fail(memories, "memories", "expected a map of memories");
  for (const auto& kv : memories) {
    const std::string n = kv.first.as<std::string>();
    mems.push_back(read_memory(c, n, kv.second, "memories." + n));
    for (const auto& d : mems.back().served)
      if (std::find(dims.begin(), dims.end(), d) == dims.end())
        c.fail(kv.second, "memories." + n + ".served_dimensions", "names no dimension of the operational array");
  }
  // The chain, innermost first: a memory shared along fewer dimensions sits lower.
  auto unserved = [&](const StreamMemory& m) {
    std::vector<std::string> u;
    for (const auto& d : dims)
      if (!m.served.count(d)) u.push_back(d);
    return u;
  };
  std::stable_sort(mems.begin(), mems.end(),
                   [&](const StreamMemory& a, const StreamMemory& b) { return unserved(a).size() > unserved(b).size(); });
  std::vector<std::vector<std::string>> chain_dims;  // unserved dims per memory, then {} for DRAM
  for (const auto& m : mems) chain_dims.push_back(unserved(m));
  chain_dims.push_back({});
  // Served dimensions that do not nest (classic's meta_prototype: weight registers per D1 x D2,
  // output registers per D1 x D3 x D4) have no chain of fan-outs; the outer memory is then taken
  // as shared along the inner one's dimensions too (fewer, not smaller, instances: an
  // approximation documented in docs/architectures.md).
  for (size_t i = 0; i + 1 < chain_dims.size(); ++i)
    std::erase_if(chain_dims[i + 1], [&](const std::string& d) {
      return std::find(chain_dims[i].begin(), chain_dims[i].end(), d) == chain_dims[i].end();
    });

  // Levels innermost first; axes of the dimensions a memory serves but the next inner one does
  // not fan out from it, two per level, extra ones from keep-nothing levels just below it.
  auto fan = [&](const std::vector<std::string>& inner, const std::vector<std::string>& outer) {
    std::vector<Axis> out;
    for (const auto& d : inner)
      if (std::find(outer.begin(), outer.end(), d) == outer.end())
        for (const Axis& a : axes[d])
          if (a.size > 1) out.push_back(a);
    return out;
  };
  auto set_axis = [](Fanout& f, const Axis& a, bool x) {
    (x ? f.x : f.y) = a.size;
    (x ? f.x_ranks : f.y_ranks) = a.ranks;
    (x ? f.x_reuse : f.y_reuse) = a.reuse;
  };
  std::vector<Level> levels;
  auto place = [&](Level outer, std::vector<Axis> ax) {
    // returns the levels to append (keep-nothing helpers first, then `outer`)
    std::vector<Level> out;
    while (ax.size() > 2) {
      Level helper;
      helper.name = fmt::format("{}_array{}", outer.name, out.size());
      helper.entries = 1;
      helper.may_keep = 0;
      const size_t k = ax.size() >= 4 ? ax.size() - 2 : 2;
      set_axis(helper.fanout, ax[k], true);
      if (k + 1 < ax.size()) set_axis(helper.fanout, ax[k + 1], false);
      ax.resize(k);
      out.insert(out.begin(), helper);
    }
    if (!ax.empty()) set_axis(outer.fanout, ax[0], true);
    if (ax.size() > 1) set_axis(outer.fanout, ax[1], false);
    out.push_back(std::move(outer));
    return out;
  };
  // The innermost memory fans out into the MACs along the dimensions it serves.
  const std::vector<std::string>& all = dims;
  for (size_t i = 0; i < mems.size(); ++i) {
    const std::vector<std::string>& inner = i == 0 ? all : chain_dims[i - 1];
    for (Level& lv : place(to_level(mems[i]), fan(inner, chain_dims[i]))) levels.push_back(std::move(lv));
  }
  for (Level& lv : place(dram, fan(chain_dims[mems.size() - 1], {}))) levels.push_back(std::move(lv));
  if (levels.size() > kMaxLevels)
    c.fail(memories, "memories",
           fmt::format("needs {} levels (memories, DRAM and helper levels for more than two array axes per memory); "
                       "at most {} are supported",
                       levels.size(), kMaxLevels));
  core.levels = std::move(levels);
  finalize(core, c.file + ":" + name);
  return core;
}

fs::path resolve_core_file(const Ctx& c, const YAML::Node& where, const fs::path& dir, const std::string& ref) {
  std::error_code ec;
  const fs::path as_written = dir / ref;
  if (fs::is_regular_file(as_written, ec)) return as_written;
  const fs::path name = fs::path(ref).filename();
  if (fs::is_regular_file(dir / "cores" / name, ec)) return dir / "cores" / name;
  std::vector<fs::path> found;
  const fs::path root = dir.parent_path().parent_path();
  if (fs::is_directory(root, ec))
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      const fs::path& p = it->path();
      if (p.filename() == name && p.parent_path().filename() == "cores" &&
          p.parent_path().parent_path().filename().string().rfind("hardware", 0) == 0)
        found.push_back(p);
    }
  std::sort(found.begin(), found.end());
  if (found.empty())
    c.fail(where, "cores", "core file '" + ref + "' not found next to the system file, in its cores/ folder or in any "
                           "*/hardware*/cores/ folder below " + root.string());
  return found.front();
}

}  // namespace

bool is_stream_hardware_yaml(const std::string& path) {
  try {
    const YAML::Node n = YAML::LoadFile(path);
    return n.IsMap() && n["cores"] && n["core_connectivity"];
  } catch (const YAML::ParserException&) {
    return true;  // malformed: let load_stream_hardware report where
  } catch (const YAML::Exception&) {
    return false;
  }
}

Architecture load_stream_hardware(const std::string& path) {
  const YAML::Node doc = load_yaml_file(path);
  Ctx c{path};
  if (!doc.IsMap()) c.fail(doc, "", "expected a Stream hardware file (a map with name, cores, core_connectivity)");
  Architecture a;
  a.name = c.as<std::string>(c.need(doc, "name", ""), "name", "a string");
  a.description = "converted from Stream hardware " + fs::path(path).filename().string();
  const YAML::Node cores = c.need(doc, "cores", "");
  if (!cores.IsMap()) c.fail(cores, "cores", "expected a map from core id to core file");
  const YAML::Node off = c.need(doc, "offchip_core_id", "");
  const int64_t offchip_id = c.as<int64_t>(off, "offchip_core_id", "a core id");
  const double default_energy = doc["unit_energy_cost"] ? c.as<double>(doc["unit_energy_cost"], "unit_energy_cost", "pJ per cycle") : 0;
  const fs::path dir = fs::path(path).parent_path();

  // Read every file first: the off-chip memory becomes every compute core's outermost level.
  struct Entry {
    int64_t id;
    fs::path file;
    YAML::Node doc;
    YAML::Node where;
  };
  std::vector<Entry> entries;
  std::set<int64_t> ids;
  for (const auto& kv : cores) {
    Entry e;
    e.id = c.as<int64_t>(kv.first, "cores", "an integer core id");
    if (!ids.insert(e.id).second) c.fail(kv.first, fmt::format("cores.{}", e.id), "core id repeats");
    e.file = resolve_core_file(c, kv.second, dir, c.as<std::string>(kv.second, fmt::format("cores.{}", e.id), "a core file name"));
    e.doc = load_yaml_file(e.file.string());
    e.where = kv.second;
    entries.push_back(std::move(e));
  }
  if (!ids.count(offchip_id)) c.fail(off, "offchip_core_id", fmt::format("core {} is not listed under cores", offchip_id));
  std::map<int64_t, int> node_of;  // Stream core id -> node id (compute cores first, then memories)
  std::vector<std::pair<int64_t, MemoryNode>> mems;
  auto node_name = [](const Entry& e) { return fmt::format("{}_{}", e.file.stem().string(), e.id); };
  auto memory_of = [&](const Entry& e) {
    const Ctx cc{e.file.string()};
    const YAML::Node ms = cc.need(e.doc, "memories", "");
    if (!ms.IsMap() || ms.size() == 0) cc.fail(ms, "memories", "expected a map of memories");
    // The outermost (last listed) memory fronts the node.
    auto it = ms.begin();
    for (size_t i = 1; i < ms.size(); ++i) ++it;
    const std::string mn = it->first.as<std::string>();
    Level lv = to_level(read_memory(cc, mn, it->second, "memories." + mn));
    lv.name = node_name(e);
    return lv;
  };
  Level dram;
  for (const Entry& e : entries)
    if (e.id == offchip_id) dram = memory_of(e);
  for (const Entry& e : entries) {
    const std::string type = e.doc["type"] ? e.doc["type"].as<std::string>() : "compute";
    if (e.id == offchip_id) {
      mems.insert(mems.begin(), {e.id, MemoryNode{dram.name, dram, true}});
    } else if (type.find("memory") != std::string::npos || type.find("offchip") != std::string::npos) {
      Level lv = memory_of(e);
      mems.push_back({e.id, MemoryNode{lv.name, lv, false}});
    } else {
      node_of[e.id] = static_cast<int>(a.cores.size());
      a.cores.push_back(read_compute_core(Ctx{e.file.string()}, e.doc, node_name(e), e.file.stem().string(), dram));
    }
  }
  for (auto& [id, m] : mems) {
    node_of[id] = a.node_count();
    a.memories.push_back(std::move(m));
  }
  a.offchip = node_of.at(offchip_id);

  const YAML::Node conn = c.need(doc, "core_connectivity", "");
  if (!conn.IsSequence()) c.fail(conn, "core_connectivity", "expected a list of links and buses");
  int index = 0;
  for (const auto& l : conn) {
    const std::string key = fmt::format("core_connectivity[{}]", index++);
    const std::string type = c.as<std::string>(c.need(l, "type", key), key + ".type", "link or bus");
    if (type != "link" && type != "bus") c.fail(l["type"], key + ".type", "'" + type + "'; expected link or bus");
    std::vector<int> nodes;
    for (const auto& n : c.need(l, "cores", key)) {
      const int64_t id = c.as<int64_t>(n, key + ".cores", "a core id");
      if (!node_of.count(id)) c.fail(n, key + ".cores", fmt::format("core {} is not listed under cores", id));
      nodes.push_back(node_of[id]);
    }
    Link k;
    k.bits_per_cycle = c.as<double>(c.need(l, "bandwidth", key), key + ".bandwidth", "bits per cycle");
    if (k.bits_per_cycle <= 0) c.fail(l["bandwidth"], key + ".bandwidth", "expected a positive number of bits per cycle");
    k.pj_per_cycle = l["unit_energy_cost"] ? c.as<double>(l["unit_energy_cost"], key + ".unit_energy_cost", "pJ per cycle")
                                           : default_energy;
    if (type == "bus") {
      if (nodes.size() < 2) c.fail(l, key + ".cores", "a bus needs at least two cores");
      k.bus = true;
      k.name = fmt::format("bus{}", index - 1);
      k.nodes = nodes;
      a.links.push_back(std::move(k));
    } else {
      if (nodes.size() != 2 || nodes[0] == nodes[1]) c.fail(l, key + ".cores", "a link joins exactly two different cores");
      // Stream's links carry data both ways, each direction its own resource.
      for (int d = 0; d < 2; ++d) {
        Link one = k;
        one.nodes = {nodes[d], nodes[1 - d]};
        one.name = fmt::format("link{}:{}->{}", index - 1, a.node_name(one.nodes[0]), a.node_name(one.nodes[1]));
        a.links.push_back(std::move(one));
      }
    }
  }
  if (doc["core_memory_sharing"])
    a.description += "; core_memory_sharing not modelled (each core keeps its own memories)";
  try {
    finalize_system(a, "");
  } catch (const InputError& e) {
    throw InputError({path, 0, 0}, e.key().empty() ? e.key() : e.key().substr(1), e.message());
  }
  return a;
}

}  // namespace mapfuse
