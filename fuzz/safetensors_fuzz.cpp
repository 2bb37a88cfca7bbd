// safetensors_fuzz.cpp: libFuzzer target for the .safetensors reader. Any bytes: either a clear
// safetensors_error, or a file whose every tensor and row reads within bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <qkv/io/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto f =
        qkv::io::safetensors_file::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& t : f.tensors()) {
      // checked tensors lie inside the input
      if (t.end > size || t.begin > t.end) std::abort();
      try {
        const auto all = f.read<float>(t.name);
        if (all.size() != t.elements()) std::abort();
        if (!t.shape.empty() && t.shape[0] > 0) {
          const auto last = f.read_rows<double>(t.name, t.shape[0] - 1, 1);
          if (last.size() != t.elements() / t.shape[0]) std::abort();
        }
      } catch (const qkv::io::safetensors_error&) {
        // F8 dtypes are known but not converted
      }
      (void)f.raw(t.name);
    }
  } catch (const qkv::io::safetensors_error&) {}
  return 0;
}
