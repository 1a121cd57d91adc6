#include "engine/workload/einsum.hpp"

#include <set>

#include "engine/common/error.hpp"

namespace mapfuse {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::Mac: return "mac";
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Pool: return "pool";
    case OpKind::Softmax: return "softmax";
    case OpKind::Copy: return "copy";
  }
  return "?";
}

std::string_view to_string(TensorRole r) {
  switch (r) {
    case TensorRole::Input: return "input";
    case TensorRole::Weight: return "weight";
    case TensorRole::Output: return "output";
  }
  return "?";
}

OpKind op_kind_from_string(std::string_view s) {
  for (OpKind k : {OpKind::Mac, OpKind::Elementwise, OpKind::Pool, OpKind::Softmax, OpKind::Copy})
    if (to_string(k) == s) return k;
  throw InputError({}, "op", "unknown op kind '" + std::string(s) +
                                 "'; expected one of mac, elementwise, pool, softmax, copy" +
                                 did_you_mean(s, {"mac", "elementwise", "pool", "softmax", "copy"}));
}

int Einsum::rank_index(std::string_view n) const {
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].name == n) return static_cast<int>(i);
  return -1;
}

int Einsum::tensor_index(std::string_view n) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == n) return static_cast<int>(i);
  return -1;
}

int Einsum::output_index() const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].role == TensorRole::Output) return static_cast<int>(i);
  return -1;
}

int64_t Einsum::operations() const {
  int64_t n = 1;
  for (const auto& r : ranks) n *= r.size;
  return n;
}

int64_t Einsum::dim_extent(const Projection& p, const int64_t* rank_extent) {
  int64_t e = 1;
  for (const auto& t : p) e += t.coeff * (rank_extent[t.rank] - 1);
  return e;
}

int64_t Einsum::tensor_volume(int tensor) const {
  int64_t ext[kMaxRanks];
  for (size_t r = 0; r < ranks.size(); ++r) ext[r] = ranks[r].size;
  int64_t v = 1;
  for (const auto& d : tensors[tensor].dims) v *= dim_extent(d, ext);
  return v;
}

bool Einsum::rank_relevant(int tensor, int rank) const {
  for (const auto& d : tensors[tensor].dims)
    for (const auto& t : d)
      if (t.rank == rank) return true;
  return false;
}

std::vector<std::string> rank_names(const Einsum& e) {
  std::vector<std::string> v;
  for (const auto& r : e.ranks) v.push_back(r.name);
  return v;
}

bool same_mapping_problem(const Einsum& a, const Einsum& b) {
  if (a.op != b.op || a.ranks.size() != b.ranks.size() || a.tensors.size() != b.tensors.size()) return false;
  for (size_t r = 0; r < a.ranks.size(); ++r)
    if (a.ranks[r].name != b.ranks[r].name || a.ranks[r].size != b.ranks[r].size) return false;
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    const TensorAccess &x = a.tensors[t], &y = b.tensors[t];
    if (x.role != y.role || x.bits_per_value != y.bits_per_value || x.dims.size() != y.dims.size()) return false;
    for (size_t d = 0; d < x.dims.size(); ++d) {
      if (x.dims[d].size() != y.dims[d].size()) return false;
      for (size_t i = 0; i < x.dims[d].size(); ++i)
        if (x.dims[d][i].rank != y.dims[d][i].rank || x.dims[d][i].coeff != y.dims[d][i].coeff) return false;
    }
  }
  return true;
}

void validate(const Einsum& e, std::string_view where) {
  std::string w = where.empty() ? "einsum '" + e.name + "'" : std::string(where);
  if (e.name.empty()) throw InputError({}, w, "Einsum has an empty name");
  if (e.ranks.empty()) throw InputError({}, w, "Einsum has no ranks");
  if (e.ranks.size() > kMaxRanks)
    throw InputError({}, w, "Einsum has " + std::to_string(e.ranks.size()) +
                                " ranks; at most " + std::to_string(kMaxRanks) + " are supported");
  std::set<std::string> seen;
  for (const auto& r : e.ranks) {
    if (r.size <= 0)
      throw InputError({}, w + ".ranks." + r.name,
                       "rank size " + std::to_string(r.size) + " is not positive; expected >= 1");
    if (!seen.insert(r.name).second) throw InputError({}, w, "rank '" + r.name + "' repeats");
  }
  if (e.tensors.size() < 1 || e.tensors.size() > kMaxTensors)
    throw InputError({}, w, "Einsum has " + std::to_string(e.tensors.size()) +
                                " tensors; expected 1 to " + std::to_string(kMaxTensors));
  seen.clear();
  int outputs = 0;
  for (const auto& t : e.tensors) {
    if (!seen.insert(t.name).second) throw InputError({}, w, "tensor '" + t.name + "' repeats");
    if (t.role == TensorRole::Output) ++outputs;
    if (t.dims.size() > kMaxTensorDims)
      throw InputError({}, w + ".tensors." + t.name,
                       "has " + std::to_string(t.dims.size()) + " dimensions; at most " +
                           std::to_string(kMaxTensorDims) + " are supported");
    if (t.bits_per_value <= 0)
      throw InputError({}, w + ".tensors." + t.name, "bits_per_value must be positive");
    if (!t.offset.empty() && t.offset.size() != t.dims.size())
      throw InputError({}, w + ".tensors." + t.name,
                       "has " + std::to_string(t.offset.size()) + " offsets for " +
                           std::to_string(t.dims.size()) + " dimensions; expected one per dimension");
    if (t.role == TensorRole::Output)
      for (int64_t o : t.offset)
        if (o != 0)
          throw InputError({}, w + ".tensors." + t.name,
                           "an output tensor has a non-zero offset; only inputs may be shifted");
    for (const auto& d : t.dims)
      for (const auto& term : d) {
        if (term.rank < 0 || term.rank >= static_cast<int>(e.ranks.size()))
          throw InputError({}, w + ".tensors." + t.name, "projection names an unknown rank");
        if (term.coeff <= 0)
          throw InputError({}, w + ".tensors." + t.name,
                           "projection coefficient " + std::to_string(term.coeff) +
                               " is not positive");
      }
  }
  if (outputs != 1)
    throw InputError({}, w, "Einsum has " + std::to_string(outputs) +
                                " output tensors; expected exactly one");
}

