#include "engine/validation/dosa_dataset.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"

namespace mapfuse {

Core dosa_gemmini_core(int64_t pe_dim, int64_t acc_entries, int64_t sp_entries, double acc_kb,
                       double sp_kb, double acc_bandwidth, double sp_bandwidth, int sp_block) {
  Core c;
  c.name = "dosa_gemmini";
  c.compute = {"MACC", 0.5608, 1e9, 1};
  Level dram{.name = "DRAM", .word_bits = 8, .block_size = 64, .shared_bandwidth = 8, .read_pj = 100,
             .write_pj = 100, .update_pj = 100, .may_keep = kAllRoles};
  Level sp{.name = "Scratchpad", .entries = sp_entries, .word_bits = 8, .block_size = sp_block,
           .shared_bandwidth = sp_bandwidth, .may_keep = role_bit(TensorRole::Weight) | role_bit(TensorRole::Input)};
  sp.read_pj = sp.write_pj = sp.update_pj = 0.49 + 0.02513 * sp_kb;
  sp.fanout.x = pe_dim;
  sp.fanout.x_reuse = role_bit(TensorRole::Input);
  Level acc{.name = "Accumulator", .entries = acc_entries, .word_bits = 32,
            .shared_bandwidth = acc_bandwidth, .may_keep = role_bit(TensorRole::Output)};
  acc.read_pj = acc.write_pj = acc.update_pj = 1.94 + 0.1005 * acc_kb / static_cast<double>(pe_dim);
  acc.fanout.y = pe_dim;
  acc.fanout.y_reuse = role_bit(TensorRole::Output);
  Level reg{.name = "Registers", .entries = 1, .word_bits = 8, .read_pj = 0.48746172,
            .write_pj = 0.48746172, .update_pj = 0.48746172, .may_keep = role_bit(TensorRole::Weight)};
  c.levels = {reg, acc, sp, dram};
  c.legacy_output_fills = true;  // the dataset was made with a 2022 Timeloop
  finalize(c, "dosa_gemmini");
  return c;
}

DosaDataset load_dosa_dataset(const std::string& path) {
  CsvTable t = read_csv(path);
  DosaDataset d;
  d.source = path;
  const int c_cycle = t.column("target.cycle"), c_energy = t.column("target.energy"),
            c_map = t.column("mapping.mapping"), c_mesh = t.column("arch.meshX"),
            c_acc_entries = t.column("arch.mem1_entries"), c_acc_depth = t.column("arch.mem1_depth"),
            c_acc_width = t.column("arch.mem1_width"), c_acc_inst = t.column("arch.mem1_instances"),
            c_acc_bw = t.column("arch.mem1_shared_bandwidth"),
            c_sp_entries = t.column("arch.mem2_entries"), c_sp_depth = t.column("arch.mem2_depth"),
            c_sp_width = t.column("arch.mem2_width"), c_sp_inst = t.column("arch.mem2_instances"),
            c_sp_bw = t.column("arch.mem2_shared_bandwidth"), c_shape = t.column("prob.shape");
  const char* prob_cols[] = {"prob.R", "prob.S", "prob.P", "prob.Q", "prob.C", "prob.K", "prob.N",
                             "prob.Wstride", "prob.Hstride", "prob.Wdilation", "prob.Hdilation"};
  int c_prob[11];
  for (int i = 0; i < 11; ++i) c_prob[i] = t.column(prob_cols[i]);

  std::map<std::vector<int64_t>, int> layer_index, core_index;
  auto num = [&](const std::vector<std::string>& row, int col, size_t r) -> double {
    try {
      size_t used = 0;
      double v = std::stod(row[col], &used);
      if (used != row[col].size()) throw std::invalid_argument("trailing");
      return v;
    } catch (const std::exception&) {
      throw InputError({t.source, static_cast<int>(r + 2), 0}, t.header[col],
                       "'" + row[col] + "' is not a number");
    }
  };
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    if (row[c_shape] != "cnn-layer")
      throw InputError({t.source, static_cast<int>(r + 2), 0}, "prob.shape",
                       "'" + row[c_shape] + "' is not supported; expected cnn-layer");
    std::vector<int64_t> lk;
    for (int i = 0; i < 11; ++i) lk.push_back(static_cast<int64_t>(num(row, c_prob[i], r)));
    auto [lit, lnew] = layer_index.emplace(lk, static_cast<int>(d.layers.size()));
    if (lnew) {
      ConvShape s{.N = lk[6], .K = lk[5], .C = lk[4], .P = lk[2], .Q = lk[3], .R = lk[0], .S = lk[1],
                  .Wstride = lk[7], .Hstride = lk[8], .Wdilation = lk[9], .Hdilation = lk[10]};
      d.layers.push_back(make_conv("layer" + std::to_string(d.layers.size()), s));
      validate(d.layers.back(), t.source + " row " + std::to_string(r + 2));
    }
    const int64_t pe = static_cast<int64_t>(num(row, c_mesh, r));
    const double acc_bits = num(row, c_acc_depth, r) * num(row, c_acc_width, r) * num(row, c_acc_inst, r);
    const double sp_bits = num(row, c_sp_depth, r) * num(row, c_sp_width, r) * num(row, c_sp_inst, r);
    // DOSA's feature extraction rounds the capacities up to whole KB before applying its fits.
    const double acc_kb = std::ceil(acc_bits / 8 / 1024), sp_kb = std::ceil(sp_bits / 8 / 1024);
    std::vector<int64_t> ck{pe, static_cast<int64_t>(num(row, c_acc_entries, r)),
                            static_cast<int64_t>(num(row, c_sp_entries, r)),
                            static_cast<int64_t>(acc_kb), static_cast<int64_t>(sp_kb),
                            static_cast<int64_t>(num(row, c_acc_bw, r)),
                            static_cast<int64_t>(num(row, c_sp_bw, r)),
                            static_cast<int64_t>(num(row, c_sp_width, r)) / 8};
    auto [cit, cnew] = core_index.emplace(ck, static_cast<int>(d.cores.size()));
    if (cnew)
      d.cores.push_back(dosa_gemmini_core(ck[0], ck[1], ck[2], acc_kb, sp_kb,
                                          static_cast<double>(ck[5]), static_cast<double>(ck[6]),
                                          static_cast<int>(ck[7])));
    d.rows.push_back({lit->second, cit->second, row[c_map], num(row, c_energy, r) * 1e6,
                      num(row, c_cycle, r), r});
  }
  return d;
}

