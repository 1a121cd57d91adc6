#include "engine/cost/coala_memory.hpp"

#include <algorithm>

namespace mapfuse::coala {

size_t MemoryTimeline::first_after(double t) const {
  return size_t(std::upper_bound(steps_.begin(), steps_.end(), t, [](double v, const Step& s) { return v < s.t; }) -
                steps_.begin());
}

double MemoryTimeline::add(double t, double bits) {
  auto it = std::lower_bound(steps_.begin(), steps_.end(), t, [](const Step& s, double v) { return s.t < v; });
  size_t i = size_t(it - steps_.begin());
  if (it == steps_.end() || it->t != t) {
    const double before = i == 0 ? 0.0 : steps_[i - 1].usage;
    steps_.insert(it, Step{t, before});
  }
  double peak = 0;
  for (size_t k = i; k < steps_.size(); ++k) {
    steps_[k].usage += bits;
    peak = std::max(peak, steps_[k].usage);
  }
  return peak;
}

double MemoryTimeline::usage_at(double t) const {
  const size_t i = first_after(t);
  return steps_[i == 0 ? 0 : i - 1].usage;
}

double MemoryTimeline::earliest_fit(double t, double bits, double capacity) const {
  for (;;) {
    const size_t i = first_after(t);
    if (i == steps_.size()) return t;  // after the last step (Stream does not check here)
    const size_t from = i == 0 ? 0 : i - 1;
    size_t last_max = from;
    for (size_t k = from; k < steps_.size(); ++k)
      if (steps_[k].usage >= steps_[last_max].usage) last_max = k;
    if (steps_[last_max].usage + bits <= capacity) return t;
    if (last_max == steps_.size() - 1) return steps_[last_max].t;
    t = steps_[last_max + 1].t;
  }
}

double MemoryTimeline::peak() const {
  double p = 0;
  for (const auto& s : steps_) p = std::max(p, s.usage);
  return p;
}

}  // namespace mapfuse::coala
