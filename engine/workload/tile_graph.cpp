#include "engine/workload/tile_graph.hpp"

#include <algorithm>
#include <utility>
#include <variant>

#include <boost/geometry.hpp>
#include <boost/geometry/index/rtree.hpp>
#include <boost/iterator/function_output_iterator.hpp>

namespace mapfuse {

namespace {

namespace bg = boost::geometry;
namespace bgi = boost::geometry::index;

// Boost.Geometry fixes the dimension at compile time: one tree type per tensor rank 1..6.
// Coordinates are doubles (exact below 2^53) because the tree's content arithmetic would overflow
// int64 in six dimensions. Boxes are closed: a half-open [lo, hi) becomes [lo, hi - 1].
template <int D>
using Point = bg::model::point<double, D, bg::cs::cartesian>;
template <int D>
using Box = bg::model::box<Point<D>>;
template <int D>
using Tree = bgi::rtree<std::pair<Box<D>, int>, bgi::quadratic<16>>;
static_assert(kMaxTensorDims == 6, "one tree type per tensor rank");
using AnyTree = std::variant<std::monostate, Tree<1>, Tree<2>, Tree<3>, Tree<4>, Tree<5>, Tree<6>>;

template <int D>
Box<D> to_box(std::span<const Range> r) {
  Box<D> b;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((bg::set<bg::min_corner, I>(b, static_cast<double>(r[I].lo)),
      bg::set<bg::max_corner, I>(b, static_cast<double>(r[I].hi - 1))),
     ...);
  }(std::make_index_sequence<D>{});
  return b;
}

bool is_empty(std::span<const Range> box) {
  for (const Range& r : box)
    if (r.empty()) return true;
  return false;
}

int64_t overlap_volume(std::span<const Range> a, std::span<const Range> b) {
  int64_t v = 1;
  for (size_t d = 0; d < a.size(); ++d)
    v *= std::max<int64_t>(0, std::min(a[d].hi, b[d].hi) - std::max(a[d].lo, b[d].lo));
  return v;
}

const TileAccess& output_access(const TileSet& ts, int tile) {
  for (const TileAccess& a : ts.tile_accesses(tile))
    if (a.role == TensorRole::Output) return a;
  return ts.tile_accesses(tile).front();  // unreachable: validate() requires one output
}

template <int D>
Tree<D> build_tree(const TileSet& ts, int layer) {
  std::vector<std::pair<Box<D>, int>> boxes;
  boxes.reserve(ts.layer_first[layer + 1] - ts.layer_first[layer]);
  for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p) {
    const auto box = ts.box(output_access(ts, p));
    if (!is_empty(box)) boxes.emplace_back(to_box<D>(box), p);
  }
  return Tree<D>(boxes.begin(), boxes.end());  // bulk loading (packing)
}

AnyTree make_tree(const TileSet& ts, int layer, int dims) {
  switch (dims) {
    case 1: return build_tree<1>(ts, layer);
    case 2: return build_tree<2>(ts, layer);
    case 3: return build_tree<3>(ts, layer);
    case 4: return build_tree<4>(ts, layer);
    case 5: return build_tree<5>(ts, layer);
    default: return build_tree<6>(ts, layer);
  }
}

}  // namespace

TileGraph connect_tiles(const Workload& w, TileSet tiles, EdgeSearch search) {
  TileGraph g;
  g.tiles = std::move(tiles);
  const TileSet& ts = g.tiles;
  const int n = static_cast<int>(w.einsums.size());
  g.first_pred.reserve(ts.tiles.size() + 1);
  g.edges.reserve(ts.tiles.size() * 4);

  // Trees live from the first consumer layer of a tensor to its last one.
  std::vector<AnyTree> trees(w.tensors.size());
  std::vector<int> last_consumer(w.tensors.size(), -1);
  for (size_t t = 0; t < w.tensors.size(); ++t)
    for (int c : w.tensors[t].consumers) last_consumer[t] = std::max(last_consumer[t], c);

  std::vector<int> found;
  for (int layer = 0; layer < n; ++layer) {
    const int groups = ts.layer_groups[layer];
    const int first = ts.layer_first[layer];
    for (int c = first; c < ts.layer_first[layer + 1]; ++c) {
      g.first_pred.push_back(static_cast<int>(g.edges.size()));
      const int sub = ts.tiles[c].sub_id;
      if (sub >= groups) g.edges.push_back({c - groups, c, EdgeKind::Intra, -1, 0, 0});
      for (const TileAccess& a : ts.tile_accesses(c)) {
        if (a.role == TensorRole::Output) continue;
        const int producer = w.tensors[a.tensor].producer;
        if (producer < 0) continue;
        const auto qbox = ts.box(a);
        if (is_empty(qbox)) continue;
        found.clear();
        if (search == EdgeSearch::Pairwise || a.dims == 0) {  // a scalar overlaps every producer CT
          for (int p = ts.layer_first[producer]; p < ts.layer_first[producer + 1]; ++p)
            if (overlap_volume(ts.box(output_access(ts, p)), qbox) > 0) found.push_back(p);
        } else {
          AnyTree& tree = trees[a.tensor];
          if (tree.index() == 0) tree = make_tree(ts, producer, a.dims);
          std::visit(
              [&]<typename T>(const T& tr) {
                if constexpr (!std::is_same_v<T, std::monostate>) {
                  constexpr int D = bg::dimension<typename T::bounds_type>::value;
                  tr.query(bgi::intersects(to_box<D>(qbox)),
                           boost::make_function_output_iterator([&](const auto& v) { found.push_back(v.second); }));
                }
              },
              tree);
          std::sort(found.begin(), found.end());
        }
        for (int p : found) {
          const TileAccess& out = output_access(ts, p);
          const int64_t bpv = w.tensors[a.tensor].bits_per_value;
          g.edges.push_back({p, c, EdgeKind::Inter, a.tensor, overlap_volume(ts.box(out), qbox) * bpv, out.bits});
        }
      }
    }
    for (size_t t = 0; t < trees.size(); ++t)
      if (last_consumer[t] == layer) trees[t] = std::monostate{};
  }
  g.first_pred.push_back(static_cast<int>(g.edges.size()));
  return g;
}

TileGraph build_tile_graph(const Workload& w, const TilingOptions& opt, EdgeSearch search) {
  return connect_tiles(w, generate_tiles(w, opt), search);
}

}  // namespace mapfuse
