#pragma once
// A link's bandwidth calendar for COALA: the used bandwidth as a step function of time. Requests
// take the earliest start, at the search start or at a step after it, from which the link has the
// requested bandwidth free for the whole duration (Stream's CommunicationLink.get_idle_window).
#include <map>
#include <memory_resource>
#include <span>
#include <utility>

namespace mapfuse::coala {

class LinkCalendar {
 public:
  explicit LinkCalendar(double bandwidth, std::pmr::memory_resource* mem = std::pmr::get_default_resource());

  double bandwidth() const { return bandwidth_; }
  // Earliest t >= from such that used(t') + need <= bandwidth for all t' in [t, t + duration).
  double earliest(double from, double duration, double need) const;
  // Reserves `bw` over [start, end).
  void reserve(double start, double end, double bw);
  size_t steps() const { return used_from_.size(); }

 private:
  double bandwidth_;
  // key: time from which `value` bits/cc are in use, until the next key. The first key is -inf.
  std::pmr::map<double, double> used_from_;
};

// Earliest common start on several links, each with its own requested bandwidth.
double earliest_on_all(std::span<const std::pair<const LinkCalendar*, double>> links, double from, double duration);

}  // namespace mapfuse::coala
