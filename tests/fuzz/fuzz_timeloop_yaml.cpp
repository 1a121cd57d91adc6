// libFuzzer harness: the Timeloop / DOSA problem YAML reader (engine/workload/timeloop_problem.hpp).
#include "engine/workload/timeloop_problem.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mapfuse::fuzz::write_input(data, size, ".yaml");
  return mapfuse::fuzz::expect_success_or_input_error([&] { mapfuse::import_timeloop_problem(path); });
}
