#include "engine/workload/tile_graph.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <memory_resource>
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
// Nodes come from a per-tree arena (pmr): from the malloc heap each of a 10^6-CT graph's trees
// faulted its ~10^4 node pages in again, and freeing them one by one cost as much.
template <int D>
using Point = bg::model::point<double, D, bg::cs::cartesian>;
template <int D>
using Box = bg::model::box<Point<D>>;
template <int D>
using Value = std::pair<Box<D>, int>;  // a producer CT's output box (its tree dimensions) and index
// Node capacity: 8 and 32 measured no different from 16 on Fsrcnn1M (packed trees).
using Params = bgi::quadratic<16>;
template <int D>
using Tree = bgi::rtree<Value<D>, Params, bgi::indexable<Value<D>>, bgi::equal_to<Value<D>>,
                        std::pmr::polymorphic_allocator<Value<D>>>;
static_assert(kMaxTensorDims == 6, "one tree type per tensor rank");
using AnyTree = std::variant<std::monostate, Tree<1>, Tree<2>, Tree<3>, Tree<4>, Tree<5>, Tree<6>>;

// The dimensions in which the producer CTs of a tensor differ: in any other one every producer
// box spans the whole tensor, so it overlaps every non-empty consumer box there, and the tree can
// leave it out (fewer dimensions, cheaper queries; FSRCNN's row x column tiles need 2 of 4).
struct TensorIndex {
  std::unique_ptr<std::pmr::monotonic_buffer_resource> arena;  // the tree's nodes
  AnyTree tree;
  std::array<int, kMaxTensorDims> dims{};
  std::array<bool, kMaxTensorDims> in_tree{};
  int k = -1;              // number of dimensions in the tree; -1 = not built yet
  std::vector<int> every;  // k = 0: every producer CT with a non-empty output

  void clear() {  // the tree before the arena it lives in
    tree = std::monostate{};
    arena.reset();
    every = {};
    k = -1;
  }
};

// A producer found for one consumer box, and the bits of their overlap.
struct Hit {
  int producer;
  int64_t bits;
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

// The overlap of two intersecting closed boxes, in values.
template <int D>
int64_t overlap_values(const Box<D>& a, const Box<D>& b) {
  int64_t v = 1;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((v *= static_cast<int64_t>(std::min(bg::get<bg::max_corner, I>(a), bg::get<bg::max_corner, I>(b)) -
                                std::max(bg::get<bg::min_corner, I>(a), bg::get<bg::min_corner, I>(b))) +
           1),
     ...);
  }(std::make_index_sequence<D>{});
  return v;
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

// Bulk loading (packing). The boxes and the packing's own entries come from `scratch`, which the
// caller releases once the tree stands.
template <int D>
Tree<D> build_tree(const TileSet& ts, int layer, const std::array<int, kMaxTensorDims>& dims,
                   std::pmr::memory_resource* arena, std::pmr::memory_resource* scratch) {
  std::pmr::vector<Value<D>> boxes(scratch);
  boxes.reserve(ts.layer_first[layer + 1] - ts.layer_first[layer]);
  for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p) {
    const auto box = ts.box(output_access(ts, p));
    if (!is_empty(box)) boxes.emplace_back(to_box<D>(box, dims), p);
  }
  return Tree<D>(boxes.begin(), boxes.end(), Params(), bgi::indexable<Value<D>>(),
                 bgi::equal_to<Value<D>>(), std::pmr::polymorphic_allocator<Value<D>>(arena),
                 std::pmr::polymorphic_allocator<std::byte>(scratch));
}

