#include "kernels/emu/runtime.hpp"

#include <chrono>
#include <cstring>
#include <mutex>
#include <set>

#include "kernels/emu/checker.hpp"
#include "kernels/emu/counters.hpp"
#include "kernels/emu/device_memory.hpp"

struct CUstream_st {};
struct CUevent_st {
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

namespace kvsim::emu {
namespace {
thread_local cudaError_t last_error = cudaSuccess;

// Live streams and events, so that a destroyed or made-up handle is refused rather than dereferenced.
template <class T>
struct Handles {
  std::mutex mu;
  std::set<T*> live;
  bool contains(T* h) {
    std::lock_guard lock(mu);
    return live.count(h) != 0;
  }
  void add(T* h) {
    std::lock_guard lock(mu);
    live.insert(h);
  }
  bool remove(T* h) {
    std::lock_guard lock(mu);
    return live.erase(h) != 0;
  }
};
Handles<CUstream_st>& streams() {
  static Handles<CUstream_st> h;
  return h;
}
Handles<CUevent_st>& events() {
  static Handles<CUevent_st> h;
  return h;
}

// Which side of a copy must be device-accessible memory, by kind. cudaMemcpyDefault infers the
// direction on a GPU; here either side may then be host memory, so only a registered side is checked.
bool copy_ranges_valid(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return true;
    case cudaMemcpyHostToDevice:
      return accessible_from_device(dst, bytes);
    case cudaMemcpyDeviceToHost:
      return accessible_from_device(src, bytes);
    case cudaMemcpyDeviceToDevice:
      return accessible_from_device(dst, bytes) && accessible_from_device(src, bytes);
    case cudaMemcpyDefault:
      return true;
  }
  return false;
}
}  // namespace

cudaError_t record_error(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

bool valid_stream(cudaStream_t s) { return s == nullptr || streams().contains(s); }

}  // namespace kvsim::emu

using kvsim::emu::record_error;

cudaError_t cudaGetLastError() {
  const cudaError_t e = kvsim::emu::last_error;
  kvsim::emu::last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return kvsim::emu::last_error; }

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
  }
  return "unrecognized error code";
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
  }
  return "cudaErrorUnknown";
}

namespace {
cudaError_t allocate_into(void** p, size_t bytes, kvsim::emu::MemoryKind kind) {
  if (!p) return record_error(cudaErrorInvalidValue);
  *p = kvsim::emu::allocate(bytes, kind);
  return record_error(*p || bytes == 0 ? cudaSuccess : cudaErrorMemoryAllocation);
}
}  // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) { return allocate_into(p, bytes, kvsim::emu::MemoryKind::device); }
cudaError_t cudaFree(void* p) {
  return record_error(kvsim::emu::release(p, kvsim::emu::MemoryKind::device) ? cudaSuccess : cudaErrorInvalidValue);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  return allocate_into(p, bytes, kvsim::emu::MemoryKind::pinned_host);
}
cudaError_t cudaFreeHost(void* p) {
  return record_error(kvsim::emu::release(p, kvsim::emu::MemoryKind::pinned_host) ? cudaSuccess
                                                                                  : cudaErrorInvalidValue);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src || !kvsim::emu::copy_ranges_valid(dst, src, bytes, kind)) return record_error(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  kvsim::emu::checker::mark_written(dst, bytes);  // the access checker: these device bytes now hold data
  kvsim::emu::CountSink::copy(bytes, /*blocking=*/true);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (!kvsim::emu::valid_stream(stream)) return record_error(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src || !kvsim::emu::copy_ranges_valid(dst, src, bytes, kind)) return record_error(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  kvsim::emu::checker::mark_written(dst, bytes);
  kvsim::emu::CountSink::copy(bytes, /*blocking=*/false);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!p || !kvsim::emu::accessible_from_device(p, bytes)) return record_error(cudaErrorInvalidValue);
  std::memset(p, value, bytes);
  kvsim::emu::checker::mark_written(p, bytes);
  kvsim::emu::CountSink::memset_op();
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (!kvsim::emu::valid_stream(stream)) return record_error(cudaErrorInvalidResourceHandle);
  return cudaMemset(p, value, bytes);
}

cudaError_t cudaDeviceSynchronize() {
  kvsim::emu::CountSink::host_sync();
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (!s) return record_error(cudaErrorInvalidValue);
  *s = new CUstream_st;
  kvsim::emu::streams().add(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || !kvsim::emu::streams().remove(s)) return record_error(cudaErrorInvalidResourceHandle);
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  kvsim::emu::CountSink::host_sync();
  return record_error(kvsim::emu::valid_stream(s) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (!e) return record_error(cudaErrorInvalidValue);
  *e = new CUevent_st;
  kvsim::emu::events().add(*e);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e || !kvsim::emu::events().remove(e)) return record_error(cudaErrorInvalidResourceHandle);
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e || !kvsim::emu::events().contains(e) || !kvsim::emu::valid_stream(s))
    return record_error(cudaErrorInvalidResourceHandle);
  e->recorded = true;
  e->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  kvsim::emu::CountSink::host_sync();
  return record_error(e && kvsim::emu::events().contains(e) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  if (!ms) return record_error(cudaErrorInvalidValue);
  if (!start || !stop || !kvsim::emu::events().contains(start) || !kvsim::emu::events().contains(stop))
    return record_error(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !stop->recorded) return record_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
  return cudaSuccess;
}
