#include "engine/search/get/gnn/model_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <sstream>

#include "engine/common/error.hpp"
#include "engine/search/get/gnn/features.hpp"

namespace mapfuse::get::gnn {

namespace {

constexpr std::string_view kMagic[] = {"mapfuse-gnn 1", "mapfuse-pg 1", "mapfuse-rg 1"};
static_assert(std::endian::native == std::endian::little, "model files store little-endian float32");

uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace

std::string_view to_string(ModelKind k) {
  static constexpr std::string_view names[] = {"GNN classifier", "PGExplainer", "RG-Explainer"};
  return names[static_cast<size_t>(k)];
}

std::string weights_fingerprint(std::span<const float> weights) {
  return hex(fnv1a(std::string_view(reinterpret_cast<const char*>(weights.data()), weights.size_bytes())));
}

std::string serialize(const ModelFile& m) {
  std::string data;
  for (const NamedTensor& t : m.tensors)
    data.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  std::string out = fmt::format("{}\nscheme {}\nlayers {}\nhidden {}\nfeatures {}\n", kMagic[static_cast<size_t>(m.kind)],
                                to_string(m.scheme), m.layers, m.hidden, m.layout);
  if (m.kind != ModelKind::Classifier) out += "classifier " + m.classifier + "\n";
  out += fmt::format("tensors {}\n", m.tensors.size());
  for (const NamedTensor& t : m.tensors) {
    out += "tensor " + t.name + " ";
    for (size_t i = 0; i < t.dims.size(); ++i) out += (i ? "x" : "") + std::to_string(t.dims[i]);
    out += "\n";
  }
  out += "checksum " + hex(fnv1a(data)) + "\ndata\n";
  return out + data;
}

ModelFile parse_model_file(std::string_view bytes, const std::string& source, FusionScheme expected, ModelKind kind) {
  size_t pos = 0;
  int line_no = 0;
  auto fail = [&](const std::string& what) -> InputError { return InputError({source, line_no, 0}, "", what); };
  // Header lines "key value"; the value may hold spaces only for `tensor`.
  auto next = [&](std::string_view key) {
    const size_t end = bytes.find('\n', pos);
    ++line_no;
    if (end == std::string_view::npos || end - pos > 100000)
      throw fail(fmt::format("truncated header: expected a '{}' line", key));
    const std::string_view line = bytes.substr(pos, end - pos);
    pos = end + 1;
    if (line.substr(0, key.size()) != key || (line.size() > key.size() && line[key.size()] != ' '))
      throw fail(fmt::format("expected '{}', found '{}'", key, std::string(line.substr(0, 60))));
    return std::string(line.size() > key.size() ? line.substr(key.size() + 1) : std::string_view{});
  };
  auto number = [&](std::string_view key) {
    const std::string v = next(key);
    try {
      size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used != v.size() || n < 0 || n > (1ll << 40)) throw std::invalid_argument(v);
      return static_cast<int64_t>(n);
    } catch (const std::exception&) {
      throw fail(fmt::format("'{}' expects a non-negative integer, found '{}'", key, v));
    }
  };
  {
    const size_t end = bytes.find('\n');
    ++line_no;
    const std::string_view want = kMagic[static_cast<size_t>(kind)];
    const std::string_view first = end == std::string_view::npos ? std::string_view{} : bytes.substr(0, end);
    for (size_t k = 0; k < std::size(kMagic); ++k)
      if (first == kMagic[k] && first != want)
        throw fail(fmt::format("this is a {} model ('{}'); expected a {} model (first line '{}')",
                               to_string(static_cast<ModelKind>(k)), first, to_string(kind), want));
    if (first != want)
      throw fail(fmt::format("not a mapfuse {} model file: expected the first line '{}'",
                             kind == ModelKind::Classifier ? "GNN" : to_string(kind), want));
    pos = end + 1;
  }
  ModelFile m;
  m.kind = kind;
  const std::string scheme = next("scheme");
  try {
    m.scheme = fusion_scheme_from_string(scheme);
  } catch (const InputError&) {
    throw fail("unknown scheme '" + scheme + "'; expected lbdf or brr");
  }
  if (m.scheme != expected)
    throw fail(fmt::format("the model was trained for the {} scheme; this run needs a {} model", scheme,
                           to_string(expected)));
  m.layers = static_cast<int>(number("layers"));
  m.hidden = static_cast<int>(number("hidden"));
  m.layout = next("features");
  if (m.layout != feature_layout())
    throw fail(fmt::format("the model's feature layout ({} features: '{}') differs from this build's ({} features: "
                           "'{}'); retrain it with `mapfuse get-train`",
                           std::count(m.layout.begin(), m.layout.end(), ','), m.layout.substr(0, 80),
                           feature_count(), feature_layout().substr(0, 80)));
  if (kind != ModelKind::Classifier) m.classifier = next("classifier");
  const int64_t count = number("tensors");
  if (count > 1000) throw fail("more than 1000 tensors");
  int64_t floats = 0;
  for (int64_t i = 0; i < count; ++i) {
    const std::string v = next("tensor");
    const size_t sp = v.find(' ');
    if (sp == std::string::npos) throw fail("expected 'tensor <name> <d0>x<d1>...'");
    NamedTensor t;
    t.name = v.substr(0, sp);
    std::istringstream dims(v.substr(sp + 1));
    std::string d;
    int64_t size = 1;
    while (std::getline(dims, d, 'x')) {
      if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos || d.size() > 9)
        throw fail("bad tensor size '" + v.substr(sp + 1) + "'");
      t.dims.push_back(std::stoll(d));
      size *= t.dims.back();
    }
    if (t.dims.empty()) throw fail("tensor '" + t.name + "' has no size");
    t.data.resize(size);
    floats += size;
    m.tensors.push_back(std::move(t));
  }
  const std::string checksum = next("checksum");
  next("data");
  const std::string_view data = bytes.substr(pos);
  if (static_cast<int64_t>(data.size()) != floats * 4)
    throw InputError({source, 0, 0}, "",
                     fmt::format("truncated or padded weights: the header lists {} floats ({} bytes), the file holds "
                                 "{} bytes after it",
                                 floats, floats * 4, data.size()));
  if (checksum != hex(fnv1a(data)))
    throw InputError({source, 0, 0}, "", "the weights fail their checksum: the file is corrupt");
  size_t off = 0;
  for (NamedTensor& t : m.tensors) {
    std::memcpy(t.data.data(), data.data() + off, t.data.size() * sizeof(float));
    off += t.data.size() * sizeof(float);
  }
  return m;
}

}  // namespace mapfuse::get::gnn
