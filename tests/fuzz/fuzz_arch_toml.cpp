// libFuzzer harness: the architecture TOML reader and its TOML writer (engine/arch/arch_toml.hpp):
// whatever parses must print back to TOML that parses to the same text.
#include "engine/arch/arch_toml.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return mapfuse::fuzz::expect_success_or_input_error([&] {
    const mapfuse::Architecture a = mapfuse::parse_architecture(text, "fuzz.toml");
    const std::string once = mapfuse::to_toml(a);
    if (mapfuse::to_toml(mapfuse::parse_architecture(once, "round_trip.toml")) != once) std::abort();
  });
}
