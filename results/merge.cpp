#include "results/merge.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "engine/common/error.hpp"
#include "results/journal.hpp"

namespace mapfuse {

namespace {

// How many missing units a message lists by label before it only counts the rest.
constexpr std::size_t kListedMissing = 40;

}  // namespace

std::vector<StudyPart> read_study_parts(const std::vector<std::string>& paths, const std::string& toml_text) {
  const std::string study_id = study_id_of(toml_text);
  std::vector<StudyPart> parts;
  std::map<std::pair<int, int>, std::string> slices;  // (index, count) -> part path
  for (const std::string& path : paths) {
    StudyPart p{path, read_study_h5(path)};
    const StudyMeta& m = p.file.meta;
    if (m.study_id != study_id || m.toml_text != toml_text)
      throw InputError({path, 0, 0}, "",
                       "part belongs to a different study ('" + m.name + "', study id " + m.study_id +
                           "; this study is " + study_id + "); refusing to mix results");
    if (!parts.empty() && m.mapfuse_version != parts.front().file.meta.mapfuse_version)
      throw InputError({path, 0, 0}, "",
                       "part was computed by " + m.mapfuse_version + ", '" + parts.front().path + "' by " +
                           parts.front().file.meta.mapfuse_version +
                           " (version/model fingerprint); refusing to mix two cost models in one file: re-run "
                           "the parts with one build");
    if (!m.slice.whole()) {
      auto [it, fresh] = slices.emplace(std::make_pair(m.slice.index, m.slice.count), path);
      if (!fresh)
        throw InputError({path, 0, 0}, "", "part is " + describe(m.slice) + ", and so is '" + it->second +
                                               "'; each slice must be given once");
    }
    parts.push_back(std::move(p));
  }
  return parts;
}

StudyFile merge_study_parts(const std::vector<StudyPart>& parts, const std::vector<ExpectedUnit>& expected) {
  if (parts.empty()) throw InputError({}, "PART", "no parts to merge");
  std::map<std::string, const ExpectedUnit*> by_id;
  for (const ExpectedUnit& u : expected) by_id.emplace(u.id, &u);

  StudyFile out;
  const StudyMeta& first = parts.front().file.meta;
  out.meta.name = first.name;
  out.meta.study_id = first.study_id;
  out.meta.toml_text = first.toml_text;
  out.meta.mapfuse_version = first.mapfuse_version;
  out.meta.end_time = iso8601_now();
  out.meta.ranks = 0;
  out.meta.threads = 0;
  std::map<std::string, const std::string*> seen;  // unit id -> part path
  for (const StudyPart& p : parts) {
    const StudyMeta& m = p.file.meta;
    if (!m.start_time.empty() && (out.meta.start_time.empty() || m.start_time < out.meta.start_time))
      out.meta.start_time = m.start_time;  // ISO 8601 UTC strings order as times
    out.meta.ranks += m.ranks;
    out.meta.threads = std::max(out.meta.threads, m.threads);
    for (const UnitResult& r : p.file.results) {
      if (!by_id.count(r.unit_id))
        throw InputError({p.path, 0, 0}, "",
                         "unit '" + r.label + "' (id " + r.unit_id +
                             ") is not a unit of this study (was the study run from another path, or edited?)");
      auto [it, fresh] = seen.emplace(r.unit_id, &p.path);
      if (!fresh)
        throw InputError({p.path, 0, 0}, "", "unit '" + r.label + "' (id " + r.unit_id + ") is also in '" + *it->second +
                                                 "'; every unit must be in exactly one part");
      out.results.push_back(r);
    }
  }
  std::vector<const ExpectedUnit*> missing;
  for (const ExpectedUnit& u : expected)
    if (!seen.count(u.id)) missing.push_back(&u);
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end(), [](auto* a, auto* b) { return a->label < b->label; });
    std::string msg = std::to_string(missing.size()) + " of " + std::to_string(expected.size()) +
                      " units of the study are in no part; missing:";
    for (std::size_t k = 0; k < missing.size() && k < kListedMissing; ++k)
      msg += "\n  " + missing[k]->label + (missing[k]->where.empty() ? "" : "  (" + missing[k]->where + ")");
    if (missing.size() > kListedMissing) msg += "\n  ... and " + std::to_string(missing.size() - kListedMissing) + " more";
    msg += "\nrun the missing slices (mapfuse run STUDY --slice i/n) and merge again";
    throw InputError({}, "", msg);
  }
  std::sort(out.results.begin(), out.results.end(),
            [](const UnitResult& a, const UnitResult& b) { return a.unit_id < b.unit_id; });
  return out;
}

}  // namespace mapfuse