Einsum make_conv(std::string name, const ConvShape& s, std::string input, std::string weight,
                 std::string output) {
  Einsum e;
  e.name = std::move(name);
  e.op = OpKind::Mac;
  e.ranks = {{"R", s.R}, {"S", s.S}, {"P", s.P}, {"Q", s.Q}, {"C", s.C}, {"K", s.K}, {"N", s.N}};
  enum { R, S, P, Q, C, K, N, G };
  const bool grouped = s.groups > 1;
  if (grouped) e.ranks.push_back({"G", s.groups});
  TensorAccess w{std::move(weight), TensorRole::Weight, {}, 8};
  TensorAccess i{std::move(input), TensorRole::Input, {}, 8};
  TensorAccess o{std::move(output), TensorRole::Output, {}, 8};
  if (grouped) {
    w.dims.push_back({{G, 1}});
    i.dims.push_back({{G, 1}});
    o.dims.push_back({{G, 1}});
  }
  w.dims.insert(w.dims.end(), {{{R, 1}}, {{S, 1}}, {{C, 1}}, {{K, 1}}});
  i.dims.insert(i.dims.end(), {{{N, 1}}, {{C, 1}}, {{R, s.Wdilation}, {P, s.Wstride}},
                               {{S, s.Hdilation}, {Q, s.Hstride}}});
  o.dims.insert(o.dims.end(), {{{N, 1}}, {{K, 1}}, {{P, 1}}, {{Q, 1}}});
  if (s.Wpad != 0 || s.Hpad != 0) {
    i.offset.assign(i.dims.size(), 0);
    i.offset[i.dims.size() - 2] = -s.Wpad;
    i.offset[i.dims.size() - 1] = -s.Hpad;
  }
  e.tensors = {std::move(w), std::move(i), std::move(o)};
  return e;
}

Einsum make_depthwise_conv(std::string name, const ConvShape& s, std::string input,
                           std::string weight, std::string output) {
  Einsum e;
  e.name = std::move(name);
  e.op = OpKind::Mac;
  e.ranks = {{"R", s.R}, {"S", s.S}, {"P", s.P}, {"Q", s.Q}, {"C", s.C}, {"N", s.N}};
  enum { R, S, P, Q, C, N };
  e.tensors = {
      {std::move(weight), TensorRole::Weight, {{{R, 1}}, {{S, 1}}, {{C, 1}}}, 8},
      {std::move(input), TensorRole::Input,
       {{{N, 1}}, {{C, 1}}, {{R, s.Wdilation}, {P, s.Wstride}}, {{S, s.Hdilation}, {Q, s.Hstride}}},
       8},
      {std::move(output), TensorRole::Output, {{{N, 1}}, {{C, 1}}, {{P, 1}}, {{Q, 1}}}, 8},
  };
  if (s.Wpad != 0 || s.Hpad != 0) e.tensors[1].offset = {0, 0, -s.Wpad, -s.Hpad};
  return e;
}

Einsum make_matmul(std::string name, int64_t M, int64_t N, int64_t K, std::string a,
                   std::string b, std::string out) {
  Einsum e;
  e.name = std::move(name);
  e.op = OpKind::Mac;
  e.ranks = {{"M", M}, {"N", N}, {"K", K}};
  enum { m, n, k };
  e.tensors = {
      {std::move(a), TensorRole::Input, {{{m, 1}}, {{k, 1}}}, 8},
      {std::move(b), TensorRole::Weight, {{{k, 1}}, {{n, 1}}}, 8},
      {std::move(out), TensorRole::Output, {{{m, 1}}, {{n, 1}}}, 8},
  };
  return e;
}

}  // namespace mapfuse
