#include "engine/search/ffm/pmapping_io.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "engine/cost/fused.hpp"

namespace mapfuse::ffm {

std::vector<std::vector<PmappingContext>> matchable_contexts(const Workload& w, const Core& c, const FfmOptions& o) {
  std::vector<std::vector<PmappingContext>> contexts(w.einsums.size());
  for (size_t i = 0; i < w.einsums.size(); ++i) contexts[i] = make_contexts(w, static_cast<int>(i), c, o.pmappings);
  apply_fusion_constraints(w, o, contexts);
  drop_unmatched_contexts(w, contexts);
  return contexts;
}

namespace {

// FNV-1a over an Einsum's context list (tiling and compatibilities, in order): a slice records
// it, so that slices made from another context list (another version of mapfuse, whose contexts
// differ, resumed from an old journal) are refused instead of being matched to the wrong
// contexts by index.
uint64_t contexts_fingerprint(const Einsum& e, const std::vector<PmappingContext>& contexts) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : generation_key(e, contexts)) h = (h ^ ch) * 1099511628211ull;
  for (const PmappingContext& ctx : contexts)
    for (const TensorCompat& tc : ctx.compat) h = hash_value(tc, h);
  return h;
}

}  // namespace

// Format, one record per line:
//   slice <einsum> <slice> <slices> <evaluated> <capacity_pruned> <lane_calls> <contexts> <fingerprint>
//   context <k> <count>
//   p <energy %a> <cycles %a> <own per level...> | <mapping text>
std::string generate_pmapping_slice(const Workload& w, const Core& c, const FfmOptions& o,
                                    const std::vector<std::vector<PmappingContext>>& contexts, int einsum, int slice,
                                    int slices) {
  // Round robin over classes of contexts that tile the Einsum alike (without nested fusion, one
  // context each), so that a slice generates each class once.
  std::vector<PmappingContext> mine;
  std::vector<int> index;
  const std::vector<size_t> cls = tile_classes(w.einsums[einsum], c, o.pmappings, contexts[einsum]);
  for (size_t k = 0; k < contexts[einsum].size(); ++k)
    if (static_cast<int>(cls[k] % static_cast<size_t>(slices)) == slice) mine.push_back(contexts[einsum][k]), index.push_back(static_cast<int>(k));
  const EinsumPmappings pm = generate_pmappings(w, einsum, c, o.pmappings, mine);
  std::string out = fmt::format("slice {} {} {} {} {} {} {} {:x}\n", einsum, slice, slices, pm.evaluated,
                                pm.capacity_pruned, pm.lane_calls, contexts[einsum].size(),
                                contexts_fingerprint(w.einsums[einsum], contexts[einsum]));
  const int L = static_cast<int>(c.levels.size());
  for (size_t j = 0; j < pm.contexts.size(); ++j) {
    out += fmt::format("context {} {}\n", index[j], pm.pmappings[j].size());
    const Einsum tile = tile_einsum(w.einsums[einsum], pm.contexts[j].shared);
    for (const Pmapping& p : pm.pmappings[j]) {
      out += fmt::format("p {:a} {:a}", p.energy_pj, p.cycles);
      for (int l = 0; l < L; ++l) out += fmt::format(" {}", p.own[l]);
      out += " | " + to_text(p.mapping, tile, c) + "\n";
    }
  }
  return out;
}

std::vector<EinsumPmappings> merge_pmapping_slices(const Workload& w, const Core& c,
                                                   std::vector<std::vector<PmappingContext>> contexts,
                                                   const std::vector<std::string>& slices) {
  const int E = static_cast<int>(w.einsums.size()), L = static_cast<int>(c.levels.size());
  std::vector<uint64_t> fingerprint(static_cast<size_t>(E));
  for (int i = 0; i < E; ++i) fingerprint[static_cast<size_t>(i)] = contexts_fingerprint(w.einsums[i], contexts[i]);
  std::vector<EinsumPmappings> pm(E);
  std::vector<std::vector<uint8_t>> seen(E);
  for (int i = 0; i < E; ++i) {
    pm[i].einsum = i;
    pm[i].pmappings.resize(contexts[i].size());
    seen[i].assign(contexts[i].size(), 0);
    pm[i].contexts = std::move(contexts[i]);
  }
  for (const std::string& text : slices) {
    std::istringstream in(text);
    std::string line, tag;
    int einsum = -1, current = -1;
    Einsum tile;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      ls >> tag;
      if (tag == "slice") {
        int s = 0, n = 0;
        int64_t evaluated = 0, pruned = 0, calls = 0;
        size_t count = 0;
        std::string fp;
        ls >> einsum >> s >> n >> evaluated >> pruned >> calls;
        if (!ls || einsum < 0 || einsum >= E) throw std::runtime_error("pmapping slice: bad header '" + line + "'");
        ls >> count >> fp;  // absent before the fingerprint was recorded: another version
        if (!ls || count != pm[einsum].contexts.size() || fp != fmt::format("{:x}", fingerprint[static_cast<size_t>(einsum)]))
          throw std::runtime_error(fmt::format(
              "pmapping slice of Einsum '{}' was generated for another context list ({} contexts, here {}; another "
              "version of mapfuse?): run the study without its old journal",
              w.einsums[einsum].name, count, pm[einsum].contexts.size()));
        pm[einsum].evaluated += evaluated;
        pm[einsum].capacity_pruned += pruned;
        pm[einsum].lane_calls += calls;
      } else if (tag == "context") {
        size_t count = 0;
        ls >> current >> count;
        if (!ls || einsum < 0 || current < 0 || current >= static_cast<int>(seen[einsum].size()))
          throw std::runtime_error("pmapping slice: bad context line '" + line + "'");
        if (seen[einsum][current]++) throw std::runtime_error(fmt::format("pmapping slice: context {} of Einsum {} twice", current, einsum));
        tile = tile_einsum(w.einsums[einsum], pm[einsum].contexts[current].shared);
        pm[einsum].pmappings[current].reserve(count);
      } else if (tag == "p") {
        if (current < 0) throw std::runtime_error("pmapping slice: pmapping before its context");
        std::string e, cy;
        ls >> e >> cy;
        Pmapping p;
        p.energy_pj = std::strtod(e.c_str(), nullptr);
        p.cycles = std::strtod(cy.c_str(), nullptr);
        for (int l = 0; l < L; ++l) ls >> p.own[l];
        std::string bar;
        ls >> bar;
        std::string rest;
        std::getline(ls, rest);
        if (!ls.eof() && !ls) throw std::runtime_error("pmapping slice: bad pmapping line");
        if (bar != "|") throw std::runtime_error("pmapping slice: bad pmapping line '" + line + "'");
        const size_t at = rest.find_first_not_of(' ');
        p.mapping = parse_mapping(at == std::string::npos ? std::string_view{} : std::string_view(rest).substr(at), tile, c);
        pm[einsum].pmappings[current].push_back(std::move(p));
      } else if (!tag.empty()) {
        throw std::runtime_error("pmapping slice: unknown record '" + tag + "'");
      }
      tag.clear();
    }
  }
  for (int i = 0; i < E; ++i)
    for (size_t k = 0; k < seen[i].size(); ++k)
      if (!seen[i][k]) throw std::runtime_error(fmt::format("pmapping slices: context {} of Einsum '{}' missing", k, w.einsums[i].name));
  for (int i = 0; i < E; ++i)
    for (const auto& list : pm[i].pmappings) pm[i].kept += static_cast<int64_t>(list.size());
  return pm;
}

}  // namespace mapfuse::ffm