void build_index(TensorIndex& ix, const TileSet& ts, int layer, std::span<const int64_t> bound,
                 HugePageResource& pages, std::pmr::monotonic_buffer_resource& scratch) {
  const int nd = static_cast<int>(bound.size());
  bool differs[kMaxTensorDims] = {};
  for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p) {
    const auto box = ts.box(output_access(ts, p));
    if (is_empty(box)) continue;
    for (int d = 0; d < nd; ++d) differs[d] |= box[d].lo != 0 || box[d].hi != bound[d];
  }
  ix.k = 0;
  for (int d = 0; d < nd; ++d)
    if (differs[d]) ix.dims[ix.k++] = d, ix.in_tree[d] = true;
  // Packed nodes hold about one value's worth of bytes per value; more grows the arena.
  const size_t n = ts.layer_first[layer + 1] - ts.layer_first[layer];
  if (ix.k > 0)
    ix.arena = std::make_unique<std::pmr::monotonic_buffer_resource>(
        n * (24 + 16 * static_cast<size_t>(ix.k)) * 5 / 4 + 4096, &pages);
  std::pmr::memory_resource* arena = ix.arena.get();
  switch (ix.k) {
    case 0:
      for (int p = ts.layer_first[layer]; p < ts.layer_first[layer + 1]; ++p)
        if (!is_empty(ts.box(output_access(ts, p)))) ix.every.push_back(p);
      break;
    case 1: ix.tree = build_tree<1>(ts, layer, ix.dims, arena, &scratch); break;
    case 2: ix.tree = build_tree<2>(ts, layer, ix.dims, arena, &scratch); break;
    case 3: ix.tree = build_tree<3>(ts, layer, ix.dims, arena, &scratch); break;
    case 4: ix.tree = build_tree<4>(ts, layer, ix.dims, arena, &scratch); break;
    case 5: ix.tree = build_tree<5>(ts, layer, ix.dims, arena, &scratch); break;
    default: ix.tree = build_tree<6>(ts, layer, ix.dims, arena, &scratch); break;
  }
  scratch.release();
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
  HugePageResource pages;
  std::pmr::monotonic_buffer_resource scratch(&pages);
  std::vector<TensorIndex> index(w.tensors.size());
  std::vector<int> last_consumer(w.tensors.size(), -1);
  for (size_t t = 0; t < w.tensors.size(); ++t)
    for (int c : w.tensors[t].consumers) last_consumer[t] = std::max(last_consumer[t], c);

  std::vector<Hit> found;
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
      const int64_t bpv = w.tensors[a.tensor].bits_per_value;
      found.clear();
      if (search == EdgeSearch::Pairwise) {
        for (int p = ts.layer_first[producer]; p < ts.layer_first[producer + 1]; ++p)
          if (const int64_t v = overlap_volume(ts.box(output_access(ts, p)), qbox); v > 0)
            found.push_back({p, v * bpv});
      } else {
        TensorIndex& ix = index[a.tensor];
        if (ix.k < 0) build_index(ix, ts, producer, bounds[a.tensor], pages, scratch);
        // Outside the tree's dimensions a producer spans the tensor: the overlap is the query's.
        int64_t rest = bpv;
        for (size_t d = 0; d < qbox.size(); ++d)
          if (!ix.in_tree[d]) rest *= qbox[d].size();
        if (ix.k == 0)
          for (int p : ix.every) found.push_back({p, rest});
        std::visit(
            [&]<typename T>(const T& tr) {
              if constexpr (!std::is_same_v<T, std::monostate>) {
                constexpr int D = bg::dimension<typename T::bounds_type>::value;
                const Box<D> q = to_box<D>(qbox, ix.dims);
                tr.query(bgi::intersects(q), boost::make_function_output_iterator([&](const Value<D>& v) {
                           found.push_back({v.second, overlap_values<D>(q, v.first) * rest});
                         }));
              }
            },
            ix.tree);
        std::sort(found.begin(), found.end(), [](const Hit& x, const Hit& y) { return x.producer < y.producer; });
      }
      for (const Hit& h : found) out.push_back({h.producer, a.tensor, h.bits});
    }
  };

  // The edge array is sized once from a sample of each layer's CTs: growing it layer by layer
  // copied every earlier edge again and was half of the time at 10^6 CTs. A low estimate costs a
  // reallocation (a copy, and the pages faulted in twice); a high one only address space. The
  // sample builds the layers' trees early; a tree then lives from the first layer to the last
  // consumer layer of its tensor.
  std::vector<size_t> layer_estimate(n, 0);
  {
    std::vector<TileEdge> sample;
    size_t estimate = 0;
    for (int layer = 0; layer < n; ++layer) {
      const int first = ts.layer_first[layer], count = ts.layer_first[layer + 1] - first;
      if (count == 0) continue;
      // The largest of 3 + count/512 CTs spread over the layer: border CTs have fewer producers,
      // and where strides make the count vary from CT to CT (FSRCNN's deconvolution), three
      // samples fell 30 % short at 10^6 CTs and the array was copied into a twice larger one.
      // Small layers keep three (sampling them all doubled ResNet-18's 1.3 ms).
      size_t most = 0;
      const int step = std::max(1, count / (3 + count / 512));
      for (int c = first; c < first + count; c += step) {
        sample.clear();
        append_edges(c, sample);
        most = std::max(most, sample.size());
      }
      layer_estimate[layer] = most * static_cast<size_t>(count);
      estimate += layer_estimate[layer];
    }
    g.edges.reserve(estimate + 16);
    advise_huge_pages(g.edges);
  }
  for (int layer = 0; layer < n; ++layer) {
    const size_t capacity = g.edges.capacity();
    // The layer's edges are mapped in before they are written (one call, not a fault per page).
    populate_pages(g.edges.data() + g.edges.size(),
                   std::min(layer_estimate[layer], capacity - g.edges.size()) * sizeof(TileEdge));
    for (int c = ts.layer_first[layer]; c < ts.layer_first[layer + 1]; ++c) {
      g.first_pred.push_back(static_cast<int>(g.edges.size()));
      append_edges(c, g.edges);
    }
    if (g.edges.capacity() != capacity) advise_huge_pages(g.edges);  // the estimate was low
    for (size_t t = 0; t < index.size(); ++t)
      if (last_consumer[t] == layer) index[t].clear();
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
