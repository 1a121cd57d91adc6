// libFuzzer harness: the study TOML reader (partitioners/study.hpp).
#include "partitioners/study.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return mapfuse::fuzz::expect_success_or_input_error([&] { mapfuse::parse_study(text, "fuzz.toml", true); });
}
