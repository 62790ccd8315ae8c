// What the CUB core of FlashInfer's csrc/cub_topk.cu (everything above its tvm-ffi entry points, which
// the build script copies into fi_cub_core.inc) needs from tvm-ffi: an optional workspace view and a
// check macro. The real types come with the tvm-ffi Python package, which the lent GPU machines do not
// have; the shim passes a workspace it sized with CUB's own query, so the check never fails there.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>

// A workspace of `bytes` bytes at `ptr`, counted in one-byte elements.
struct TensorView {
  void* ptr = nullptr;
  std::int64_t bytes = 0;
  void* data_ptr() const { return ptr; }
  std::int64_t numel() const { return bytes; }
};

inline std::int64_t get_element_size(const TensorView&) {
  return 1;
}

template <class T>
using Optional = std::optional<T>;

// TVM_FFI_ICHECK(cond) << message: the message is dropped and a failed check aborts, as an unhandled
// tvm-ffi error would end a C caller.
struct CutopkFiFailedCheck {
  template <class U>
  CutopkFiFailedCheck& operator<<(const U&) {
    return *this;
  }
  ~CutopkFiFailedCheck() { std::abort(); }
};
#define TVM_FFI_ICHECK(cond) \
  if (cond) {                \
  } else                     \
    CutopkFiFailedCheck {}
