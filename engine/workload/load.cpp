#include "engine/workload/load.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "engine/common/error.hpp"
#include "engine/common/toml_reader.hpp"
#include "engine/workload/onnx_import.hpp"
#include "engine/workload/timeloop_problem.hpp"

namespace mapfuse {
namespace {

namespace fs = std::filesystem;

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

struct TermText {
  std::string rank;
  int64_t coeff;
};

// "p*2 + r" -> {(p,2), (r,1)}; error text in `err` on failure.
std::vector<TermText> parse_projection(const std::string& text, std::string& err) {
  std::vector<TermText> out;
  std::string_view s = text;
  if (trim(s).empty()) {
    err = "empty projection; expected e.g. \"p*2+r\"";
    return {};
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t plus = s.find('+', start);
    const std::string term = trim(s.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start));
    std::string rank;
    int64_t coeff = 1;
    const size_t star = term.find('*');
    if (star == std::string::npos) {
      rank = term;
    } else {
      std::string a = trim(std::string_view(term).substr(0, star)), b = trim(std::string_view(term).substr(star + 1));
      if (all_digits(a)) std::swap(a, b);
      if (!all_digits(b) || b.size() > 15) {
        err = "term '" + term + "' is not rank, coeff*rank or rank*coeff";
        return {};
      }
      rank = a;
      coeff = std::stoll(b);
    }
    if (rank.empty() || !std::all_of(rank.begin(), rank.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; }) ||
        std::isdigit(static_cast<unsigned char>(rank[0]))) {
      err = "term '" + term + "' does not name a rank; expected rank, coeff*rank or rank*coeff";
      return {};
    }
    if (coeff <= 0) {
      err = "coefficient of '" + rank + "' must be positive";
      return {};
    }
    out.push_back({rank, coeff});
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  return out;
}

TensorRole role_from_string(const TomlReader& r, const std::string& s) {
  if (s == "input") return TensorRole::Input;
  if (s == "weight") return TensorRole::Weight;
  if (s == "output") return TensorRole::Output;
  r.fail("role", "unknown role '" + s + "'" + did_you_mean(s, {"input", "weight", "output"}) +
                     "; expected input, weight or output");
}

}  // namespace

Workload load_workload_toml(const std::string& path) {
  const toml::table root = parse_toml_file(path);
  TomlReader top(root, path);
  Workload w;
  w.name = top.opt_str("name").value_or(fs::path(path).stem().string());
  std::vector<TomlReader> einsums = top.tables("einsum");
  top.finish();
  if (einsums.empty()) top.fail("einsum", "missing; expected at least one [[einsum]] table");
  bool any_count = false;
  std::vector<int64_t> counts;
  for (TomlReader& er : einsums) {
    Einsum e;
    e.name = er.str("name");
    if (e.name.empty()) er.fail("name", "must not be empty");
    if (auto op = er.opt_str("op")) {
      try {
        e.op = op_kind_from_string(*op);
      } catch (const InputError& err) {
        er.fail("op", err.message());
      }
    }
    const int64_t count = er.opt_integer("count").value_or(1);
    if (count <= 0) er.fail("count", "count " + std::to_string(count) + " is not positive; expected >= 1");
    any_count |= er.has("count");
    counts.push_back(count);

    TomlReader rr = er.table("ranks");
    // Declared rank names (for suggestions and the unused check).
    std::vector<std::string> declared;
    if (const toml::table* t = root["einsum"][&er - &einsums[0]]["ranks"].as_table())
      for (const auto& [k, v] : *t) declared.emplace_back(k.str());
    std::map<std::string, int> index;
    auto rank_of = [&](TomlReader& tr, const std::string& name) -> int {
      std::string n = rr.has(name) ? name : upper(name);
      if (!rr.has(n))
        tr.fail("dims", "unknown rank '" + name + "'" + did_you_mean(name, declared) + "; declared ranks: " +
                            [&] {
                              std::string s;
                              for (const auto& d : declared) s += (s.empty() ? "" : ", ") + d;
                              return s;
                            }());
      auto it = index.find(n);
      if (it != index.end()) return it->second;
      const int64_t size = rr.integer(n);
      if (size <= 0)
        rr.fail(n, "rank size " + std::to_string(size) + " is not positive; expected >= 1");
      index[n] = static_cast<int>(e.ranks.size());
      e.ranks.push_back({n, size});
      return index[n];
    };
    std::vector<TomlReader> tensors = er.tables("tensors");
    if (tensors.empty()) {
      er.finish();  // a misspelt key ("tensorz") is the likelier cause: name it
      er.fail("tensors", "missing; expected an array of tensors with name, role and dims");
    }
    for (TomlReader& tr : tensors) {
      TensorAccess ta;
      ta.name = tr.str("name");
      ta.role = role_from_string(tr, tr.str("role"));
      ta.bits_per_value = static_cast<int>(tr.opt_integer("bits").value_or(8));
      if (ta.bits_per_value <= 0) tr.fail("bits", "must be positive");
      if (!tr.has("dims")) tr.fail("dims", "missing required key; expected a list of projections like \"p*2+r\"");
      for (const std::string& d : tr.str_list("dims")) {
        std::string err;
        auto terms = parse_projection(d, err);
        if (!err.empty()) tr.fail("dims", "'" + d + "': " + err);
        Projection p;
        for (const auto& t : terms) p.push_back({rank_of(tr, t.rank), t.coeff});
        ta.dims.push_back(std::move(p));
      }
      tr.finish();
      e.tensors.push_back(std::move(ta));
    }
    for (const auto& d : declared)
      if (!index.count(d)) rr.fail(d, "rank is declared but no tensor projection uses it");
    rr.finish();
    er.finish();
    std::stable_partition(e.tensors.begin(), e.tensors.end(),
                          [](const TensorAccess& t) { return t.role != TensorRole::Output; });
    try {
      validate(e);
    } catch (const InputError& err) {
      throw InputError(er.where("name"), err.key(), err.message());
    }
    w.einsums.push_back(std::move(e));
  }
  if (any_count) w.counts = counts;
  try {
    finalize(w);
  } catch (const InputError& err) {
    throw InputError({path, 0, 0}, err.key(), err.message());
  }
  return w;
}

Workload load_workload(const std::string& spec, const ZooParams& p) {
  std::error_code ec;
  const fs::path path(spec);
  if (fs::is_directory(path, ec)) return import_timeloop_dir(spec);
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  const bool file_like = ext == ".onnx" || ext == ".yaml" || ext == ".yml" || ext == ".toml" ||
                         spec.find('/') != std::string::npos;
  if (fs::exists(path, ec)) {
    if (ext == ".onnx") return import_onnx(spec);
    if (ext == ".toml") return load_workload_toml(spec);
    if (ext == ".yaml" || ext == ".yml") {
      Workload w;
      w.name = path.stem().string();
      w.einsums.push_back(import_timeloop_problem(spec));
      finalize(w);
      return w;
    }
    throw InputError({spec, 0, 0}, {},
                     "unknown workload file type '" + ext +
                         "'; expected .onnx, .yaml/.yml (Timeloop problem), .toml or a directory");
  }
  if (file_like) throw InputError({spec, 0, 0}, {}, "no such file or directory");
  return zoo_workload(spec, p);
}

}  // namespace mapfuse
