#include "engine/cost/coala_links.hpp"

#include <iterator>
#include <limits>

namespace mapfuse::coala {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

LinkCalendar::LinkCalendar(double bandwidth, std::pmr::memory_resource* mem) : bandwidth_(bandwidth), used_from_(mem) {
  used_from_.emplace(-kInf, 0.0);
}

double LinkCalendar::earliest(double from, double duration, double need) const {
  // A zero-length request fits at its search start, whatever the load (as in Stream).
  if (duration <= 0) return from;
  auto it = std::prev(used_from_.upper_bound(from));
  double start = from;
  for (;;) {
    auto next = std::next(it);
    const double seg_end = next == used_from_.end() ? kInf : next->first;
    if (it->second + need > bandwidth_) {
      start = seg_end;  // a window can only open where this overloaded step ends
    } else if (seg_end - start >= duration) {
      return start;
    }
    if (next == used_from_.end()) return start;  // overloaded forever: Stream returns the last step
    it = next;
  }
}

void LinkCalendar::reserve(double start, double end, double bw) {
  if (!(end > start) || bw == 0) return;
  auto split = [&](double t) {
    auto it = used_from_.lower_bound(t);
    if (it != used_from_.end() && it->first == t) return it;
    const double level = std::prev(it)->second;
    return used_from_.emplace_hint(it, t, level);
  };
  auto first = split(start);
  auto last = split(end);
  for (auto it = first; it != last; ++it) it->second += bw;
}

double earliest_on_all(std::span<const std::pair<const LinkCalendar*, double>> links, double from, double duration) {
  double t = from;
  for (;;) {
    bool moved = false;
    for (const auto& [cal, need] : links) {
      const double s = cal->earliest(t, duration, need);
      if (s != t) {
        t = s;
        moved = true;
      }
    }
    if (!moved) return t;
  }
}

}  // namespace mapfuse::coala
