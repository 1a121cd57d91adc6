#pragma once
// Shared by the libFuzzer harnesses (scripts/fuzz.sh): readers that take a path get the input as a
// file in /dev/shm, and the one outcome a reader may have besides success is InputError. Any
// other exception escapes to libFuzzer, which reports it as a crash, as it does sanitizer reports.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/common/error.hpp"

namespace mapfuse::fuzz {

// A file holding the fuzzer's bytes, named with the reader's extension (some readers choose the
// format by it). One per process: libFuzzer runs inputs one after the other.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& ext) {
  const std::string path = "/dev/shm/mapfuse_fuzz_" + std::to_string(getpid()) + ext;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

template <class F>
int expect_success_or_input_error(F&& read) {
  try {
    read();
  } catch (const InputError&) {
  }
  return 0;
}

}  // namespace mapfuse::fuzz
