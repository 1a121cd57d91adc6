#include "engine/workload/workload.hpp"

#include <algorithm>
#include <map>
#include <queue>

#include <fmt/format.h>

#include "engine/common/error.hpp"

namespace mapfuse {

int Workload::einsum_index(std::string_view n) const {
  for (size_t i = 0; i < einsums.size(); ++i)
    if (einsums[i].name == n) return static_cast<int>(i);
  return -1;
}

int Workload::tensor_index(std::string_view n) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == n) return static_cast<int>(i);
  return -1;
}

int64_t Workload::operations() const {
  int64_t s = 0;
  for (size_t i = 0; i < einsums.size(); ++i) s += count(static_cast<int>(i)) * einsums[i].operations();
  return s;
}

void finalize(Workload& w) {
  if (w.einsums.empty()) throw InputError({}, "workload '" + w.name + "'", "has no Einsums");
  if (!w.counts.empty() && w.counts.size() != w.einsums.size())
    throw InputError({}, "workload '" + w.name + "'", "counts and Einsums differ in number");
  std::map<std::string, int> seen_einsum;
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    validate(w.einsums[i]);
    if (!seen_einsum.emplace(w.einsums[i].name, static_cast<int>(i)).second)
      throw InputError({}, "workload '" + w.name + "'",
                       "Einsum name '" + w.einsums[i].name + "' repeats");
  }
  // Build producer/consumer edges and check shared tensors agree.
  auto build = [&]() {
    w.tensors.clear();
    std::map<std::string, int> index;
    for (size_t i = 0; i < w.einsums.size(); ++i) {
      const Einsum& e = w.einsums[i];
      for (size_t t = 0; t < e.tensors.size(); ++t) {
        const TensorAccess& ta = e.tensors[t];
        auto [it, fresh] = index.emplace(ta.name, static_cast<int>(w.tensors.size()));
        if (fresh) w.tensors.push_back({ta.name, -1, {}, e.tensor_volume(static_cast<int>(t)),
                                        ta.bits_per_value});
        TensorInfo& info = w.tensors[it->second];
        // A consumer's view may differ from the producer's in extent (padding adds a halo; a
        // strided window may skip the last rows) but never in dimensionality.
        const int dims = static_cast<int>(ta.dims.size());
        if (fresh) info.dims = dims;
        if (dims != info.dims)
          throw InputError({}, "tensor '" + ta.name + "'",
                           fmt::format("Einsum '{}' indexes it with {} dimensions but another "
                                       "Einsum with {}; shared tensors must agree",
                                       e.name, dims, info.dims));
        const int64_t vol = e.tensor_volume(static_cast<int>(t));
        if (ta.role == TensorRole::Output || info.producer < 0) info.volume = std::max(info.volume, vol);
        if (ta.role == TensorRole::Output) info.volume = vol;
        if (ta.role == TensorRole::Output) {
          if (info.producer >= 0)
            throw InputError({}, "tensor '" + ta.name + "'",
                             "written by both '" + w.einsums[info.producer].name + "' and '" +
                                 e.name + "'; a tensor has one producer");
          info.producer = static_cast<int>(i);
        } else {
          info.consumers.push_back(static_cast<int>(i));
        }
      }
    }
  };
  build();
  // Kahn's algorithm, smallest original index first so the order is stable.
  const int n = static_cast<int>(w.einsums.size());
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<int>> succ(n);
  for (const TensorInfo& t : w.tensors)
    if (t.producer >= 0)
      for (int c : t.consumers) {
        succ[t.producer].push_back(c);
        ++indeg[c];
      }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : succ[i])
      if (--indeg[c] == 0) ready.push(c);
  }
  if (static_cast<int>(order.size()) != n) {
    std::string cyc;
    for (int i = 0; i < n; ++i)
      if (indeg[i] > 0) cyc += (cyc.empty() ? "" : ", ") + w.einsums[i].name;
    throw InputError({}, "workload '" + w.name + "'",
                     "the Einsum graph has a cycle through: " + cyc +
                         "; a workload must be a DAG");
  }
  std::vector<Einsum> sorted;
  std::vector<int64_t> counts;
  for (int i : order) {
    sorted.push_back(std::move(w.einsums[i]));
    if (!w.counts.empty()) counts.push_back(w.counts[i]);
  }
  w.einsums = std::move(sorted);
  w.counts = std::move(counts);
  build();
}

std::string describe(const Workload& w) {
  std::string s = fmt::format("workload {}: {} Einsums, {} tensors, {:.4g} operations\n", w.name,
                              w.einsums.size(), w.tensors.size(),
                              static_cast<double>(w.operations()));
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    const Einsum& e = w.einsums[i];
    std::string ranks;
    for (const auto& r : e.ranks) ranks += fmt::format("{}{}={}", ranks.empty() ? "" : " ", r.name, r.size);
    std::string rhs, lhs;
    for (const auto& t : e.tensors) {
      std::string dims;
      for (const auto& d : t.dims) {
        std::string expr;
        for (const auto& term : d)
          expr += (expr.empty() ? "" : "+") +
                  (term.coeff == 1 ? "" : std::to_string(term.coeff) + "*") +
                  e.ranks[term.rank].name;
        if (expr.empty()) expr = "0";  // a size-1 dimension indexed by no rank
        dims += (dims.empty() ? "" : ",") + expr;
      }
      std::string ref = t.name + "[" + dims + "]";
      if (t.role == TensorRole::Output) lhs = ref;
      else rhs += (rhs.empty() ? "" : " * ") + ref;
    }
    s += fmt::format("  {:<3} {:<18} {:<11} {} = {}   ({}; {:.4g} ops", i, e.name,
                     to_string(e.op), lhs, rhs, ranks, static_cast<double>(e.operations()));
    if (w.count(static_cast<int>(i)) != 1) s += fmt::format(", x{}", w.count(static_cast<int>(i)));
    s += ")\n";
  }
  return s;
}

}  // namespace mapfuse
