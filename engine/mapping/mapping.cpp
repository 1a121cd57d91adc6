#include "engine/mapping/mapping.hpp"

#include <cmath>

#include <algorithm>
#include <cctype>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

std::vector<std::string> level_names(const Core& c) {
  std::vector<std::string> v;
  for (const auto& l : c.levels) v.push_back(l.name);
  return v;
}

std::vector<std::string> tensor_names(const Einsum& e) {
  std::vector<std::string> v;
  for (const auto& t : e.tensors) v.push_back(t.name);
  return v;
}

std::vector<std::string_view> split(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos));
    if (next == std::string_view::npos) break;
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

int64_t parse_factor(std::string_view digits, std::string_view token, std::string_view what) {
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(),
                                     [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
    throw InputError({}, std::string(what),
                     "'" + std::string(token) + "': expected a positive integer factor");
  int64_t f = std::stoll(std::string(digits));
  if (f <= 0)
    throw InputError({}, std::string(what), "'" + std::string(token) + "': factor must be >= 1");
  return f;
}

// Puts temporal loops before spatial ones, keeping the relative order of each kind.
void canonicalize(LevelMapping& lm) {
  std::stable_partition(lm.loops.begin(), lm.loops.end(),
                        [](const Loop& l) { return l.kind == LoopKind::Temporal; });
}


}  // namespace

bool axis_accepts(const Fanout& f, LoopKind axis, const Einsum& e, int rank) {
  const bool x = axis == LoopKind::SpatialX;
  const auto& names = x ? f.x_ranks : f.y_ranks;
  const RoleMask reuse = x ? f.x_reuse : f.y_reuse;
  if ((x ? f.x : f.y) <= 1) return false;
  if (!names.empty() && std::find(names.begin(), names.end(), e.ranks[rank].name) == names.end())
    return false;
  for (size_t t = 0; t < e.tensors.size(); ++t)
    if ((reuse & role_bit(e.tensors[t].role)) && e.rank_relevant(static_cast<int>(t), rank))
      return false;
  return true;
}

int64_t max_axis_use(const Fanout& f, LoopKind axis, const Einsum& e) {
  const int64_t cap = axis == LoopKind::SpatialX ? f.x : f.y;
  std::vector<int64_t> reach{1};  // products reachable with the ranks seen so far
  for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r) {
    if (!axis_accepts(f, axis, e, r)) continue;
    std::vector<int64_t> next;
    for (int64_t p : reach)
      for (int64_t d = 1; d <= e.ranks[r].size && p * d <= cap; ++d)
        if (e.ranks[r].size % d == 0) next.push_back(p * d);
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    reach = std::move(next);
  }
  return reach.back();
}

int64_t min_axis_use(const Fanout& f, LoopKind axis, const Einsum& e) {
  const bool x = axis == LoopKind::SpatialX;
  const double usage = x ? f.x_min_usage : f.y_min_usage;
  if (usage <= 0 || e.op == OpKind::Copy) return 1;
  const auto want = static_cast<int64_t>(std::ceil(usage * static_cast<double>(x ? f.x : f.y) - 1e-9));
  return std::max<int64_t>(1, std::min(want, max_axis_use(f, axis, e)));
}

std::string to_text(const Mapping& m, const Einsum& e, const Core& c) {
  std::string out;
  for (int l = static_cast<int>(m.levels.size()) - 1; l >= 0; --l) {
    const LevelMapping& lm = m.levels[l];
    if (!out.empty()) out += " | ";
    out += l < static_cast<int>(c.levels.size()) ? c.levels[l].name : "L" + std::to_string(l);
    out += '[';
    bool first = true;
    for (size_t t = 0; t < e.tensors.size(); ++t)
      if (lm.keep & (1u << t)) {
        if (!first) out += ',';
        out += e.tensors[t].name;
        first = false;
      }
    out += ']';
    for (const Loop& lp : lm.loops) {
      out += ' ';
      out += e.ranks[lp.rank].name;
      out += '=';
      out += std::to_string(lp.factor);
      if (lp.kind == LoopKind::SpatialX) out += "@x";
      if (lp.kind == LoopKind::SpatialY) out += "@y";
    }
  }
  return out;
}

