#include "engine/validation/stream_replay.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"

namespace mapfuse {

namespace {

// One CSV table with typed cell access and errors that name file, line and column.
struct Table {
  CsvTable t;
  std::string file;

  explicit Table(const std::string& path) : t(read_csv(path)), file(path) {}
  size_t rows() const { return t.rows.size(); }
  int col(std::string_view name) const { return t.column(name); }
  bool has(std::string_view name) const { return std::find(t.header.begin(), t.header.end(), name) != t.header.end(); }
  const std::string& str(size_t row, int c) const { return t.rows[row][size_t(c)]; }
  [[noreturn]] void fail(size_t row, int c, const std::string& what) const {
    throw InputError({file, int(row) + 2, c + 1}, t.header[size_t(c)], what);
  }
  template <class T>
  T parse(size_t row, int c, const char* expected) const {
    const std::string& s = str(row, c);
    T v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty())
      fail(row, c, std::string("expected ") + expected + ", got '" + s + "'");
    return v;
  }
  double num(size_t row, int c) const { return parse<double>(row, c, "a number"); }
  int integer(size_t row, int c) const { return parse<int>(row, c, "an integer"); }
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t a = 0;
  for (;;) {
    const size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, "", "cannot open file");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError({path, 0, 0}, "", std::string("not valid JSON: ") + e.what());
  }
}

const nlohmann::json& key(const nlohmann::json& j, const std::string& k, const std::string& file,
                          const std::string& where) {
  if (!j.is_object() || !j.contains(k))
    throw InputError({file, 0, 0}, where.empty() ? k : where + "." + k, "missing key");
  return j.at(k);
}

double jnum(const nlohmann::json& j, const std::string& k, const std::string& file, const std::string& where) {
  const auto& v = key(j, k, file, where);
  if (!v.is_number()) throw InputError({file, 0, 0}, where + "." + k, "expected a number");
  return v.get<double>();
}

}  // namespace

