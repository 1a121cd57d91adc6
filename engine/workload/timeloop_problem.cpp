#include "engine/workload/timeloop_problem.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "engine/common/error.hpp"
#include "engine/common/yaml_file.hpp"

namespace mapfuse {
namespace {

namespace fs = std::filesystem;

SourceLocation loc(const std::string& file, const YAML::Node& n) { return yaml_location(file, n); }

YAML::Node load_yaml(const std::string& path) { return load_yaml_file(path); }

int64_t get_int(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw InputError(loc(file, n), key, "expected an integer");
  try {
    return n.as<int64_t>();
  } catch (const YAML::Exception&) {
    throw InputError(loc(file, n), key, "'" + n.Scalar() + "' is not an integer; expected an integer");
  }
}

// Timeloop SOP projection: a coefficient of 0 (e.g. DOSA's conv_1d files with Wstride: 0) means
// the term contributes nothing, so it is dropped.
void drop_zero_terms(Einsum& e) {
  for (auto& t : e.tensors)
    for (auto& d : t.dims)
      d.erase(std::remove_if(d.begin(), d.end(), [](const ProjectionTerm& x) { return x.coeff == 0; }), d.end());
}

const std::vector<std::string> kCnnKeys = {"R", "S", "P", "Q", "C", "K", "N",
                                           "Wstride", "Hstride", "Wdilation", "Hdilation"};

// Reads the dimension/coefficient values (from `instance` or flat keys under `problem`).
std::map<std::string, int64_t> read_values(const std::string& file, const YAML::Node& problem,
                                           const std::vector<std::string>& dims,
                                           const std::vector<std::string>& coeffs,
                                           bool lenient = false) {
  std::vector<std::string> valid = dims;
  valid.insert(valid.end(), coeffs.begin(), coeffs.end());
  const YAML::Node inst = problem["instance"];
  const bool flat = !inst;
  const YAML::Node src = flat ? problem : inst;
  const std::string prefix = flat ? "problem." : "problem.instance.";
  if (!src.IsMap()) throw InputError(loc(file, src), prefix + "instance", "expected a map of dimension sizes");
  std::map<std::string, int64_t> v;
  for (const auto& kv : src) {
    const std::string k = kv.first.Scalar();
    if (flat && (k == "shape" || k == "instance")) continue;
    // Timeloop's processed input carries keys the model ignores (H, W, Hpad, densities, ...).
    if (lenient && std::find(valid.begin(), valid.end(), k) == valid.end()) continue;
    if (std::find(valid.begin(), valid.end(), k) == valid.end()) {
      std::string all;
      for (const auto& s : valid) all += (all.empty() ? "" : ", ") + s;
      throw InputError(loc(file, kv.first), prefix + k,
                       "unknown key" + did_you_mean(k, valid) + "; expected one of " + all);
    }
    v[k] = get_int(file, kv.second, prefix + k);
    const bool is_dim = std::find(dims.begin(), dims.end(), k) != dims.end();
    if (is_dim && v[k] <= 0)
      throw InputError(loc(file, kv.second), prefix + k,
                       "rank size " + std::to_string(v[k]) + " is not positive; expected >= 1");
    if (!is_dim && v[k] < 0)
      throw InputError(loc(file, kv.second), prefix + k,
                       "coefficient " + std::to_string(v[k]) + " is negative; expected >= 0");
  }
  return v;
}

Einsum custom_shape(const std::string& file, const std::string& name, const YAML::Node& problem,
                    const YAML::Node& shape, bool lenient) {
  std::vector<std::string> dims, coeffs;
  std::map<std::string, int64_t> coeff_default;
  const YAML::Node d = shape["dimensions"];
  if (!d || !d.IsSequence()) throw InputError(loc(file, shape), "problem.shape.dimensions", "missing or not a list");
  for (const auto& x : d) dims.push_back(x.Scalar());
  if (const YAML::Node c = shape["coefficients"]) {
    for (const auto& x : c) {
      const std::string cn = x["name"].Scalar();
      coeffs.push_back(cn);
      coeff_default[cn] = x["default"] ? get_int(file, x["default"], "problem.shape.coefficients." + cn) : 1;
    }
  }
  auto v = read_values(file, problem, dims, coeffs, lenient);
  Einsum e;
  e.name = name;
  e.op = OpKind::Mac;
  for (const auto& dn : dims) e.ranks.push_back({dn, v.count(dn) ? v[dn] : 1});
  // Timeloop v0.4's processed input spells the keys with underscores (data_spaces, read_write).
  const YAML::Node ds = shape["data-spaces"] ? shape["data-spaces"] : shape["data_spaces"];
  if (!ds || !ds.IsSequence()) throw InputError(loc(file, shape), "problem.shape.data-spaces", "missing or not a list");
  for (const auto& space : ds) {
    TensorAccess t;
    t.name = space["name"].Scalar();
    const YAML::Node rw = space["read-write"] ? space["read-write"] : space["read_write"];
    const bool out = rw && rw.as<bool>(false);
    std::string lower = t.name;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    t.role = out ? TensorRole::Output : lower.find("weight") != std::string::npos ? TensorRole::Weight
                                                                                   : TensorRole::Input;
    const std::string key = "problem.shape.data-spaces." + t.name + ".projection";
    const YAML::Node proj = space["projection"];
    if (!proj || !proj.IsSequence()) throw InputError(loc(file, space), key, "missing or not a list");
    for (const auto& dim : proj) {
      Projection p;
      for (const auto& term : dim) {
        if (!term.IsSequence() || term.size() < 1 || term.size() > 2)
          throw InputError(loc(file, term), key, "expected a term [rank] or [rank, coefficient]");
        const std::string rn = term[0].Scalar();
        const int r = e.rank_index(rn);
        if (r < 0) throw InputError(loc(file, term), key, "unknown rank '" + rn + "'" + did_you_mean(rn, dims));
        int64_t c = 1;
        if (term.size() == 2) {
          const std::string cn = term[1].Scalar();
          if (!coeff_default.count(cn))
            throw InputError(loc(file, term), key, "unknown coefficient '" + cn + "'" + did_you_mean(cn, coeffs));
          c = v.count(cn) ? v[cn] : coeff_default[cn];
        }
        p.push_back({r, c});
      }
      t.dims.push_back(std::move(p));
    }
    e.tensors.push_back(std::move(t));
  }
  // Outputs last, as elsewhere.
  std::stable_partition(e.tensors.begin(), e.tensors.end(),
                        [](const TensorAccess& t) { return t.role != TensorRole::Output; });
  return e;
}

std::string config_str(const Einsum& e) {
  std::string s;
  auto get = [&](const char* n) -> int64_t {
    const int r = e.rank_index(n);
    return r < 0 ? 1 : e.ranks[r].size;
  };
  for (const char* n : {"R", "S", "P", "Q", "C", "K", "N"}) s += std::to_string(get(n)) + "_";
  return s;  // strides and dilations appended by the caller
}

}  // namespace

Einsum import_timeloop_problem(const std::string& path) { return import_timeloop_problem(path, false); }

Einsum import_timeloop_problem(const std::string& path, bool lenient) {
  const YAML::Node root = load_yaml(path);
  if (!root.IsMap() || !root["problem"])
    throw InputError(loc(path, root), "problem", "missing; expected a Timeloop problem with a 'problem' map");
  const YAML::Node problem = root["problem"];
  if (!problem.IsMap()) throw InputError(loc(path, problem), "problem", "expected a map");
  const std::string name = fs::path(path).stem().string();
  const YAML::Node shape = problem["shape"];
  Einsum e;
  try {
    if (shape && shape.IsMap()) {
      e = custom_shape(path, name, problem, shape, lenient);
    } else {
      const std::string sname = shape ? shape.Scalar() : "cnn-layer";
      if (sname != "cnn-layer" && sname != "dw-cnn-layer")
        throw InputError(loc(path, shape), "problem.shape",
                         "unsupported shape '" + sname + "'" + did_you_mean(sname, {"cnn-layer", "dw-cnn-layer"}) +
                             "; expected cnn-layer, dw-cnn-layer or a shape map");
      const bool dw = sname == "dw-cnn-layer";
      std::vector<std::string> dims = {"R", "S", "P", "Q", "C", "N"};
      if (!dw) dims.insert(dims.begin() + 5, "K");
      auto v = read_values(path, problem, dims, {"Wstride", "Hstride", "Wdilation", "Hdilation"}, lenient);
      auto get = [&](const char* k) { return v.count(k) ? v[k] : 1; };
      ConvShape s;
      s.R = get("R"), s.S = get("S"), s.P = get("P"), s.Q = get("Q"), s.C = get("C"), s.K = get("K");
      s.N = get("N"), s.Wstride = get("Wstride"), s.Hstride = get("Hstride");
      s.Wdilation = get("Wdilation"), s.Hdilation = get("Hdilation");
      e = dw ? make_depthwise_conv(name, s, "Inputs", "Weights", "Outputs") : make_conv(name, s);
    }
    drop_zero_terms(e);
    validate(e);
  } catch (const InputError& err) {
    if (!err.where().file.empty()) throw;
    throw InputError({path, 0, 0}, err.key(), err.message());
  } catch (const YAML::Exception& err) {
    // A node of another kind than the reader expects (a scalar where a map should be, ...): yaml-cpp
    // throws from the access itself, so one catch covers every access above (found by fuzz_timeloop_yaml).
    const bool known = !err.mark.is_null();
    throw InputError({path, known ? err.mark.line + 1 : 0, known ? err.mark.column + 1 : 0}, "problem",
                     "malformed Timeloop problem (" + err.msg + "); expected the layout of docs/workloads.md");
  }
  return e;
}

Workload import_timeloop_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError({dir, 0, 0}, {}, "is not a directory");
  const fs::path d(dir);
  auto read_list = [&](const std::string& file) {
    const std::string p = (d / file).string();
    const YAML::Node n = load_yaml(p);
    if (!n.IsSequence()) throw InputError(loc(p, n), {}, "expected a list of layer names");
    std::vector<std::string> v;
    for (const auto& x : n) v.push_back(x.Scalar());
    return v;
  };
  const bool has_unique = fs::exists(d / "unique_layers.yaml"), has_layers = fs::exists(d / "layers.yaml"),
             has_counts = fs::exists(d / "layer_count.yaml");
  std::vector<std::string> names;
  if (has_unique && has_counts) names = read_list("unique_layers.yaml");
  else if (has_layers) names = read_list("layers.yaml");
  else if (has_unique) names = read_list("unique_layers.yaml");
  else {
    for (const auto& f : fs::directory_iterator(d))
      if (f.path().extension() == ".yaml" || f.path().extension() == ".yml") names.push_back(f.path().stem().string());
    std::sort(names.begin(), names.end());
  }
  if (names.empty()) throw InputError({dir, 0, 0}, {}, "contains no Timeloop problem files");

