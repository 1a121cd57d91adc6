#include "engine/workload/tile_graph.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <variant>

#include "engine/common/huge_pages.hpp"

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

// The dimensions in which the producer CTs of a tensor differ: in any other one every producer
// box spans the whole tensor, so it overlaps every non-empty consumer box there, and the tree can
// leave it out (fewer dimensions, cheaper queries; FSRCNN's row x column tiles need 2 of 4).
struct TensorIndex {
  AnyTree tree;
  std::array<int, kMaxTensorDims> dims{};
  int k = -1;              // number of dimensions in the tree; -1 = not built yet
  std::vector<int> every;  // k = 0: every producer CT with a non-empty output
};

template <int D>
Box<D> to_box(std::span<const Range> r, const std::array<int, kMaxTensorDims>& dims) {
  Box<D> b;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((bg::set<bg::min_corner, I>(b, static_cast<double>(r[dims[I]].lo)),
      bg::set<bg::max_corner, I>(b, static_cast<double>(r[dims[I]].hi - 1))),
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
Tree<D> build_tree(const TileSet& ts, int layer, const std::array<int, kMaxTensorDims>& dims) {
  std::vector<std::pair<Box<D>, int>> boxes;
  boxes.reserve(ts.layer_first[layer + 1] - ts.layer_first[layer]);
  for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p) {
    const auto box = ts.box(output_access(ts, p));
    if (!is_empty(box)) boxes.emplace_back(to_box<D>(box, dims), p);
  }
  return Tree<D>(boxes.begin(), boxes.end());  // bulk loading (packing)
}

void build_index(TensorIndex& ix, const TileSet& ts, int layer, std::span<const int64_t> bound) {
  const int nd = static_cast<int>(bound.size());
  bool differs[kMaxTensorDims] = {};
  for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p) {
    const auto box = ts.box(output_access(ts, p));
    if (is_empty(box)) continue;
    for (int d = 0; d < nd; ++d) differs[d] |= box[d].lo != 0 || box[d].hi != bound[d];
  }
  ix.k = 0;
  for (int d = 0; d < nd; ++d)
    if (differs[d]) ix.dims[ix.k++] = d;
  switch (ix.k) {
    case 0:
      for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p)
        if (!is_empty(ts.box(output_access(ts, p)))) ix.every.push_back(p);
      break;
    case 1: ix.tree = build_tree<1>(ts, layer, ix.dims); break;
    case 2: ix.tree = build_tree<2>(ts, layer, ix.dims); break;
    case 3: ix.tree = build_tree<3>(ts, layer, ix.dims); break;
    case 4: ix.tree = build_tree<4>(ts, layer, ix.dims); break;
    case 5: ix.tree = build_tree<5>(ts, layer, ix.dims); break;
    default: ix.tree = build_tree<6>(ts, layer, ix.dims); break;
  }
}

}  // namespace

TileGraph connect_tiles(const Workload& w, TileSet tiles, EdgeSearch search) {
  TileGraph g;
  g.tiles = std::move(tiles);
  const TileSet& ts = g.tiles;
  const int n = static_cast<int>(w.einsums.size());
  g.first_pred.reserve(ts.tiles.size() + 1);
  advise_huge_pages(g.first_pred);
  const auto bounds = tensor_bounds(w);

  // An index lives from the first to the last consumer layer of its tensor.
  std::vector<TensorIndex> index(w.tensors.size());
  std::vector<int> last_consumer(w.tensors.size(), -1);
  for (size_t t = 0; t < w.tensors.size(); ++t)
    for (int c : w.tensors[t].consumers) last_consumer[t] = std::max(last_consumer[t], c);

  std::vector<int> found;
  // Appends consumer c's edges to `out`.
  auto append_edges = [&](int c, std::vector<TileEdge>& out) {
    const int layer = ts.tiles[c].layer, groups = ts.layer_groups[layer];
    if (ts.tiles[c].sub_id >= groups) out.push_back({c - groups, -1, 0});
    for (const TileAccess& a : ts.tile_accesses(c)) {
      if (a.role == TensorRole::Output) continue;
      const int producer = w.tensors[a.tensor].producer;
      if (producer < 0) continue;
      const auto qbox = ts.box(a);
      if (is_empty(qbox)) continue;
      found.clear();
      if (search == EdgeSearch::Pairwise) {
        for (int p = ts.layer_first[producer]; p < ts.layer_first[producer + 1]; ++p)
          if (overlap_volume(ts.box(output_access(ts, p)), qbox) > 0) found.push_back(p);
      } else {
        TensorIndex& ix = index[a.tensor];
        if (ix.k < 0) build_index(ix, ts, producer, bounds[a.tensor]);
        if (ix.k == 0) found = ix.every;
        std::visit(
            [&]<typename T>(const T& tr) {
              if constexpr (!std::is_same_v<T, std::monostate>) {
                constexpr int D = bg::dimension<typename T::bounds_type>::value;
                tr.query(bgi::intersects(to_box<D>(qbox, ix.dims)),
                         boost::make_function_output_iterator([&](const auto& v) { found.push_back(v.second); }));
              }
            },
            ix.tree);
        std::sort(found.begin(), found.end());
      }
      const int64_t bpv = w.tensors[a.tensor].bits_per_value;
      for (int p : found) {
        out.push_back({p, a.tensor, overlap_volume(ts.box(output_access(ts, p)), qbox) * bpv});
      }
    }
  };

  // The edge array is sized once from a sample of each layer's CTs (first, middle, last): growing
  // it layer by layer copied every earlier edge again and was half of the time at 10^6 CTs. A low
  // estimate only costs one reallocation. The sample builds the layers' trees early; a tree then
  // lives from the first layer to the last consumer layer of its tensor.
  {
    std::vector<TileEdge> sample;
    double estimate = 0;
    for (int layer = 0; layer < n; ++layer) {
      const int first = ts.layer_first[layer], count = ts.layer_first[layer + 1] - first;
      if (count == 0) continue;
      size_t most = 0;  // the largest of the three: border CTs have fewer producers
      for (int c : {first, first + count / 2, first + count - 1}) {
        sample.clear();
        append_edges(c, sample);
        most = std::max(most, sample.size());
      }
      estimate += static_cast<double>(most) * count;
    }
    g.edges.reserve(static_cast<size_t>(estimate) + 16);
    advise_huge_pages(g.edges);
  }
  for (int layer = 0; layer < n; ++layer) {
    const size_t capacity = g.edges.capacity();
    for (int c = ts.layer_first[layer]; c < ts.layer_first[layer + 1]; ++c) {
      g.first_pred.push_back(static_cast<int>(g.edges.size()));
      append_edges(c, g.edges);
    }
    if (g.edges.capacity() != capacity) advise_huge_pages(g.edges);  // the estimate was low
    for (size_t t = 0; t < index.size(); ++t)
      if (last_consumer[t] == layer) index[t] = TensorIndex{};
  }
  g.first_pred.push_back(static_cast<int>(g.edges.size()));
  return g;
}

int TileGraph::consumer(size_t edge) const {
  const auto it = std::upper_bound(first_pred.begin(), first_pred.end(), static_cast<int>(edge));
  return static_cast<int>(it - first_pred.begin()) - 1;
}

int64_t TileGraph::producer_bits(const TileEdge& e) const {
  return e.kind() == EdgeKind::Inter ? output_access(tiles, e.producer).bits : 0;
}

TileGraph build_tile_graph(const Workload& w, const TilingOptions& opt, EdgeSearch search) {
  return connect_tiles(w, generate_tiles(w, opt), search);
}

}  // namespace mapfuse