StreamReplay load_stream_replay(const std::string& folder) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(folder)) throw InputError({folder, 0, 0}, "", "not a directory (expected a dumped Stream run)");
  StreamReplay r;
  r.folder = folder;
  auto& P = r.problem;
  const std::string totals_path = (fs::path(folder) / "totals.json").string();
  const nlohmann::json totals = read_json(totals_path);

  // Cores and their top memories.
  std::map<int, int> core_index;
  const auto& jcores = key(totals, "cores", totals_path, "");
  const int offchip_id = int(jnum(totals, "offchip_core_id", totals_path, ""));
  for (size_t i = 0; i < jcores.size(); ++i) {
    const auto& c = jcores[i];
    const std::string where = "cores[" + std::to_string(i) + "]";
    const auto& mems = key(c, "top_memories", totals_path, where);
    if (!mems.is_array() || mems.size() != 1)
      throw InputError({totals_path, 0, 0}, where + ".top_memories",
                       "exactly one top memory per core expected (shared by I1, I2 and O)");
    const auto& m = mems[0];
    coala::CoreSpec cs;
    cs.name = key(c, "name", totals_path, where).get<std::string>();
    cs.capacity_bits = jnum(m, "size_bits", totals_path, where + ".top_memories[0]");
    cs.read_energy_pj = jnum(m, "r_cost", totals_path, where + ".top_memories[0]");
    cs.write_energy_pj = jnum(m, "w_cost", totals_path, where + ".top_memories[0]");
    cs.port_bw_min_bits = jnum(m, "port0_bw_min", totals_path, where + ".top_memories[0]");
    cs.port_bw_max_bits = jnum(m, "port0_bw_max", totals_path, where + ".top_memories[0]");
    const int id = int(jnum(c, "id", totals_path, where));
    cs.offchip = id == offchip_id;
    core_index[id] = int(P.cores.size());
    P.cores.push_back(cs);
  }
  if (!core_index.count(offchip_id))
    throw InputError({totals_path, 0, 0}, "offchip_core_id", "names no core of 'cores'");
  const size_t nc = P.cores.size();

  // Links and the first shortest path Stream uses for every ordered pair.
  std::map<std::string, int> link_index;
  const auto& jlinks = key(totals, "links", totals_path, "");
  for (size_t i = 0; i < jlinks.size(); ++i) {
    const std::string where = "links[" + std::to_string(i) + "]";
    coala::LinkSpec l;
    l.name = key(jlinks[i], "name", totals_path, where).get<std::string>();
    l.bandwidth_bits_per_cc = jnum(jlinks[i], "bandwidth_bits_per_cc", totals_path, where);
    l.energy_pj_per_cc = jnum(jlinks[i], "unit_energy_cost_pJ_per_cc", totals_path, where);
    link_index[l.name] = int(P.links.size());
    P.links.push_back(l);
  }
  P.paths.assign(nc * nc, {});
  for (const auto& [pair, names] : key(totals, "first_shortest_path_links", totals_path, "").items()) {
    const auto arrow = pair.find("->");
    auto bad = [&](const std::string& what) {
      throw InputError({totals_path, 0, 0}, "first_shortest_path_links." + pair, what);
    };
    if (arrow == std::string::npos) bad("expected 'from->to'");
    int a = 0, b = 0;
    try {
      a = std::stoi(pair.substr(0, arrow));
      b = std::stoi(pair.substr(arrow + 2));
    } catch (...) {
      bad("expected 'from->to' with core ids");
    }
    if (!core_index.count(a) || !core_index.count(b)) bad("names a core that is not in 'cores'");
    auto& path = P.paths[size_t(core_index[a]) * nc + size_t(core_index[b])];
    for (const auto& n : names) {
      const std::string name = n.get<std::string>();
      if (!link_index.count(name)) bad("unknown link '" + name + "'");
      path.push_back(link_index[name]);
    }
  }

  // Layers: constant operands and operand -> memory operand links.
  struct Layer {
    std::vector<std::string> constants;
    std::map<std::string, std::string> mem_of;  // layer operand -> memory operand
  };
  std::map<int, Layer> layers;
  for (const auto& jl : key(totals, "layers", totals_path, "")) {
    Layer L;
    const int id = int(jnum(jl, "layer_id", totals_path, "layers"));
    for (const auto& c : key(jl, "constant_operands", totals_path, "layers")) L.constants.push_back(c.get<std::string>());
    for (const auto& [op, mem] : key(jl, "memory_operand_links", totals_path, "layers").items())
      L.mem_of[op] = mem.get<std::string>();
    layers[id] = L;
  }

  // Tile costs: the DRAM bandwidths that too-large operands block.
  const Table lut((fs::path(folder) / "cost_lut.csv").string());
  auto block_bw = [&](size_t row, const std::string& memop, const std::string& direction) -> double {
    const std::string col = "block_bw_" + memop;
    if (!lut.has(col)) lut.fail(row, lut.col("lut_row"), "no column " + col + " for a too-large operand");
    const int c = lut.col(col);
    for (const auto& kv : split(lut.str(row, c), ';')) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos && kv.substr(0, eq) == direction) {
        double v = 0;
        const std::string num = kv.substr(eq + 1);
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
        if (ec != std::errc() || p != num.data() + num.size()) lut.fail(row, c, "bad bandwidth '" + kv + "'");
        return v;
      }
    }
    lut.fail(row, c, "expected '" + direction + "=<bits/cc>' in '" + lut.str(row, c) + "'");
  };
  std::map<int, size_t> lut_rows;
  {
    const int c = lut.col("lut_row");
    for (size_t i = 0; i < lut.rows(); ++i) lut_rows[lut.integer(i, c)] = i;
  }

  // CNs.
  const Table cns((fs::path(folder) / "cns.csv").string());
  const int c_layer = cns.col("layer_id"), c_sub = cns.col("sub_id"), c_core = cns.col("core"),
            c_prio = cns.col("sched_order_idx"), c_pick = cns.col("pick_idx"), c_rt = cns.col("runtime"),
            c_start = cns.col("start"), c_end = cns.col("end"), c_on = cns.col("onchip_energy"),
            c_off = cns.col("offchip_energy"), c_tl = cns.col("too_large_operands_eff"),
            c_splits = cns.col("inter_core_splits"), c_sink = cns.col("is_sink_cn"), c_lut = cns.col("lut_row");
  std::unordered_map<std::string, int> tensor_of;  // (origin layer, operand, ranges) -> tensor id
  std::map<std::pair<int, int>, int> tile_of;
  struct OwnTensor {
    std::string memop;
    int tensor = -1;
  };
  std::vector<std::map<std::string, OwnTensor>> own(cns.rows());  // per CN, layer operand -> its tensor
  auto intern = [&](int layer, const std::string& op, const std::string& ranges, double bits, int tile) {
    const std::string k = std::to_string(layer) + ":" + op + ":" + ranges;
    auto it = tensor_of.find(k);
    if (it != tensor_of.end()) {  // shared by identical tiles; Stream's owner is the first of them
      auto& owner = P.tensors[size_t(it->second)].owner;
      if (cns.integer(size_t(tile), c_sub) < cns.integer(size_t(owner), c_sub)) owner = tile;
      return it->second;
    }
    const int id = int(P.tensors.size());
    coala::TensorSpec t;
    t.bits = bits;
    t.owner = tile;
    P.tensors.push_back(t);
    tensor_of.emplace(k, id);
    return id;
  };
  for (size_t i = 0; i < cns.rows(); ++i) {
    coala::TileSpec t;
    t.layer = cns.integer(i, c_layer);
    t.sub = cns.integer(i, c_sub);
    if (!layers.count(t.layer)) cns.fail(i, c_layer, "layer not listed in totals.json 'layers'");
    const int core_id = cns.integer(i, c_core);
    if (!core_index.count(core_id)) cns.fail(i, c_core, "core not listed in totals.json 'cores'");
    t.core = core_index[core_id];
    t.priority = cns.integer(i, c_prio);
    t.runtime_cc = cns.num(i, c_rt);
    t.onchip_energy_pj = cns.num(i, c_on);
    t.offchip_energy_pj = cns.num(i, c_off);
    const int splits = cns.integer(i, c_splits);
    if (splits <= 0) cns.fail(i, c_splits, "expected a positive number of inter-core splits");
    t.bw_fraction = 1.0 / splits;
    t.sink = cns.integer(i, c_sink) != 0;
    if (!tile_of.emplace(std::pair(t.layer, t.sub), int(i)).second) cns.fail(i, c_sub, "duplicate CN (layer, sub)");
    for (const std::string op : {"O", "W", "I"}) {
      if (!cns.has("tensor_" + op + "_ranges")) continue;
      const int cr = cns.col("tensor_" + op + "_ranges"), cb = cns.col("tensor_" + op + "_bits"),
                cm = cns.col("tensor_" + op + "_memop");
      if (cns.str(i, cm).empty()) continue;
      const int id = intern(t.layer, op, cns.str(i, cr), cns.num(i, cb), int(i));
      own[i][op] = {cns.str(i, cm), id};
    }
    if (!own[i].count("O")) cns.fail(i, c_layer, "CN has no output tensor (tensor_O_* columns empty)");
    t.output = own[i]["O"].tensor;
    P.tensors[size_t(t.output)].is_output = true;
    P.tensors[size_t(t.output)].owner = int(i);
    P.tiles.push_back(t);
    auto trace = [&](const char* col) {
      return cns.has(col) && !cns.str(i, cns.col(col)).empty() ? cns.num(i, cns.col(col)) : std::nan("");
    };
    r.expected.push_back({t.layer, t.sub, cns.integer(i, c_pick), cns.num(i, c_start), cns.num(i, c_end),
                          trace("preds_end"), trace("t_ready"), trace("t_after_inputs")});
  }

  // Edges: every edge orders; inter-layer edges carry the producer's output.
  const Table edges((fs::path(folder) / "edges.csv").string());
  const int e_pl = edges.col("producer_layer"), e_ps = edges.col("producer_sub"), e_cl = edges.col("consumer_layer"),
            e_cs = edges.col("consumer_sub"), e_kind = edges.col("kind"), e_op = edges.col("consumer_operand");
  std::vector<std::vector<std::pair<int, std::string>>> inter_in(P.tiles.size());  // (producer, consumer operand)
  std::set<std::pair<int, int>> edge_seen;
  for (size_t i = 0; i < edges.rows(); ++i) {
    auto find = [&](int lc, int sc) {
      auto it = tile_of.find({edges.integer(i, lc), edges.integer(i, sc)});
      if (it == tile_of.end()) edges.fail(i, lc, "no such CN in cns.csv");
      return it->second;
    };
    const int a = find(e_pl, e_ps), b = find(e_cl, e_cs);
    if (!edge_seen.insert({a, b}).second) continue;  // Stream's graph is a DiGraph: one edge per pair
    P.edges.emplace_back(a, b);
    const std::string& kind = edges.str(i, e_kind);
    if (kind == "inter") {
      inter_in[size_t(b)].emplace_back(a, edges.str(i, e_op));
    } else if (kind != "intra") {
      edges.fail(i, e_kind, "expected 'inter' or 'intra', got '" + kind + "'");
    }
  }

  // Per CN: what it fetches (Stream's get_tensors_needed_for_node) and what it blocks.
  for (size_t i = 0; i < P.tiles.size(); ++i) {
    auto& t = P.tiles[i];
    const Layer& L = layers[t.layer];
    const std::vector<std::string> too_large = split(cns.str(i, c_tl), ';');
    auto is_too_large = [&](const std::string& memop) {
      return std::find(too_large.begin(), too_large.end(), memop) != too_large.end();
    };
    std::vector<std::pair<int, int>> needed;  // (origin layer, tensor)
    for (const auto& op : L.constants) {
      auto it = own[i].find(op);
      if (it == own[i].end()) cns.fail(i, c_layer, "constant operand " + op + " has no tensor_" + op + "_* columns");
      auto& spec = P.tensors[size_t(it->second.tensor)];
      spec.starts_offchip = true;
      spec.consumers.push_back(int(i));
      if (!is_too_large(it->second.memop)) needed.emplace_back(t.layer, it->second.tensor);
    }
    auto preds = inter_in[i];
    std::sort(preds.begin(), preds.end(), [&](const auto& x, const auto& y) {
      const auto &a = P.tiles[size_t(x.first)], &b = P.tiles[size_t(y.first)];
      return std::pair(a.layer, a.sub) < std::pair(b.layer, b.sub);
    });
    for (const auto& [pred, op] : preds) {
      auto m = L.mem_of.find(op);
      if (m == L.mem_of.end())
        throw InputError({totals_path, 0, 0}, "layers." + std::to_string(t.layer) + ".memory_operand_links",
                         "no memory operand for layer operand " + op);
      const int out = P.tiles[size_t(pred)].output;
      P.tensors[size_t(out)].consumers.push_back(int(i));
      if (!is_too_large(m->second)) needed.emplace_back(P.tiles[size_t(pred)].layer, out);
    }
    std::stable_sort(needed.begin(), needed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [layer, tensor] : needed) t.inputs.push_back(tensor);

    if (too_large.empty()) continue;
    const int lr = cns.integer(i, c_lut);
    if (!lut_rows.count(lr)) cns.fail(i, c_lut, "no such row in cost_lut.csv");
    const size_t row = lut_rows[lr];
    t.output_offchip = is_too_large("O");
    if (t.output_offchip) t.blocks.push_back({t.output, block_bw(row, "O", "wr_in_by_low"), true});
    for (const auto& memop : too_large) {
      if (memop == "O") continue;
      std::string op;
      for (const auto& [lop, mop] : L.mem_of)
        if (mop == memop) op = lop;
      auto it = own[i].find(op);
      if (op.empty() || it == own[i].end())
        cns.fail(i, c_tl, "too-large operand " + memop + " has no tensor on this CN");
      t.blocks.push_back({it->second.tensor, block_bw(row, memop, "rd_out_to_low"), false});
    }
  }

  // Outputs to compare with.
  r.expected_latency_cc = jnum(totals, "latency_cc", totals_path, "");
  r.expected_energy_pj = jnum(totals, "energy_pJ", totals_path, "");
  for (const auto& [k, v] : key(totals, "energy_breakdown_pJ", totals_path, "").items())
    r.expected_breakdown.emplace_back(k, v.get<double>());
  const std::string tr_path = (fs::path(folder) / "transfers.csv").string();
  if (fs::exists(tr_path)) {
    const Table tr(tr_path);
    const int k = tr.col("kind"), s = tr.col("start"), e = tr.col("end"), n = tr.col("new_comm_event");
    for (size_t i = 0; i < tr.rows(); ++i)
      r.expected_transfers.push_back({tr.str(i, k) == "block", tr.num(i, s), tr.num(i, e), tr.integer(i, n) != 0});
  }
  return r;
}

