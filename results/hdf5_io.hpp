#pragma once
// HDF5 plumbing shared by the study file (hdf5_writer.cpp) and the schedule file (schedule_h5.cpp):
// RAII handles, failures as exceptions naming the file, attributes, whole datasets, and the
// write-to-temporary-then-rename that keeps a file at its path always complete. Internal to results/.
#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/common/atomic_file.hpp"

namespace mapfuse::h5io {

// The HDF5 error stack prints itself to stderr by default; we turn failures into exceptions.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

inline herr_t innermost_error(unsigned n, const H5E_error2_t* e, void* data) {
  if (n == 0 && e->desc) *static_cast<std::string*>(data) = e->desc;
  return 0;
}

inline std::string hdf5_error() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_error, &s);
  return s.empty() ? "HDF5 error" : s;
}

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

struct Context {
  std::string path;
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("HDF5 file '" + path + "': " + what + ": " + hdf5_error());
  }
  Handle check(hid_t id, Handle::Closer close, const std::string& what) const {
    if (id < 0) fail(what);
    return Handle(id, close);
  }
  void check(herr_t status, const std::string& what) const {
    if (status < 0) fail(what);
  }
};

inline Handle vlen_string_type(const Context& c) {
  Handle t = c.check(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  c.check(H5Tset_size(t, H5T_VARIABLE), "string type");
  c.check(H5Tset_cset(t, H5T_CSET_UTF8), "string type");
  return t;
}


inline Handle packed_copy(const Context& c, hid_t mem) {
  Handle f = c.check(H5Tcopy(mem), H5Tclose, "compound type");
  c.check(H5Tpack(f), "compound type");
  return f;
}


inline char* cstr(const std::string& s) { return const_cast<char*>(s.c_str()); }


inline void write_string_attr(const Context& c, hid_t obj, const char* name, const std::string& value, hid_t str) {
  Handle space = c.check(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle a = c.check(H5Acreate2(obj, name, str, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                     std::string("attribute ") + name);
  const char* p = value.c_str();
  c.check(H5Awrite(a, str, &p), std::string("attribute ") + name);
}

inline void write_int_attr(const Context& c, hid_t obj, const char* name, int64_t value, hid_t file_type) {
  Handle space = c.check(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle a = c.check(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                     std::string("attribute ") + name);
  c.check(H5Awrite(a, H5T_NATIVE_INT64, &value), std::string("attribute ") + name);
}

inline void write_double_attr(const Context& c, hid_t obj, const char* name, double value) {
  Handle space = c.check(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  Handle a = c.check(H5Acreate2(obj, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                     std::string("attribute ") + name);
  c.check(H5Awrite(a, H5T_NATIVE_DOUBLE, &value), std::string("attribute ") + name);
}

inline Handle write_dataset(const Context& c, hid_t parent, const char* name, hid_t file_type, hid_t mem_type,
                     const std::vector<hsize_t>& dims, const void* data) {
  Handle space = c.check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                         std::string("dataspace of ") + name);
  Handle dcpl = c.check(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
  c.check(H5Pset_obj_track_times(dcpl, 0), "dataset properties");  // same data, same file
  Handle ds = c.check(H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
                      std::string("dataset ") + name);
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (n > 0) c.check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), std::string("dataset ") + name);
  return ds;
}


inline std::string read_string_attr(const Context& c, hid_t obj, const char* name, hid_t str) {
  Handle a = c.check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("attribute ") + name);
  Handle space = c.check(H5Aget_space(a), H5Sclose, std::string("attribute ") + name);
  char* p = nullptr;
  c.check(H5Aread(a, str, &p), std::string("attribute ") + name);
  std::string out = p ? p : "";
  H5Dvlen_reclaim(str, space, H5P_DEFAULT, &p);
  return out;
}

inline int64_t read_int_attr(const Context& c, hid_t obj, const char* name) {
  Handle a = c.check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("attribute ") + name);
  int64_t v = 0;
  c.check(H5Aread(a, H5T_NATIVE_INT64, &v), std::string("attribute ") + name);
  return v;
}

// Reads a whole dataset of `rows` rows into `out` (resized); returns its dataspace for reclaiming.
inline double read_double_attr(const Context& c, hid_t obj, const char* name) {
  Handle a = c.check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, std::string("attribute ") + name);
  double v = 0;
  c.check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), std::string("attribute ") + name);
  return v;
}

template <class Row>
inline Handle read_rows(const Context& c, hid_t file, const char* name, hid_t mem_type, std::vector<Row>& out) {
  Handle ds = c.check(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose, std::string("dataset ") + name);
  Handle space = c.check(H5Dget_space(ds), H5Sclose, std::string("dataset ") + name);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) c.fail(std::string("dataset ") + name);
  out.assign(static_cast<std::size_t>(n), Row{});
  if (n > 0) c.check(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), std::string("dataset ") + name);
  return space;
}

inline std::string take(char* p) { return p ? std::string(p) : std::string(); }


// Writes `path` through `write(tmp)` atomically (engine/common/atomic_file.hpp): an older file at
// `path` stays untouched on failure.
inline void write_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  replace_file_atomically(path, write);
}

}  // namespace mapfuse::h5io
