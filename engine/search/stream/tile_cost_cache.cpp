#include "engine/search/stream/tile_cost_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "engine/common/atomic_file.hpp"
#include "engine/common/error.hpp"
#include "engine/common/hash.hpp"
#include "engine/validation/model_fingerprint.hpp"

namespace mapfuse {
namespace {

constexpr std::string_view kMagic = "mapfuse-tile-cost-cache";

void put(std::string& k, int64_t v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  k.append(b, sizeof v);
}
void put(std::string& k, double v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  k.append(b, sizeof v);
}
// Length-prefixed, so that no two sequences of strings give the same bytes.
void put(std::string& k, std::string_view s) {
  put(k, static_cast<int64_t>(s.size()));
  k.append(s);
}
void put(std::string& k, const std::vector<std::string>& names) {
  put(k, static_cast<int64_t>(names.size()));
  for (const std::string& n : names) put(k, std::string_view(n));
}
void put(std::string& k, const std::vector<double>& v) {
  put(k, static_cast<int64_t>(v.size()));
  for (double x : v) put(k, x);
}

void put_level(std::string& k, const Level& l) {
  put(k, std::string_view(l.name));  // in mapping texts: the mapper's tie-break
  put(k, l.entries);
  put(k, int64_t{l.word_bits});
  put(k, int64_t{l.block_size});
  put(k, int64_t{l.multiple_buffering});
  for (double v : {l.read_bandwidth, l.write_bandwidth, l.shared_bandwidth, l.read_pj, l.write_pj, l.update_pj}) put(k, v);
  put(k, static_cast<int64_t>(l.fit.has_value()));
  if (l.fit) put(k, l.fit->base_pj), put(k, l.fit->per_kb_pj);
  put(k, static_cast<int64_t>(l.mlp.has_value()));
  if (l.mlp) {
    put(k, l.mlp->capacity_kb);
    put(k, l.mlp->energy_pj);
    put(k, l.mlp->params);
    for (double v : {l.mlp->x_mean, l.mlp->x_scale, l.mlp->y_mean, l.mlp->y_scale}) put(k, v);
  }
  put(k, int64_t{l.may_keep});
  put(k, int64_t{l.must_keep});
  put(k, static_cast<int64_t>(l.backs_intermediates));
  const Fanout& f = l.fanout;
  put(k, f.x);
  put(k, f.y);
  put(k, f.x_ranks);
  put(k, f.y_ranks);
  for (RoleMask m : {f.x_reuse, f.y_reuse, f.x_multicast, f.y_multicast}) put(k, int64_t{m});
  put(k, f.x_min_usage);
  put(k, f.y_min_usage);
  put(k, l.instances);
}

std::string hex(std::string_view bytes) {
  static constexpr char d[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += d[c >> 4], out += d[c & 15];
  return out;
}

bool unhex(std::string_view s, std::string& out) {
  if (s.size() % 2) return false;
  out.clear();
  out.reserve(s.size() / 2);
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  for (size_t i = 0; i < s.size(); i += 2) {
    const int a = v(s[i]), b = v(s[i + 1]);
    if (a < 0 || b < 0) return false;
    out += static_cast<char>(a << 4 | b);
  }
  return true;
}

// Shortest text that reads back to the same double (bit-identical costs after a round trip).
void put_number(std::string& line, double v) {
  char b[32];
  const auto r = std::to_chars(b, b + sizeof b, v);
  line.append(b, r.ptr);
}

// <hex key> <latency> <on-chip pJ> <off-chip pJ> <operands> <per operand: - (on chip) or its DRAM
// bits per cycle> <FNV-1a of everything before it, 16 hex digits>
std::string entry_line(const std::string& key, const TileCost& c) {
  std::string line = hex(key);
  for (double v : {c.latency_cc, c.onchip_energy_pj, c.offchip_energy_pj}) line += ' ', put_number(line, v);
  line += ' ' + std::to_string(c.operands.size());
  for (const OperandCost& o : c.operands) {
    line += ' ';
    if (o.offchip) put_number(line, o.dram_bits_per_cycle);
    else line += '-';
  }
  line += fmt::format(" {:016x}\n", fnv1a(line));
  return line;
}

std::vector<std::string_view> fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t j = s.find(' ', i);
    out.push_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

bool number(std::string_view s, double& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

// One entry line (without its newline) into key and cost; "" or the reason it is malformed.
std::string parse_entry(std::string_view line, std::string& key, TileCost& c) {
  const size_t last = line.rfind(' ');
  if (last == std::string_view::npos) return "expected an entry: key, costs and a checksum";
  uint64_t sum = 0;
  const std::string_view s = line.substr(last + 1);
  const auto r = std::from_chars(s.data(), s.data() + s.size(), sum, 16);
  if (s.size() != 16 || r.ec != std::errc() || r.ptr != s.data() + s.size())
    return "the last field is not a 16-digit checksum";
  // The checksum covers the line before the space that precedes it.
  if (fnv1a(line.substr(0, last)) != sum) return "checksum mismatch (the line was altered or cut)";
  const auto f = fields(line.substr(0, last));
  if (f.size() < 5) return "too few fields";
  if (!unhex(f[0], key) || key.empty()) return "the key is not hexadecimal";
  if (!number(f[1], c.latency_cc) || !number(f[2], c.onchip_energy_pj) || !number(f[3], c.offchip_energy_pj))
    return "a cost is not a number";
  size_t n = 0;
  const auto rn = std::from_chars(f[4].data(), f[4].data() + f[4].size(), n);
  if (rn.ec != std::errc() || rn.ptr != f[4].data() + f[4].size() || f.size() != 5 + n)
    return "the operand count does not match the fields";
  c.operands.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    if (f[5 + i] == "-") continue;
    c.operands[i].offchip = true;
    if (!number(f[5 + i], c.operands[i].dram_bits_per_cycle)) return "an operand's DRAM bandwidth is not a number";
  }
  return {};
}

}  // namespace

std::string core_fingerprint(const Core& c) {
  std::string k;
  k.reserve(1024);
  put(k, int64_t{c.runs});
  put(k, static_cast<int64_t>(c.legacy_output_fills));
  put(k, std::string_view(c.compute.name));
  put(k, c.compute.energy_pj);
  put(k, c.compute.frequency_hz);
  put(k, c.compute.instances);
  put(k, static_cast<int64_t>(c.levels.size()));
  for (const Level& l : c.levels) put_level(k, l);
  put(k, static_cast<int64_t>(c.vector.has_value()));
  if (c.vector) {
    put(k, std::string_view(c.vector->name));
    put(k, int64_t{c.vector->level});
    put(k, c.vector->lanes);
    put(k, c.vector->energy_pj);
  }
  // The vector view is made from the rest by finalize, but a core built by hand may carry another.
  put(k, static_cast<int64_t>(c.vector_core != nullptr));
  if (c.vector_core) put(k, std::string_view(core_fingerprint(*c.vector_core)));
  return k;
}

std::optional<TileCost> TileCostCache::find(const std::string& key) const {
  std::shared_lock lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool TileCostCache::insert(const std::string& key, const TileCost& cost) {
  std::unique_lock lock(mutex_);
  TileCost stored = cost;
  for (OperandCost& o : stored.operands) o.memory_bits = 0;  // per CT (its boxes), not per problem
  const bool fresh = entries_.try_emplace(key, std::move(stored)).second;
  if (fresh) fresh_.push_back(key);
  return fresh;
}

size_t TileCostCache::size() const {
  std::shared_lock lock(mutex_);
  return entries_.size();
}

std::string TileCostCache::take_fresh() {
  std::unique_lock lock(mutex_);
  std::string out;
  for (const std::string& k : fresh_) out += entry_line(k, entries_.at(k));
  fresh_.clear();
  return out;
}

void TileCostCache::add_lines(const std::string& text, const std::string& file, int first_line, size_t first_offset) {
  std::unique_lock lock(mutex_);
  size_t pos = 0;
  int line_no = first_line;
  std::string key;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos)
      throw InputError({file, line_no, 0}, "tile-cost cache",
                       "the last line is cut short (no newline): the file is corrupt; delete it to start a new cache");
    TileCost c;
    const std::string why = parse_entry(std::string_view(text).substr(pos, nl - pos), key, c);
    if (!why.empty())
      throw InputError({file, line_no, 0}, "tile-cost cache",
                       why + " (byte offset " + std::to_string(first_offset + pos) + "); delete the file to start a new cache");
    entries_.try_emplace(key, std::move(c));
    pos = nl + 1;
    ++line_no;
  }
}

std::string TileCostCache::to_text() const {
  std::shared_lock lock(mutex_);
  std::vector<const std::pair<const std::string, TileCost>*> sorted;
  sorted.reserve(entries_.size());
  for (const auto& e : entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::string out = tile_cost_cache_header() + "\n";
  for (const auto* e : sorted) out += entry_line(e->first, e->second);
  return out;
}

std::string tile_cost_cache_header() {
  return fmt::format("{} format={} mapper={} model={}", kMagic, kTileCostCacheFormat, kTileCostMapperVersion,
                     model_fingerprint());
}

CacheLoadResult load_tile_cost_cache(const std::string& path, TileCostCache& cache) {
  CacheLoadResult r;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return r;
    throw InputError({path, 0, 0}, "tile-cost cache", std::string("cannot read: ") + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t nl = text.find('\n');
  const std::string header = text.substr(0, nl);
  if (header.rfind(std::string(kMagic) + " ", 0) != 0 || nl == std::string::npos)
    throw InputError({path, 1, 0}, "tile-cost cache",
                     fmt::format("not a tile-cost cache (expected a first line '{} format=...'); "
                                 "pass another file or delete it",
                                 kMagic));
  const std::string mine = tile_cost_cache_header();
  if (header != mine) {
    r.status = CacheLoad::Stale;
    r.message = fmt::format("{}: written by another format, mapper or cost model ('{}', this build writes '{}'): "
                            "not used, and replaced by this run's entries",
                            path, header.substr(kMagic.size() + 1), mine.substr(kMagic.size() + 1));
    return r;
  }
  const size_t before = cache.size();
  cache.add_lines(text.substr(nl + 1), path, 2, nl + 1);
  r.status = CacheLoad::Loaded;
  r.entries = cache.size() - before;
  return r;
}

void save_tile_cost_cache(const std::string& path, const TileCostCache& cache) {
  try {
    write_file_atomically(path, cache.to_text());
  } catch (const std::runtime_error& e) {
    throw InputError({path, 0, 0}, "tile-cost cache", e.what());
  }
}

}  // namespace mapfuse