ErrorStats error_stats(std::vector<double> e) {
  ErrorStats s;
  s.n = e.size();
  if (e.empty()) return s;
  for (double& x : e) x = std::fabs(x);
  std::sort(e.begin(), e.end());
  auto pct = [&](double q) {  // linear interpolation between closest ranks (numpy's default)
    const double pos = q * static_cast<double>(e.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, e.size() - 1);
    return e[lo] + (e[hi] - e[lo]) * (pos - static_cast<double>(lo));
  };
  s.median = pct(0.5);
  s.p99 = pct(0.99);
  s.max = e.back();
  return s;
}

DosaValidation validate_dosa(const DosaDataset& d, std::span<const size_t> rows) {
  std::vector<size_t> all;
  if (rows.empty()) {
    all.resize(d.rows.size());
    std::iota(all.begin(), all.end(), size_t{0});
    rows = all;
  }
  // Plans are compiled once per (layer, core) pair actually used.
  std::map<std::pair<int, int>, EvalPlan> plans;
  for (size_t i : rows) {
    const auto& r = d.rows.at(i);
    auto key = std::make_pair(r.layer, r.core);
    if (!plans.count(key)) plans.emplace(key, compile_plan(d.layers[r.layer], d.cores[r.core]));
  }
  const size_t n = rows.size();
  std::vector<double> e_err(n, NAN), c_err(n, NAN);
#pragma omp parallel for schedule(dynamic, 256)
  for (size_t k = 0; k < n; ++k) {
    const auto& r = d.rows[rows[k]];
    try {
      const Mapping m = parse_dosa_mapping(r.mapping, d.layers[r.layer], d.cores[r.core]);
      CostResult res = evaluate(plans.at({r.layer, r.core}), flatten(m));
      if (!res.valid()) continue;
      e_err[k] = 100.0 * (res.energy_pj - r.energy_pj) / r.energy_pj;
      c_err[k] = 100.0 * (res.cycles - r.cycles) / r.cycles;
    } catch (const InputError&) {
    }
  }
  DosaValidation v;
  std::vector<std::pair<double, size_t>> worst;
  for (size_t k = 0; k < n; ++k) {
    if (std::isnan(e_err[k])) {
      ++v.failed;
      continue;
    }
    v.energy_error.push_back(e_err[k]);
    v.cycle_error.push_back(c_err[k]);
    worst.emplace_back(std::fabs(e_err[k]), rows[k]);
  }
  std::partial_sort(worst.begin(), worst.begin() + std::min<size_t>(10, worst.size()), worst.end(),
                    std::greater<>());
  for (size_t i = 0; i < std::min<size_t>(10, worst.size()); ++i)
    v.worst_energy_rows.push_back(worst[i].second);
  v.energy = error_stats(v.energy_error);
  v.cycles = error_stats(v.cycle_error);
  return v;
}

std::vector<size_t> sample_rows(size_t total, size_t n, uint64_t seed) {
  n = std::min(n, total);
  std::vector<size_t> idx(total);
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    // Modulo bias is irrelevant here; what matters is the same sample on every platform, which
    // std::uniform_int_distribution does not guarantee.
    const size_t j = i + static_cast<size_t>(rng() % (total - i));
    std::swap(idx[i], idx[j]);
  }
  idx.resize(n);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace mapfuse
