// libFuzzer harness: the study journal reader (results/journal.hpp), any study id accepted.
#include "results/journal.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mapfuse::fuzz::write_input(data, size, ".journal");
  return mapfuse::fuzz::expect_success_or_input_error([&] { mapfuse::read_journal(path, ""); });
}
