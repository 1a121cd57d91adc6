#pragma once
// A core's top-memory occupancy for COALA: a tensor added at t occupies its bits from t on until it
// is removed at some t' (also from then on). Stream's MemoryManager keeps the same cumulative
// step function; the capacity rule (earliest time from which the future peak leaves room) is its
// get_timestep_for_tensor_addition.
#include <cstddef>
#include <vector>

namespace mapfuse::coala {

class MemoryTimeline {
 public:
  // Adds `bits` (negative to remove) to the usage from t on. Returns the new peak after t.
  double add(double t, double bits);
  double usage_at(double t) const;
  // Earliest time >= t from which usage + bits stays within capacity for all later times; when
  // no such time exists, the time of the last peak (the caller must then evict).
  double earliest_fit(double t, double bits, double capacity) const;
  double peak() const;

  struct Step {
    double t, usage;
  };
  // The usage from steps()[i].t on; times increase. Equal neighbours are possible (a tensor added
  // and another removed at one time).
  const std::vector<Step>& steps() const { return steps_; }

 private:
  std::vector<Step> steps_{{0.0, 0.0}};
  std::size_t first_after(double t) const;  // index of the first step with time > t
};

}  // namespace mapfuse::coala
