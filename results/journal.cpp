#include "results/journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/common/error.hpp"
#include "partitioners/work_unit.hpp"
#include "results/hdf5_writer.hpp"  // iso8601_now

namespace mapfuse {

namespace {

constexpr const char* kMagic = "mapfuse_journal";
constexpr int kFormat = 1;

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

// The whole file, or nullopt-like empty + exists=false when it does not exist.
bool slurp(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return false;
    throw io_error("cannot read journal", path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// Keys: mapfuse_journal, study_id, toml, start_time, and slice = [i, n] for a slice's journal.
std::string header_line(const std::string& id, const std::string& toml_text, const std::string& start_time,
                        const StudySlice& slice) {
  nlohmann::json j;
  j[kMagic] = kFormat;
  j["study_id"] = id;
  j["toml"] = toml_text;
  j["start_time"] = start_time;
  if (!slice.whole()) j["slice"] = {slice.index, slice.count};
  return j.dump() + "\n";
}

// Parses a journal's text; valid_length = bytes up to and including the last complete line.
JournalContents parse(const std::string& path, const std::string& text, const std::string& expected,
                      std::size_t& valid_length) {
  JournalContents c;
  valid_length = 0;
  std::map<std::string, std::size_t> index;  // unit id -> position in c.results
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {  // unterminated: the line being written when the run died
      c.truncated_lines = 1;
      break;
    }
    ++line_no;
    const std::string line = text.substr(pos, nl - pos);
    if (line_no == 1) {
      nlohmann::json h;
      try {
        h = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        throw InputError({path, 1, 0}, "", "not a mapfuse journal (the first line is not a journal header)");
      }
      if (!h.is_object() || !h.contains(kMagic) || !h.contains("study_id") || !h.contains("toml") ||
          !h["study_id"].is_string() || !h["toml"].is_string())
        throw InputError({path, 1, 0}, "", "not a mapfuse journal (the first line is not a journal header)");
      if (h[kMagic] != kFormat)
        throw InputError({path, 1, 0}, "", "journal format " + h[kMagic].dump() + " is not supported (expected " +
                                                std::to_string(kFormat) + ")");
      c.study_id = h["study_id"].get<std::string>();
      c.toml_text = h["toml"].get<std::string>();
      if (h.contains("start_time")) {  // absent in journals written before it was recorded
        if (!h["start_time"].is_string())
          throw InputError({path, 1, 0}, "start_time", "corrupt journal header: expected a string");
        c.start_time = h["start_time"].get<std::string>();
      }
      if (h.contains("slice")) {
        const auto& sl = h["slice"];
        if (!sl.is_array() || sl.size() != 2 || !sl[0].is_number_integer() || !sl[1].is_number_integer() ||
            sl[1].get<int64_t>() < 1 || sl[0].get<int64_t>() < 0 || sl[0].get<int64_t>() >= sl[1].get<int64_t>())
          throw InputError({path, 1, 0}, "slice", "corrupt journal header: expected [i, n] with 0 <= i < n");
        c.slice = {sl[0].get<int>(), sl[1].get<int>()};
      }
      if (study_id_of(c.toml_text) != c.study_id)
        throw InputError({path, 1, 0}, "", "corrupt journal header: study id " + c.study_id +
                                               " does not match its TOML text");
      if (!expected.empty() && c.study_id != expected)
        throw InputError({path, 0, 0}, "",
                         "journal belongs to a different study (study id " + c.study_id + ", this study is " +
                             expected + "); refusing to mix results: remove the journal and its HDF5 file or "
                             "choose another output path");
      c.existed = true;
    } else {
      UnitResult r;
      try {
        r = unit_result_from_json(line);
      } catch (const std::runtime_error& e) {
        throw InputError({path, line_no, 0}, "", std::string("corrupt journal line: ") + e.what());
      }
      auto [it, fresh] = index.emplace(r.unit_id, c.results.size());
      c.finished.insert(r.unit_id);
      if (fresh)
        c.results.push_back(std::move(r));
      else
        c.results[it->second] = std::move(r);
    }
    pos = nl + 1;
    valid_length = pos;
  }
  return c;
}

void write_all(int fd, const std::string& data, const std::string& path) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw io_error("cannot write journal", path);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void sync_dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

}  // namespace

std::string study_id_of(const std::string& toml_text) { return stable_id(toml_text); }

std::string journal_path(const std::string& h5_path) { return h5_path + ".journal"; }

JournalContents read_journal(const std::string& path, const std::string& expected_study_id) {
  std::string text;
  if (!slurp(path, text)) return {};
  std::size_t valid = 0;
  return parse(path, text, expected_study_id, valid);
}

JournalWriter::JournalWriter(const std::string& path, const std::string& toml_text, bool sync, const StudySlice& slice)
    : path_(path), study_id_(study_id_of(toml_text)), sync_(sync) {
  std::string text;
  const bool exists = slurp(path, text);
  std::size_t valid = 0;
  if (exists) recovered_ = parse(path, text, study_id_, valid);
  if (!recovered_.existed) valid = 0;  // no complete header: start afresh
  if (recovered_.existed && !(recovered_.slice == slice))
    throw InputError({path, 0, 0}, "",
                     "journal holds " + describe(recovered_.slice) + ", this run is " + describe(slice) +
                         "; refusing to mix results: give each slice its own output path");
  start_time_ = recovered_.existed && !recovered_.start_time.empty() ? recovered_.start_time : iso8601_now();

  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw io_error("cannot open journal", path);
  try {
    if (!exists || valid != text.size()) {
      if (::ftruncate(fd_, static_cast<off_t>(valid)) != 0) throw io_error("cannot truncate journal", path);
    }
    if (valid == 0) {
      write_line(header_line(study_id_, toml_text, start_time_, slice));
      if (sync_) sync_dir_of(path);  // the new directory entry too
    } else if (valid != text.size() && sync_) {
      if (::fdatasync(fd_) != 0) throw io_error("cannot sync journal", path);
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::write_line(const std::string& line) {
  write_all(fd_, line, path_);
  if (sync_ && ::fdatasync(fd_) != 0) throw io_error("cannot sync journal", path_);
}

void JournalWriter::append(const UnitResult& r) {
  std::string line = to_json(r);
  line += '\n';
  write_line(line);
  ++appended_;
}

void JournalWriter::append(const std::vector<UnitResult>& rs) {
  if (rs.empty()) return;
  std::string lines;
  for (const auto& r : rs) {
    lines += to_json(r);
    lines += '\n';
  }
  write_line(lines);
  appended_ += rs.size();
}

void write_journal(const std::string& path, const std::string& toml_text, const std::string& start_time,
                   const StudySlice& slice, const std::vector<UnitResult>& results) {
  std::string text = header_line(study_id_of(toml_text), toml_text, start_time, slice);
  for (const auto& r : results) {
    text += to_json(r);
    text += '\n';
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("cannot create journal", tmp);
  try {
    write_all(fd, text, tmp);
    if (::fsync(fd) != 0) throw io_error("cannot sync journal", tmp);
  } catch (...) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const auto err = io_error("cannot close journal", tmp);
    std::remove(tmp.c_str());
    throw err;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const auto err = io_error("cannot rename journal to", path);
    std::remove(tmp.c_str());
    throw err;
  }
  sync_dir_of(path);
}

}  // namespace mapfuse