  // Counts by layer name and by configuration key.
  std::map<std::string, int64_t> by_name, by_key;
  if (has_unique && has_counts) {
    const std::string p = (d / "layer_count.yaml").string();
    const YAML::Node n = load_yaml(p);
    if (!n.IsMap()) throw InputError(loc(p, n), {}, "expected a map from layer key to count");
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      if (kv.second.IsMap()) {
        if (!kv.second["count"]) throw InputError(loc(p, kv.second), key + ".count", "missing required key");
        const int64_t c = get_int(p, kv.second["count"], key + ".count");
        if (c <= 0) throw InputError(loc(p, kv.second["count"]), key + ".count", "count must be >= 1");
        by_key[key] = c;
        if (kv.second["name"]) by_name[kv.second["name"].Scalar()] = c;
      } else {
        const int64_t c = get_int(p, kv.second, key);
        if (c <= 0) throw InputError(loc(p, kv.second), key, "count must be >= 1");
        by_key[key] = c;
      }
    }
  }
  Workload w;
  w.name = d.filename().empty() ? d.parent_path().filename().string() : d.filename().string();
  std::map<std::string, int> seen;
  for (const auto& n : names) {
    Einsum e = import_timeloop_problem((d / (n + ".yaml")).string());
    if (int k = ++seen[n]; k > 1) e.name = n + "#" + std::to_string(k);
    else e.name = n;
    for (auto& t : e.tensors) t.name = e.name + "." + t.name;
    int64_t count = 1;
    if (by_name.count(n)) count = by_name[n];
    else if (!by_key.empty()) {
      // Key R_S_P_Q_C_K_N_Wstride_Hstride_Wdilation_Hdilation.
      const YAML::Node pr = load_yaml((d / (n + ".yaml")).string())["problem"];
      const YAML::Node src = pr["instance"] ? pr["instance"] : pr;
      std::string key = config_str(e);
      for (const char* c : {"Wstride", "Hstride", "Wdilation", "Hdilation"})
        key += std::to_string(src[c] ? src[c].as<int64_t>() : 1) + (std::string(c) == "Hdilation" ? "" : "_");
      if (by_key.count(key)) count = by_key[key];
    }
    w.einsums.push_back(std::move(e));
    w.counts.push_back(count);
  }
  try {
    finalize(w);
  } catch (const InputError& err) {
    throw InputError({dir, 0, 0}, err.key(), err.message());
  }
  return w;
}

}  // namespace mapfuse