Mapping parse_mapping(std::string_view text, const Einsum& e, const Core& c) {
  Mapping m;
  m.levels.resize(c.levels.size());
  std::vector<bool> seen(c.levels.size(), false);
  for (std::string_view part : split(text, "|")) {
    auto toks = words(part);
    if (toks.empty()) throw InputError({}, "mapping", "empty level between '|' separators");
    std::string_view head = toks[0];
    size_t lb = head.find('['), rb = head.rfind(']');
    if (lb == std::string_view::npos || rb == std::string_view::npos || rb < lb)
      throw InputError({}, "mapping", "'" + std::string(head) +
                                          "': expected a level header like Name[tensor,...]");
    std::string lname(head.substr(0, lb));
    int l = c.level_index(lname);
    if (l < 0)
      throw InputError({}, "mapping", "unknown level '" + lname + "'" +
                                          did_you_mean(lname, level_names(c)));
    if (seen[l]) throw InputError({}, "mapping", "level '" + lname + "' appears twice");
    seen[l] = true;
    LevelMapping& lm = m.levels[l];
    std::string_view inside = head.substr(lb + 1, rb - lb - 1);
    if (!inside.empty())
      for (std::string_view tn : split(inside, ",")) {
        int t = e.tensor_index(tn);
        if (t < 0)
          throw InputError({}, "mapping." + lname,
                           "unknown tensor '" + std::string(tn) + "'" +
                               did_you_mean(tn, tensor_names(e)));
        lm.keep |= static_cast<TensorMask>(1u << t);
      }
    for (size_t i = 1; i < toks.size(); ++i) {
      std::string_view tok = toks[i];
      size_t eq = tok.find('=');
      if (eq == std::string_view::npos)
        throw InputError({}, "mapping." + lname,
                         "'" + std::string(tok) + "': expected rank=factor or rank=factor@x|@y");
      std::string rname(tok.substr(0, eq));
      int r = e.rank_index(rname);
      if (r < 0)
        throw InputError({}, "mapping." + lname, "unknown rank '" + rname + "'" +
                                                     did_you_mean(rname, rank_names(e)));
      std::string_view rest = tok.substr(eq + 1);
      LoopKind kind = LoopKind::Temporal;
      if (size_t at = rest.find('@'); at != std::string_view::npos) {
        std::string_view axis = rest.substr(at + 1);
        if (axis == "x" || axis == "X") kind = LoopKind::SpatialX;
        else if (axis == "y" || axis == "Y") kind = LoopKind::SpatialY;
        else
          throw InputError({}, "mapping." + lname,
                           "'" + std::string(tok) + "': spatial axis must be @x or @y");
        rest = rest.substr(0, at);
      }
      lm.loops.push_back({r, parse_factor(rest, tok, "mapping." + lname), kind});
    }
    canonicalize(lm);
  }
  return m;
}

Mapping parse_dosa_mapping(std::string_view text, const Einsum& e, const Core& c) {
  Mapping m;
  m.levels.resize(c.levels.size());
  for (std::string_view part : split(text, " - ")) {
    auto toks = words(part);
    if (toks.empty()) continue;
    std::string_view head = toks[0];
    if (head.size() < 4 || head[0] != 'L' || head.find('[') == std::string_view::npos ||
        head.back() != ']')
      throw InputError({}, "dosa mapping",
                       "'" + std::string(head) + "': expected a level header like L2[WI]");
    size_t lb = head.find('[');
    std::string_view num = head.substr(1, lb - 1);
    if (num.empty() || !std::all_of(num.begin(), num.end(), [](char ch) {
          return std::isdigit(static_cast<unsigned char>(ch));
        }))
      throw InputError({}, "dosa mapping",
                       "'" + std::string(head) + "': expected a level header like L2[WI]");
    const int l = std::stoi(std::string(num));
    if (l >= static_cast<int>(c.levels.size()))
      throw InputError({}, "dosa mapping",
                       "level L" + std::to_string(l) + " does not exist; the architecture has " +
                           std::to_string(c.levels.size()) + " levels");
    LevelMapping& lm = m.levels[l];
    for (char ch : head.substr(lb + 1, head.size() - lb - 2)) {
      TensorRole role;
      if (ch == 'W') role = TensorRole::Weight;
      else if (ch == 'I') role = TensorRole::Input;
      else if (ch == 'O') role = TensorRole::Output;
      else
        throw InputError({}, "dosa mapping", std::string("tensor letter '") + ch +
                                                 "' is not one of W, I, O");
      for (size_t t = 0; t < e.tensors.size(); ++t)
        if (e.tensors[t].role == role) lm.keep |= static_cast<TensorMask>(1u << t);
    }
    for (size_t i = 1; i < toks.size(); ++i) {
      std::string_view tok = toks[i];
      size_t k = 0;
      while (k < tok.size() && std::isalpha(static_cast<unsigned char>(tok[k]))) ++k;
      std::string rname(tok.substr(0, k));
      int r = e.rank_index(rname);
      if (r < 0)
        throw InputError({}, "dosa mapping", "unknown rank '" + rname + "' in '" +
                                                 std::string(tok) + "'" +
                                                 did_you_mean(rname, rank_names(e)));
      std::string_view digits = tok.substr(k);
      LoopKind kind = LoopKind::Temporal;
      if (!digits.empty() && (digits.back() == 'X' || digits.back() == 'x')) {
        digits.remove_suffix(1);
        const Fanout& f = c.levels[l].fanout;
        kind = axis_accepts(f, LoopKind::SpatialX, e, r)   ? LoopKind::SpatialX
               : axis_accepts(f, LoopKind::SpatialY, e, r) ? LoopKind::SpatialY
                                                            : LoopKind::SpatialX;
      }
      int64_t f = parse_factor(digits, tok, "dosa mapping");
      if (f > 1 || kind != LoopKind::Temporal) lm.loops.push_back({r, f, kind});
    }
    canonicalize(lm);
  }
  return m;
}

