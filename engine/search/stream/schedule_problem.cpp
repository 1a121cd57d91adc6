#include "engine/search/stream/schedule_problem.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "engine/common/error.hpp"
#include "engine/cost/coala_arch.hpp"

namespace mapfuse {
namespace {

// Stream's tensor identity for operands a CT does not produce: (layer, tensor, bits, box), as the
// raw bytes of those integers (a hash key; formatting them was a third of the build time).
void object_key(std::string& k, const TileSet& ts, int layer, const TileAccess& a) {
  k.clear();
  auto put = [&](auto v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(layer);
  put(a.tensor);
  put(a.stream_bits);
  for (const Range& r : ts.box(a)) {
    put(r.lo);
    put(r.hi);
  }
}

}  // namespace

coala::Problem build_schedule_problem(const Workload& w, const TileGraph& g, const Architecture& arch,
                                      std::span<const int> core_of_tile, std::span<const TileCost> costs,
                                      const ScheduleProblemOptions& options) {
  const TileSet& ts = g.tiles;
  const size_t n = ts.tiles.size();
  if (core_of_tile.size() != n || costs.size() != n)
    throw InputError({}, "schedule", fmt::format("{} CTs but {} cores and {} tile costs", n, core_of_tile.size(), costs.size()));
  coala::Problem p;
  coala::set_hardware(p, arch);

  std::vector<char> has_succ(n, 0);
  for (const TileEdge& e : g.edges) has_succ[size_t(e.producer)] = 1;
  std::vector<char> sink_layer(w.einsums.size(), 1);
  for (size_t t = 0; t < n; ++t)
    if (has_succ[t]) sink_layer[size_t(ts.tiles[t].layer)] = 0;

  // Outputs first: tensor t is tile t's output.
  p.tensors.resize(n);
  p.tiles.resize(n);
  std::vector<int> output_access(n, -1);
  for (size_t t = 0; t < n; ++t) {
    const auto acc = ts.tile_accesses(int(t));
    for (size_t a = 0; a < acc.size(); ++a)
      if (acc[a].role == TensorRole::Output) output_access[t] = int(a);
    if (output_access[t] < 0) throw InputError({}, "schedule", fmt::format("CT {} has no output", t));
    p.tensors[t].bits = double(acc[size_t(output_access[t])].stream_bits);
    p.tensors[t].owner = int(t);
    p.tensors[t].is_output = true;
  }
  std::unordered_map<std::string, int> objects;
  std::string key;
  auto object = [&](int tile, const TileAccess& a) {
    object_key(key, ts, ts.tiles[size_t(tile)].layer, a);
    auto [it, fresh] = objects.emplace(key, int(p.tensors.size()));
    if (fresh) {
      coala::TensorSpec s;
      s.bits = double(a.stream_bits);
      s.owner = tile;  // tiles come in sub-id order: the first reader owns it, as in Stream
      p.tensors.push_back(s);
    }
    return it->second;
  };

  std::vector<int> preds, inter;
  std::vector<std::pair<int, int>> constants;  // (role order, tensor)
  for (size_t t = 0; t < n; ++t) {
    const Tile& ct = ts.tiles[t];
    const Einsum& e = w.einsums[size_t(ct.layer)];
    const int core = core_of_tile[t];
    if (core < 0 || core >= int(arch.cores.size()))
      throw InputError({}, "allocation", fmt::format("CT {} of '{}': core {} is not a core of '{}'", t, e.name, core, arch.name));
    if (!arch.cores[size_t(core)].can_run(e.op))
      throw InputError({}, "allocation", fmt::format("core '{}' cannot run layer '{}' ({} operator)",
                                                     arch.cores[size_t(core)].name, e.name, to_string(e.op)));
    const TileCost& cost = costs[t];
    const auto acc = ts.tile_accesses(int(t));
    if (!cost.operands.empty() && cost.operands.size() != acc.size())
      throw InputError({}, "tile_costs", fmt::format("CT {} of '{}': {} operand costs for {} operands", t, e.name,
                                                     cost.operands.size(), acc.size()));
    auto offchip = [&](size_t a) { return !cost.operands.empty() && cost.operands[a].offchip; };
    coala::TileSpec& s = p.tiles[t];
    s = coala::TileSpec{
        .layer = ct.layer,
        .sub = ct.sub_id,
        .core = core,
        .priority = ct.priority,
        .runtime_cc = cost.latency_cc,
        .onchip_energy_pj = cost.onchip_energy_pj,
        .offchip_energy_pj = cost.offchip_energy_pj,
        .bw_fraction = 1.0 / double(std::max(1, ts.layer_groups[size_t(ct.layer)])),
        .output = int(t),
        .sink = options.sinks_by_layer_edges ? sink_layer[size_t(ct.layer)] != 0
                                             : w.tensors[size_t(acc[size_t(output_access[t])].tensor)].consumers.empty()};

    // Inter-layer producers, each once, by (layer, sub id) = tile index.
    preds.clear();
    for (int ei = g.first_pred[t]; ei < g.first_pred[t + 1]; ++ei) {
      const TileEdge& edge = g.edges[size_t(ei)];
      if (std::find(preds.begin(), preds.end(), edge.producer) != preds.end()) continue;
      preds.push_back(edge.producer);
      p.edges.emplace_back(edge.producer, int(t));
      if (edge.kind() != EdgeKind::Inter) continue;
      p.tensors[size_t(edge.producer)].consumers.push_back(int(t));
    }
    inter.clear();
    for (int ei = g.first_pred[t]; ei < g.first_pred[t + 1]; ++ei) {
      const TileEdge& edge = g.edges[size_t(ei)];
      if (edge.kind() != EdgeKind::Inter ||
          std::find(inter.begin(), inter.end(), edge.producer) != inter.end())
        continue;
      size_t a = 0;
      while (a < acc.size() && acc[a].tensor != edge.tensor) ++a;
      inter.push_back(edge.producer);
      if (a < acc.size() && offchip(a)) inter.back() = -1 - edge.producer;  // streamed from DRAM
    }
    std::sort(inter.begin(), inter.end(), [](int x, int y) { return (x < 0 ? -1 - x : x) < (y < 0 ? -1 - y : y); });
    for (int x : inter)
      if (x >= 0) s.inputs.push_back(x);

    // Constant operands: weights, then the network input (Stream's constant_operands order).
    constants.clear();
    for (size_t a = 0; a < acc.size(); ++a) {
      if (acc[a].role == TensorRole::Output || w.tensors[size_t(acc[a].tensor)].producer >= 0) continue;
      const int obj = object(int(t), acc[a]);
      auto& spec = p.tensors[size_t(obj)];
      spec.starts_offchip = true;
      spec.consumers.push_back(int(t));
      if (!offchip(a)) constants.emplace_back(acc[a].role == TensorRole::Weight ? 0 : 1, obj);
    }
    std::stable_sort(constants.begin(), constants.end(), [](auto x, auto y) { return x.first < y.first; });
    for (auto [order, obj] : constants) s.inputs.push_back(obj);

    // Too-large operands: the output first, then the inputs in the Einsum's order.
    const size_t o = size_t(output_access[t]);
    if (offchip(o)) {
      s.output_offchip = true;
      s.blocks.push_back({int(t), cost.operands[o].dram_bits_per_cycle, true});
    }
    for (size_t a = 0; a < acc.size(); ++a)
      if (a != o && offchip(a)) s.blocks.push_back({object(int(t), acc[a]), cost.operands[a].dram_bits_per_cycle, false});
  }
  return p;
}

std::vector<int64_t> held_input_bits(const TileGraph& g) {
  const TileSet& ts = g.tiles;
  std::vector<int64_t> held(ts.accesses.size(), 0);
  for (size_t t = 0; t < ts.tiles.size(); ++t) {
    const Tile& ct = ts.tiles[t];
    for (int ei = g.first_pred[t]; ei < g.first_pred[t + 1]; ++ei) {
      const TileEdge& edge = g.edges[size_t(ei)];
      if (edge.kind() != EdgeKind::Inter) continue;
      int64_t out_bits = 0;
      for (const TileAccess& a : ts.tile_accesses(edge.producer))
        if (a.role == TensorRole::Output) out_bits = a.stream_bits;
      for (size_t a = 0; a < ct.n_accesses; ++a)
        if (ts.accesses[ct.accesses + a].tensor == edge.tensor && ts.accesses[ct.accesses + a].role != TensorRole::Output) {
          held[ct.accesses + a] += out_bits;
          break;
        }
    }
  }
  return held;
}

}  // namespace mapfuse