ReplayComparison compare_replay(const StreamReplay& replay, const coala::Schedule& s) {
  ReplayComparison c;
  c.cns = replay.expected.size();
  const double tol = 1e-6;
  std::vector<size_t> order(c.cns);
  for (size_t i = 0; i < c.cns; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return replay.expected[a].pick < replay.expected[b].pick; });
  for (size_t i : order) {
    const auto& x = replay.expected[i];
    const auto& y = s.tiles[i];
    if (y.pick != x.pick) ++c.pick_mismatches;
    if (std::abs(y.start - x.start) > tol || std::abs(y.end - x.end) > tol) {
      ++c.cn_mismatches;
      c.diffs.push_back({int(i), x.layer, x.sub, y.start, y.end, x.start, x.end, y.preds_end, y.ready,
                         y.after_inputs, x.preds_end, x.ready, x.after_inputs});
    }
  }
  c.transfers = s.transfers.size();
  c.expected_transfers = replay.expected_transfers.size();
  for (size_t i = 0; i < std::min(c.transfers, c.expected_transfers); ++i) {
    const auto& x = replay.expected_transfers[i];
    const auto& y = s.transfers[i];
    if ((y.cause == coala::TransferCause::Block) != x.block || std::abs(y.start - x.start) > tol ||
        std::abs(y.end - x.end) > tol || y.occupies_links != x.new_event) {
      if (c.first_transfer_mismatch < 0) {
        c.first_transfer_mismatch = long(i);
        c.first_transfer_got = y;
        c.first_transfer_expected = x;
      }
      ++c.transfer_mismatches;
    }
  }
  c.transfer_mismatches += std::max(c.transfers, c.expected_transfers) - std::min(c.transfers, c.expected_transfers);
  if (c.first_transfer_mismatch < 0 && c.transfers != c.expected_transfers)
    c.first_transfer_mismatch = long(std::min(c.transfers, c.expected_transfers));
  c.latency_cc = s.latency_cc;
  c.energy_pj = s.energy.total();
  auto close = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); };
  c.latency_match = close(c.latency_cc, replay.expected_latency_cc);
  c.energy_match = close(c.energy_pj, replay.expected_energy_pj);
  return c;
}

}  // namespace mapfuse
