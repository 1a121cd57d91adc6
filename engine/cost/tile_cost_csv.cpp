#include "engine/cost/tile_cost_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

constexpr const char* kFixed[] = {"layer", "core", "latency_cc", "onchip_energy_pj", "offchip_energy_pj", "offchip"};

bool is_fixed(const std::string& c) {
  return std::find(std::begin(kFixed), std::end(kFixed), c) != std::end(kFixed);
}

[[noreturn]] void fail(const CsvTable& t, size_t row, int col, const std::string& what) {
  throw InputError({t.source, int(row) + 2, col + 1}, col >= 0 ? t.header[size_t(col)] : "", what);
}

template <class T>
bool parse_num(std::string_view s, T& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

double number(const CsvTable& t, size_t row, int col) {
  double v = 0;
  const std::string& s = t.rows[row][size_t(col)];
  if (!parse_num(s, v)) fail(t, row, col, "expected a number, got '" + s + "'");
  if (v < 0) fail(t, row, col, "expected a non-negative number, got '" + s + "'");
  return v;
}

// What a rank cell asks of a CT's range.
struct RangeMatch {
  enum Kind : uint8_t { Whole, Any, Exact, Size } kind = Whole;
  int64_t a = 0, b = 0;
  bool matches(Range r, int64_t rank_size) const {
    switch (kind) {
      case Whole: return r.lo == 0 && r.hi >= rank_size;
      case Any: return true;
      case Exact:  // a range over the whole rank is the whole rank (a Pad remainder may extend it)
        return (r.lo == a && r.hi == b) || (a == 0 && b >= rank_size && r.lo == 0 && r.hi >= rank_size);
      case Size: return r.hi - r.lo == a;
    }
    return false;
  }
};

RangeMatch parse_range(const CsvTable& t, size_t row, int col) {
  const std::string& s = t.rows[row][size_t(col)];
  RangeMatch m;
  if (s.empty()) return m;
  if (s == "*") {
    m.kind = RangeMatch::Any;
    return m;
  }
  const auto colon = s.find(':');
  if (colon == std::string::npos) {
    m.kind = RangeMatch::Size;
    if (!parse_num(std::string_view(s), m.a) || m.a <= 0)
      fail(t, row, col, "expected lo:hi, a positive size, '*' or empty (the whole rank), got '" + s + "'");
    return m;
  }
  m.kind = RangeMatch::Exact;
  if (!parse_num(std::string_view(s).substr(0, colon), m.a) || !parse_num(std::string_view(s).substr(colon + 1), m.b) ||
      m.b <= m.a)
    fail(t, row, col, "expected lo:hi with lo < hi, a positive size, '*' or empty (the whole rank), got '" + s + "'");
  return m;
}

// An operand label of Einsum e: "O", "I<k>" (k-th non-output tensor) or a tensor name; -1 if none.
int operand_index(const Einsum& e, std::string_view label) {
  if (label == "O") return e.output_index();
  if (label.size() >= 2 && label[0] == 'I') {
    int k = 0;
    if (parse_num(label.substr(1), k)) {
      for (int i = 0; i < int(e.tensors.size()); ++i)
        if (e.tensors[size_t(i)].role != TensorRole::Output && k-- == 0) return i;
      return -1;
    }
  }
  return e.tensor_index(label);
}

std::vector<std::string> operand_labels(const Einsum& e) {
  std::vector<std::string> out{"O"};
  int k = 0;
  for (const auto& ta : e.tensors)
    if (ta.role != TensorRole::Output) out.push_back("I" + std::to_string(k++));
  for (const auto& ta : e.tensors) out.push_back(ta.name);
  return out;
}

std::string label_of(const Einsum& e, int tensor) {
  if (e.tensors[size_t(tensor)].role == TensorRole::Output) return "O";
  int k = 0;
  for (int i = 0; i < tensor; ++i) k += e.tensors[size_t(i)].role != TensorRole::Output;
  return "I" + std::to_string(k);
}

struct Row {
  int layer = -1, core = -1;
  std::vector<RangeMatch> ranks;  // per rank of the layer's Einsum
  TileCost cost;
  size_t line = 0;
};

std::string describe_tile(const Workload& w, const TileSet& ts, int tile) {
  const Tile& t = ts.tiles[size_t(tile)];
  const Einsum& e = w.einsums[size_t(t.layer)];
  std::string s = fmt::format("CT {} of layer '{}' (sub {}", tile, e.name, t.sub_id);
  const auto rr = ts.rank_ranges(tile);
  for (size_t r = 0; r < rr.size(); ++r) s += fmt::format(" {}[{},{})", e.ranks[r].name, rr[r].lo, rr[r].hi);
  return s + ")";
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::vector<TileCost> tile_costs_from_table(const CsvTable& t, const Workload& w, const TileSet& ts,
                                            const Architecture& arch, std::span<const int> core_of_tile) {
  if (core_of_tile.size() != ts.tiles.size())
    throw InputError({}, "core_of_tile", fmt::format("{} cores for {} CTs", core_of_tile.size(), ts.tiles.size()));
  const int c_layer = t.column("layer"), c_core = t.column("core"), c_lat = t.column("latency_cc"),
            c_on = t.column("onchip_energy_pj"), c_off = t.column("offchip_energy_pj");
  const auto off_it = std::find(t.header.begin(), t.header.end(), "offchip");
  const int c_offchip = off_it == t.header.end() ? -1 : int(off_it - t.header.begin());
  std::vector<std::string> layer_names, core_names;
  for (const auto& e : w.einsums) layer_names.push_back(e.name);
  for (const auto& c : arch.cores) core_names.push_back(c.name);

  // Rank columns: every other header cell names a rank of some layer.
  std::map<std::string, int> rank_col;
  std::set<std::string> all_ranks;
  for (const auto& e : w.einsums)
    for (const auto& r : e.ranks) all_ranks.insert(r.name);
  for (size_t c = 0; c < t.header.size(); ++c) {
    const std::string& h = t.header[c];
    if (is_fixed(h)) continue;
    if (!all_ranks.count(h))
      throw InputError({t.source, 1, int(c) + 1}, h,
                       "not a rank of any layer, nor one of layer, core, latency_cc, onchip_energy_pj, "
                       "offchip_energy_pj, offchip" +
                           did_you_mean(h, std::vector<std::string>(all_ranks.begin(), all_ranks.end())));
    rank_col[h] = int(c);
  }

  std::vector<Row> rows;
  rows.reserve(t.rows.size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    Row r;
    r.line = i + 2;
    const std::string& ln = t.rows[i][size_t(c_layer)];
    r.layer = w.einsum_index(ln);
    if (r.layer < 0) fail(t, i, c_layer, "unknown layer '" + ln + "'" + did_you_mean(ln, layer_names));
    const std::string& cn = t.rows[i][size_t(c_core)];
    for (size_t c = 0; c < arch.cores.size(); ++c)
      if (arch.cores[c].name == cn) r.core = int(c);
    if (r.core < 0) fail(t, i, c_core, "unknown core '" + cn + "'" + did_you_mean(cn, core_names));
    const Einsum& e = w.einsums[size_t(r.layer)];
    r.ranks.resize(e.ranks.size());
    for (const auto& [name, col] : rank_col) {
      const int k = e.rank_index(name);
      if (k < 0) {
        if (!t.rows[i][size_t(col)].empty())
          fail(t, i, col, "'" + name + "' is not a rank of layer '" + e.name + "'; leave the cell empty");
        continue;
      }
      r.ranks[size_t(k)] = parse_range(t, i, col);
    }
    r.cost.latency_cc = number(t, i, c_lat);
    r.cost.onchip_energy_pj = number(t, i, c_on);
    r.cost.offchip_energy_pj = number(t, i, c_off);
    r.cost.operands.assign(e.tensors.size(), OperandCost{});
    if (c_offchip >= 0) {
      const std::string& cell = t.rows[i][size_t(c_offchip)];
      size_t a = 0;
      while (a < cell.size()) {
        size_t b = cell.find(';', a);
        if (b == std::string::npos) b = cell.size();
        const std::string item = cell.substr(a, b - a);
        a = b + 1;
        if (item.empty()) continue;
        const auto eq = item.find('=');
        const std::string label = item.substr(0, eq);
        const int op = operand_index(e, label);
        if (op < 0)
          fail(t, i, c_offchip, "unknown operand '" + label + "' of layer '" + e.name + "' (expected O, I<k> or a tensor name)" +
                                    did_you_mean(label, operand_labels(e)));
        double bw = 0;
        if (eq == std::string::npos || !parse_num(std::string_view(item).substr(eq + 1), bw) || bw < 0)
          fail(t, i, c_offchip, "expected <operand>=<DRAM bits per cycle>, got '" + item + "'");
        r.cost.operands[size_t(op)] = {true, bw, 0};
      }
    }
    rows.push_back(std::move(r));
  }

  // The first matching row wins. Rows whose cells are all ranges or whole ranks (what
  // write_tile_costs writes, one per CT) are found by hashing (layer, core, ranges), whole ranks
  // normalised; the others are scanned in file order, up to the hashed hit's row.
  const int64_t ncores = int64_t(arch.cores.size());
  auto put = [](std::string& k, int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto head = [&](std::string& k, int layer, int core) {
    k.clear();
    put(k, layer);
    put(k, core);
  };
  constexpr int64_t kWhole = -1;
  std::unordered_map<std::string, int> exact;          // key -> first row
  std::unordered_map<int64_t, std::vector<int>> other;  // (layer, core) -> rows in file order
  std::string key;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const Einsum& e = w.einsums[size_t(r.layer)];
    bool hashable = true;
    head(key, r.layer, r.core);
    for (size_t k = 0; k < r.ranks.size() && hashable; ++k) {
      const RangeMatch& m = r.ranks[k];
      const bool whole = m.kind == RangeMatch::Whole ||
                         (m.kind == RangeMatch::Exact && m.a == 0 && m.b >= e.ranks[k].size);
      hashable = whole || m.kind == RangeMatch::Exact;
      put(key, whole ? kWhole : m.a);
      put(key, whole ? kWhole : m.b);
    }
    if (hashable)
      exact.emplace(key, int(i));
    else
      other[r.layer * ncores + r.core].push_back(int(i));
  }
  std::vector<TileCost> out(ts.tiles.size());
  for (size_t tile = 0; tile < ts.tiles.size(); ++tile) {
    const Tile& ct = ts.tiles[tile];
    const int core = core_of_tile[tile];
    if (core < 0 || core >= ncores)
      throw InputError({}, "core_of_tile", fmt::format("core {} of CT {} is not a core of '{}'", core, tile, arch.name));
    const Einsum& e = w.einsums[size_t(ct.layer)];
    const auto rr = ts.rank_ranges(int(tile));
    head(key, ct.layer, core);
    for (size_t k = 0; k < rr.size(); ++k) {
      const bool whole = rr[k].lo == 0 && rr[k].hi >= e.ranks[k].size;
      put(key, whole ? kWhole : rr[k].lo);
      put(key, whole ? kWhole : rr[k].hi);
    }
    auto ex = exact.find(key);
    const Row* hit = ex == exact.end() ? nullptr : &rows[size_t(ex->second)];
    if (auto it = other.find(ct.layer * ncores + core); it != other.end())
      for (int ri : it->second) {
        if (hit && ri > ex->second) break;
        const Row& r = rows[size_t(ri)];
        bool ok = true;
        for (size_t k = 0; k < rr.size() && ok; ++k) ok = r.ranks[k].matches(rr[k], e.ranks[k].size);
        if (ok) {
          hit = &r;
          break;
        }
      }
    if (!hit)
      throw InputError({t.source, 0, 0}, "",
                       "no row for " + describe_tile(w, ts, int(tile)) + " on core '" + arch.cores[size_t(core)].name + "'");
    // The row's operands are per Einsum tensor, and a CT lists its accesses in that order.
    if (ts.tiles[tile].n_accesses != e.tensors.size())
      throw InputError({}, "tiles", fmt::format("CT {} has {} accesses for {} tensors of '{}'", tile,
                                                ts.tiles[tile].n_accesses, e.tensors.size(), e.name));
    out[tile] = hit->cost;
  }
  return out;
}

std::vector<TileCost> read_tile_costs(const std::string& path, const Workload& w, const TileSet& tiles,
                                      const Architecture& arch, std::span<const int> core_of_tile) {
  return tile_costs_from_table(read_csv(path), w, tiles, arch, core_of_tile);
}

void write_tile_costs(const std::string& path, const Workload& w, const TileSet& ts, const Architecture& arch,
                      std::span<const int> core_of_tile, std::span<const TileCost> costs) {
  if (core_of_tile.size() != ts.tiles.size() || costs.size() != ts.tiles.size())
    throw InputError({}, path, "write_tile_costs: one core and one cost per CT expected");
  std::vector<std::string> ranks;  // the union, in order of first appearance
  for (const auto& e : w.einsums)
    for (const auto& r : e.ranks)
      if (std::find(ranks.begin(), ranks.end(), r.name) == ranks.end()) ranks.push_back(r.name);
  std::string text = "layer,core";
  for (const auto& r : ranks) text += "," + csv_cell(r);
  text += ",latency_cc,onchip_energy_pj,offchip_energy_pj,offchip\n";
  std::set<std::string> seen;  // (layer, core, ranges): a later duplicate would never match
  for (size_t tile = 0; tile < ts.tiles.size(); ++tile) {
    const Tile& ct = ts.tiles[tile];
    const Einsum& e = w.einsums[size_t(ct.layer)];
    const auto rr = ts.rank_ranges(int(tile));
    std::string row = csv_cell(e.name) + "," + csv_cell(arch.cores[size_t(core_of_tile[tile])].name);
    for (const auto& name : ranks) {
      row += ",";
      const int k = e.rank_index(name);
      if (k < 0) continue;
      const Range r = rr[size_t(k)];
      if (!(r.lo == 0 && r.hi >= e.ranks[size_t(k)].size)) row += fmt::format("{}:{}", r.lo, r.hi);
    }
    if (!seen.insert(row).second) continue;
    const TileCost& c = costs[tile];
    row += fmt::format(",{},{},{},", c.latency_cc, c.onchip_energy_pj, c.offchip_energy_pj);
    std::string off;  // a CT's accesses are in the Einsum's tensor order
    for (size_t a = 0; a < c.operands.size() && a < e.tensors.size(); ++a)
      if (c.operands[a].offchip)
        off += fmt::format("{}{}={}", off.empty() ? "" : ";", label_of(e, int(a)), c.operands[a].dram_bits_per_cycle);
    text += row + off + "\n";
  }
  std::ofstream out(path);
  if (!out) throw InputError({path, 0, 0}, "", "cannot write the tile-cost table");
  out << text;
  if (!out) throw InputError({path, 0, 0}, "", "write failed");
}

CsvTable stream_cost_lut_table(const std::string& folder, const Workload& w, const Architecture& arch) {
  namespace fs = std::filesystem;
  const CsvTable cns = read_csv((fs::path(folder) / "cns.csv").string());
  const CsvTable lut = read_csv((fs::path(folder) / "cost_lut.csv").string());
  std::map<std::string, size_t> lut_row;
  {
    const int c = lut.column("lut_row");
    for (size_t i = 0; i < lut.rows.size(); ++i) lut_row[lut.rows[i][size_t(c)]] = i;
  }
  const int l_lat = lut.column("latency_total2"), l_on = lut.column("onchip_energy"), l_off = lut.column("offchip_energy"),
            l_tl = lut.column("too_large_operands"), l_tll = lut.column("too_large_layer_operands");
  const int c_name = cns.column("layer_name"), c_op = cns.column("op_type"), c_core = cns.column("core"),
            c_lut = cns.column("lut_row");
  // Stream's loop dimension -> mapfuse rank, per Stream op type.
  static const std::map<std::string, std::vector<std::pair<std::string, std::string>>> dims = {
      {"conv", {{"B", "N"}, {"K", "K"}, {"G", "G"}, {"OX", "Q"}, {"OY", "P"}, {"C", "C"}, {"FX", "S"}, {"FY", "R"}}},
      {"relu", {{"B", "N"}, {"H", "C"}, {"D", "H"}, {"K", "W"}}},
      {"add", {{"B", "N"}, {"H", "C"}, {"D", "H"}, {"K", "W"}}},
      {"pooling", {{"B", "N"}, {"K", "C"}, {"OX", "Q"}, {"OY", "P"}, {"FX", "S"}, {"FY", "R"}}},
      {"gemm", {{"D", "M"}, {"C", "K"}, {"K", "N"}}}};
  std::vector<std::string> ranks;
  for (const auto& e : w.einsums)
    for (const auto& r : e.ranks)
      if (std::find(ranks.begin(), ranks.end(), r.name) == ranks.end()) ranks.push_back(r.name);
  CsvTable out;
  out.source = folder + " (Stream cost LUT)";
  out.header = {"layer", "core"};
  out.header.insert(out.header.end(), ranks.begin(), ranks.end());
  for (const char* c : {"latency_cc", "onchip_energy_pj", "offchip_energy_pj", "offchip"}) out.header.push_back(c);
  std::set<std::vector<std::string>> seen;
  auto cell_int = [&](size_t row, const std::string& col) {
    int64_t v = 0;
    const int c = cns.column(col);
    if (!parse_num(std::string_view(cns.rows[row][size_t(c)]), v)) fail(cns, row, c, "expected an integer");
    return v;
  };
  for (size_t i = 0; i < cns.rows.size(); ++i) {
    const auto& row = cns.rows[i];
    const int layer = w.einsum_index(row[size_t(c_name)]);
    if (layer < 0) fail(cns, i, c_name, "no layer of the workload is named '" + row[size_t(c_name)] + "'");
    const Einsum& e = w.einsums[size_t(layer)];
    const auto d = dims.find(row[size_t(c_op)]);
    if (d == dims.end()) fail(cns, i, c_op, "unsupported Stream op type '" + row[size_t(c_op)] + "'");
    int64_t core = 0;
    if (!parse_num(std::string_view(row[size_t(c_core)]), core) || core < 0 || core >= int64_t(arch.cores.size()))
      fail(cns, i, c_core, fmt::format("expected a core id of '{}' (0..{})", arch.name, arch.cores.size() - 1));
    std::vector<std::string> out_row(out.header.size());
    out_row[0] = e.name;
    out_row[1] = arch.cores[size_t(core)].name;
    for (const auto& [sd, rank] : d->second) {
      const int64_t lo = cell_int(i, sd + "_start"), hi = cell_int(i, sd + "_end");
      const int k = e.rank_index(rank);
      if (k < 0) {
        if (lo == 0 && hi == 1) continue;  // a unit dimension mapfuse's Einsum does not have (G, B)
        fail(cns, i, cns.column(sd + "_start"), "Stream dimension " + sd + " has no rank " + rank + " in '" + e.name + "'");
      }
      if (lo == 0 && hi >= e.ranks[size_t(k)].size) continue;
      const auto col = std::find(out.header.begin(), out.header.end(), rank) - out.header.begin();
      out_row[size_t(col)] = fmt::format("{}:{}", lo, hi);
    }
    const auto lr = lut_row.find(row[size_t(c_lut)]);
    if (lr == lut_row.end()) fail(cns, i, c_lut, "no such row in cost_lut.csv");
    const auto& L = lut.rows[lr->second];
    const size_t n = out.header.size();
    out_row[n - 4] = L[size_t(l_lat)];
    out_row[n - 3] = L[size_t(l_on)];
    out_row[n - 2] = L[size_t(l_off)];
    // Too-large operands: layer operands (O, W, I) zipped with memory operands (O, I2, I1).
    std::vector<std::string> lops, mops;
    for (auto [src, dst] : {std::pair{l_tll, &lops}, std::pair{l_tl, &mops}}) {
      std::string s = L[size_t(src)];
      size_t a = 0;
      while (a < s.size()) {
        size_t b = s.find(';', a);
        if (b == std::string::npos) b = s.size();
        dst->push_back(s.substr(a, b - a));
        a = b + 1;
      }
    }
    if (lops.size() != mops.size()) fail(lut, lr->second, l_tll, "too_large_layer_operands and too_large_operands differ in length");
    std::string off;
    for (size_t k = 0; k < lops.size(); ++k) {
      const std::string col = "block_bw_" + mops[k], direction = lops[k] == "O" ? "wr_in_by_low" : "rd_out_to_low";
      const int c = lut.column(col);
      const std::string& s = L[size_t(c)];
      double bw = -1;
      for (size_t a = 0; a < s.size();) {
        size_t b = s.find(';', a);
        if (b == std::string::npos) b = s.size();
        const std::string kv = s.substr(a, b - a);
        a = b + 1;
        const auto eq = kv.find('=');
        if (eq != std::string::npos && kv.substr(0, eq) == direction &&
            !parse_num(std::string_view(kv).substr(eq + 1), bw))
          fail(lut, lr->second, c, "bad bandwidth '" + kv + "'");
      }
      if (bw < 0) fail(lut, lr->second, c, "no " + direction + " bandwidth in '" + s + "'");
      // Stream's operand -> the Einsum's tensor: O the output, I the first input, W the weight
      // (conv, gemm) or the second input (add).
      int tensor = -1;
      if (lops[k] == "O") {
        tensor = e.output_index();
      } else {
        int inputs = 0;
        for (int x = 0; x < int(e.tensors.size()); ++x) {
          const auto role = e.tensors[size_t(x)].role;
          if (lops[k] == "I" && role == TensorRole::Input && inputs == 0) tensor = x;
          if (lops[k] == "W" && ((role == TensorRole::Weight) || (role == TensorRole::Input && inputs == 1))) tensor = x;
          if (role == TensorRole::Input) ++inputs;
          if (tensor >= 0) break;
        }
      }
      if (tensor < 0) {
        if (bw == 0) continue;  // Stream's ReLU / pooling constant, which mapfuse's Einsum lacks
        fail(lut, lr->second, l_tll, "operand " + lops[k] + " of '" + e.name + "' has no mapfuse tensor but a DRAM bandwidth");
      }
      off += fmt::format("{}{}={}", off.empty() ? "" : ";", label_of(e, tensor), bw);
    }
    out_row[n - 1] = off;
    std::vector<std::string> key(out_row.begin(), out_row.begin() + std::ptrdiff_t(n - 4));
    if (seen.insert(key).second) out.rows.push_back(std::move(out_row));
  }
  return out;
}

}  // namespace mapfuse
