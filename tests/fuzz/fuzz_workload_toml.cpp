// libFuzzer harness: the workload TOML reader (engine/workload/load.hpp).
#include "engine/workload/load.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mapfuse::fuzz::write_input(data, size, ".toml");
  return mapfuse::fuzz::expect_success_or_input_error([&] { mapfuse::load_workload_toml(path); });
}
