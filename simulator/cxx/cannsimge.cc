// libcannsimge.so: the C++ half of the CANN simulator, for clients that link the GE / platform / tiling C++
// libraries (MindSpore 2.10's Ascend plugin: real-clients.md §4.3, §5.2). Built with the old libstdc++ ABI
// (-D_GLIBCXX_USE_CXX11_ABI=0), like CANN. It holds:
//  - real objects where the clients' static initialisers need them (ge::StatusFactory);
//  - the securec formatting functions (variadic / va_list: not expressible in stable Rust);
//  - slog's C++ logging entry points (records are dropped, as with logging off);
//  - aclTensor's C++ accessors, forwarding to the nnopbase C getters of libcannsim.so;
//  - stubs for the other GE / fe / optiling names (stub_symbols.txt, generated into an assembly file by
//    scripts/sim-install.sh): they return 0 / NULL, which is what a GE without graph support gives. The GE
//    (aclop-IR / graph-compile) path is out of scope: an op that takes it fails in the client.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>

namespace ge {
// Layout relied on by the inline ErrorNoRegisterar of GE's headers: the map is the first member.
class StatusFactory {
 public:
  static StatusFactory *Instance();
  std::map<uint32_t, std::string> err_desc_;
};
StatusFactory *StatusFactory::Instance() {
  static StatusFactory instance;
  return &instance;
}
}  // namespace ge

extern "C" {
// securec: write at most min(count, destMax-1) characters; -1 (and a truncated, terminated string) on truncation.
int vsnprintf_s(char *dest, size_t destMax, size_t count, const char *format, va_list ap) {
  if (dest == nullptr || format == nullptr || destMax == 0) return -1;
  size_t limit = destMax - 1;
  bool truncate_ok = count < limit;
  if (truncate_ok) limit = count;
  int n = vsnprintf(dest, limit + 1, format, ap);
  if (n < 0) {
    dest[0] = '\0';
    return -1;
  }
  if ((size_t)n > limit) {
    if (!truncate_ok) dest[0] = '\0';
    return -1;
  }
  return n;
}
int snprintf_s(char *dest, size_t destMax, size_t count, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int r = vsnprintf_s(dest, destMax, count, format, ap);
  va_end(ap);
  return r;
}

// nnopbase C getters (libcannsim.so)
int aclGetDataType(const void *tensor, int *dtype);
int aclGetFormat(const void *tensor, int *format);
int aclGetRawTensorAddr(const void *tensor, void **addr);
}

void DlogRecord(int, int, const char *, ...) {}
void DlogInner(int, int, const char *, ...) {}
int CheckLogLevel(int, int) { return 0; }

// Transactional-memory clones libstdc++ asks for: plain new[] / delete.
extern "C" void *_ZGTtnam(size_t n) { return ::operator new[](n); }
extern "C" void _ZGTtdlPv(void *p) { ::operator delete(p); }

class aclTensor {
 public:
  int GetDataType() const;
  int GetStorageFormat() const;
  void *GetStorageAddr() const;
  void *GetData() const;
};
int aclTensor::GetDataType() const {
  int v = -1;
  aclGetDataType(this, &v);
  return v;
}
int aclTensor::GetStorageFormat() const {
  int v = -1;
  aclGetFormat(this, &v);
  return v;
}
void *aclTensor::GetStorageAddr() const {
  void *p = nullptr;
  aclGetRawTensorAddr(this, &p);
  return p;
}
void *aclTensor::GetData() const { return GetStorageAddr(); }