std::optional<MappingError> check_structure(const Mapping& m, const Einsum& e, const Core& core) {
  const Core& c = core_for(core, e);
  using K = MappingError::Kind;
  const int L = static_cast<int>(c.levels.size());
  if (static_cast<int>(m.levels.size()) != L)
    return MappingError{K::LevelCount, -1, -1, -1,
                        "mapping has " + std::to_string(m.levels.size()) +
                            " levels; the architecture has " + std::to_string(L)};
  std::vector<int64_t> product(e.ranks.size(), 1);
  for (int l = 0; l < L; ++l) {
    const Level& lv = c.levels[l];
    int64_t x = 1, y = 1;
    for (const Loop& lp : m.levels[l].loops) {
      if (lp.rank < 0 || lp.rank >= static_cast<int>(e.ranks.size()))
        return MappingError{K::FactorProduct, l, lp.rank, -1, "loop names an unknown rank"};
      product[lp.rank] *= lp.factor;
      if (lp.kind == LoopKind::Temporal) continue;
      (lp.kind == LoopKind::SpatialX ? x : y) *= lp.factor;
      if (lp.factor > 1 && !axis_accepts(lv.fanout, lp.kind, e, lp.rank))
        return MappingError{K::RankNotOnAxis, l, lp.rank, -1,
                            "rank " + e.ranks[lp.rank].name + " may not be spread along " +
                                (lp.kind == LoopKind::SpatialX ? "X" : "Y") + " below level " +
                                lv.name};
    }
    if (x > lv.fanout.x || y > lv.fanout.y)
      return MappingError{K::FanoutExceeded, l, -1, -1,
                          "spatial fan-out below " + lv.name + " is " + std::to_string(x) + "x" +
                              std::to_string(y) + "; the level allows " +
                              std::to_string(lv.fanout.x) + "x" + std::to_string(lv.fanout.y)};
    const int64_t need_x = min_axis_use(lv.fanout, LoopKind::SpatialX, e), need_y = min_axis_use(lv.fanout, LoopKind::SpatialY, e);
    if (x < need_x || y < need_y)
      return MappingError{K::FanoutUnderused, l, -1, -1,
                          "spatial fan-out below " + lv.name + " is " + std::to_string(x) + "x" +
                              std::to_string(y) + "; its min_usage asks for at least " +
                              std::to_string(need_x) + "x" + std::to_string(need_y)};
    for (size_t t = 0; t < e.tensors.size(); ++t) {
      if ((m.levels[l].keep & (1u << t)) && !(lv.may_keep & role_bit(e.tensors[t].role)))
        return MappingError{K::KeepNotAllowed, l, -1, static_cast<int>(t),
                            "level " + lv.name + " may not hold " + e.tensors[t].name + " (" +
                                std::string(to_string(e.tensors[t].role)) + ")"};
      if (l < L - 1 && !(m.levels[l].keep & (1u << t)) && (lv.must_keep & role_bit(e.tensors[t].role)))
        return MappingError{K::KeepMissing, l, -1, static_cast<int>(t),
                            "level " + lv.name + " must hold " + e.tensors[t].name + " (" +
                                std::string(to_string(e.tensors[t].role)) + ", must_keep)"};
    }
  }
  for (size_t r = 0; r < e.ranks.size(); ++r)
    if (product[r] != e.ranks[r].size)
      return MappingError{K::FactorProduct, -1, static_cast<int>(r), -1,
                          "factors of rank " + e.ranks[r].name + " multiply to " +
                              std::to_string(product[r]) + "; its size is " +
                              std::to_string(e.ranks[r].size)};
  for (size_t t = 0; t < e.tensors.size(); ++t)
    if (!(m.levels[L - 1].keep & (1u << t)))
      return MappingError{K::BackingMissing, L - 1, -1, static_cast<int>(t),
                          "outermost level " + c.levels[L - 1].name + " must keep " +
                              e.tensors[t].name};
  return std::nullopt;
}

Mapping trivial_mapping(const Einsum& e, const Core& c) {
  Mapping m;
  m.levels.resize(c.levels.size());
  LevelMapping& top = m.levels.back();
  top.keep = static_cast<TensorMask>((1u << e.tensors.size()) - 1);
  for (size_t r = 0; r < e.ranks.size(); ++r)
    if (e.ranks[r].size > 1) top.loops.push_back({static_cast<int>(r), e.ranks[r].size});
  return m;
}

}  // namespace mapfuse
