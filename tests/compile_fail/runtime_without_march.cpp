// runtime_without_march.cpp: code that includes runtime/ compiled for plain x86-64 (SSE2), as a
// project that forgets qkv-runtime / qkv::runtime / qkv_runtime_dep would. It must not be silent:
// runtime/target.hpp warns, and under -Werror (as tests/meson.build compiles this) it is refused.
#include <qkv/runtime/gemm.hpp>

int main() { return qkv::runtime::lanes<float> == 4 ? 0 : 1; }
