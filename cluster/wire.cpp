#include "cluster/wire.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace mapfuse {

namespace {
void put_u64(std::string& out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}
void put_str(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out.append(s);
}
struct Reader {
  const std::string& in;
  std::size_t pos = 0;
  uint64_t u64() {
    if (in.size() - pos < 8) throw std::runtime_error("encoded work unit is truncated");
    uint64_t v;
    std::memcpy(&v, in.data() + pos, 8);
    pos += 8;
    return v;
  }
  std::string str() {
    const uint64_t len = u64();
    if (len > in.size() - pos) throw std::runtime_error("encoded work unit has a field longer than the message");
    std::string s = in.substr(pos, len);
    pos += len;
    return s;
  }
};
}  // namespace

std::string encode_unit(const WorkUnit& unit) {
  std::string out;
  out.reserve(48 + unit.id.size() + unit.kind.size() + unit.label.size() + unit.payload.size());
  put_str(out, unit.id);
  put_str(out, unit.kind);
  put_str(out, unit.label);
  uint64_t bits;
  std::memcpy(&bits, &unit.cost_hint, 8);
  put_u64(out, bits);
  put_str(out, unit.payload);
  return out;
}

WorkUnit decode_unit(const std::string& bytes) {
  Reader r{bytes};
  WorkUnit u;
  u.id = r.str();
  u.kind = r.str();
  u.label = r.str();
  const uint64_t bits = r.u64();
  std::memcpy(&u.cost_hint, &bits, 8);
  u.payload = r.str();
  if (r.pos != bytes.size()) throw std::runtime_error("encoded work unit has trailing bytes");
  return u;
}

}  // namespace mapfuse
