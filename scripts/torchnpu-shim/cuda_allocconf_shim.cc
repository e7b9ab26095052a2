// Test-harness shim for target/venv-npu only (scripts/setup-torchnpu.sh); never loaded by msprobe.
//
// PyPI serves torch 2.14.0 for x86_64 only as the CUDA build. Its libc10_cuda.so registers the CUDA
// allocator-config keys with c10::CachingAllocator::AcceleratorAllocatorConfig at load time, and
// torch_npu's libtorch_npu.so registers the NPU keys the same way; both register
// "pinned_reserve_segment_size_mb", so importing torch_npu aborts with "Duplicated key ...". Real Ascend
// hosts run the CPU build of torch, where no CUDA keys are registered.
//
// This library reproduces the CPU build's key set: it interposes
// AcceleratorAllocatorConfig::getMutableKeys() (exported by libc10.so, called through the PLT by the
// inline registerDeviceConfigParserHook) and, when the caller is libc10_cuda.so, hands out a private
// set that nobody reads, so the CUDA keys are never registered. Every other caller gets the real set.
// It is loaded with RTLD_GLOBAL by a .pth file of target/venv-npu before torch is imported, which puts
// it ahead of libc10.so in the global lookup scope.
#include <dlfcn.h>
#include <string.h>

#include <string>
#include <unordered_set>

using KeySet = std::unordered_set<std::string>;

#define MANGLED "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig14getMutableKeysB5cxx11Ev"

extern "C" KeySet& cannsim_shim_get_mutable_keys() __asm__(MANGLED);

static int g_diverted = 0;

extern "C" KeySet& cannsim_shim_get_mutable_keys() {
  using Fn = KeySet& (*)();
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, MANGLED));
  Dl_info info;
  if (dladdr(__builtin_return_address(0), &info) != 0 && info.dli_fname != nullptr &&
      strstr(info.dli_fname, "libc10_cuda.so") != nullptr) {
    static KeySet discarded;
    g_diverted++;
    return discarded;
  }
  if (real == nullptr) {
    static KeySet unreachable;
    return unreachable;
  }
  return real();
}

// Number of registrations diverted (the setup script checks that the shim was effective).
extern "C" int cannsim_shim_diverted() { return g_diverted; }
