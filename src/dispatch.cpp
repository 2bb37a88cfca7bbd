// dispatch.cpp: libqkv_kernels' choice of kernels, made once per process (kernels.hpp).
// Compiled for x86-64-v3 into libqkv_kernels.so beside the AVX2 kernels (kernels.cpp); the
// AVX-512 kernels, libqkv_kernels_avx512.so, are dlopen'ed from this object's own directory only
// when the CPU has avx512f, bw, dq and vl, so that their code (and their static initialisers) is
// never mapped on a CPU without them. QKV_KERNELS=avx2, or qkv_kernels_force before the first
// call, keeps AVX2. Everything but the names declared in kernels.hpp and thread_pool.hpp is
// hidden (-fvisibility=hidden).
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "qkv/runtime/kernels.hpp"

namespace rt = qkv::runtime;

extern "C" const rt::detail::kernel_table qkv_kernels_avx2_table;  // kernels.cpp, this object

namespace {

std::atomic<int> forced{-1};  // a kernel_set asked for by qkv_kernels_force, or -1
std::string reason;           // why the table in use was chosen (set once, under the once_flag)

bool fits(const rt::detail::kernel_table* t) {
  const rt::detail::kernel_table& a = qkv_kernels_avx2_table;
  return t && t->abi == a.abi && std::memcmp(t->sizes, a.sizes, sizeof a.sizes) == 0;
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

/// libqkv_kernels_avx512.so from the directory this object was loaded from, or nullptr (reason says why)
const rt::detail::kernel_table* load_avx512() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&qkv_kernels_table), &self) == 0 || !self.dli_fname) {
    reason = "the CPU has AVX-512 but libqkv_kernels could not find its own path (dladdr); avx2";
    return nullptr;
  }
  std::string path = self.dli_fname;
  const auto slash = path.rfind('/');
  path =
      (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "libqkv_kernels_avx512.so";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    reason = "the CPU has AVX-512 but " + path + " did not load (" + (e ? e : "?") + "); avx2";
    return nullptr;
  }
  const auto* t = static_cast<const rt::detail::kernel_table*>(dlsym(h, "qkv_kernels_avx512_table"));
  if (!fits(t)) {
    reason = "the CPU has AVX-512 but " + path + " is of another build (its table does not match); avx2";
    return nullptr;
  }
  return t;
}

const rt::detail::kernel_table* choose() {
  const char* env = std::getenv("QKV_KERNELS");
  const bool env_avx2 = env && std::strcmp(env, "avx2") == 0;
  if (forced.load() == static_cast<int>(rt::kernel_set::avx2)) {
    reason = "force_kernels(kernel_set::avx2)";
    return &qkv_kernels_avx2_table;
  }
  if (env_avx2 && forced.load() != static_cast<int>(rt::kernel_set::avx512)) {
    reason = "QKV_KERNELS=avx2";
    return &qkv_kernels_avx2_table;
  }
  // any other value of QKV_KERNELS is not a choice: said, and the CPU decides
  const std::string ignored = env && *env && !env_avx2 && std::strcmp(env, "avx512") != 0
                                  ? std::string("QKV_KERNELS=") + env + " ignored (avx2 or avx512); "
                                  : std::string();
  if (!cpu_has_avx512()) {
    reason = ignored + "the CPU lacks one of avx512f/bw/dq/vl";
    return &qkv_kernels_avx2_table;
  }
  if (const auto* t = load_avx512()) {
    reason = ignored + "the CPU has avx512f/bw/dq/vl";
    return t;
  }
  reason = ignored + reason;
  return &qkv_kernels_avx2_table;
}

std::once_flag chosen_once;
const rt::detail::kernel_table* chosen = nullptr;

const rt::detail::kernel_table* table() {
  std::call_once(chosen_once, [] { chosen = choose(); });
  return chosen;
}

}  // namespace

extern "C" {

const rt::detail::kernel_table* qkv_kernels_table() noexcept { return table(); }

bool qkv_kernels_force(rt::kernel_set set) noexcept {
  if (set == rt::kernel_set::header_only) return false;
  forced.store(static_cast<int>(set));
  bool took = false;
  std::call_once(chosen_once, [&] {
    chosen = choose();
    took = true;
  });
  return took && chosen->set == set;
}

const char* qkv_kernels_reason() noexcept { return table() == nullptr ? "" : reason.c_str(); }

// declared in thread_pool.hpp (the library's copies of it and the program's call this one)
[[gnu::visibility("default")]] bool* qkv_kernels_task_flag() noexcept {
  thread_local bool flag = false;  // thread_pool's "inside a task", one for the program and the library
  return &flag;
}

}  // extern "C"
