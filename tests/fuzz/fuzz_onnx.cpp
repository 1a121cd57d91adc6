// libFuzzer harness: the ONNX importer (engine/workload/onnx_import.hpp), default options.
#include "engine/workload/onnx_import.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mapfuse::fuzz::write_input(data, size, ".onnx");
  return mapfuse::fuzz::expect_success_or_input_error([&] { mapfuse::import_onnx(path); });
}
