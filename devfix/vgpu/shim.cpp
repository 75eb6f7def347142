// devfix virtual-GPU shim: a no-op CUDA device guard and CUDA hooks for a CPU-only torch build.
//
// Loaded with RTLD_GLOBAL *before* `import torch`, because torch reads the CUDA hooks once
// while it is imported. The number of virtual devices comes from DEVFIX_VGPU_COUNT.
#include <Python.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;

DeviceIndex g_count = -1;
thread_local DeviceIndex t_current = 0;

DeviceIndex count() {
  if (g_count < 0) {
    const char* env = std::getenv("DEVFIX_VGPU_COUNT");
    g_count = env ? static_cast<DeviceIndex>(std::atoi(env)) : 0;
  }
  return g_count;
}

void check_index(DeviceIndex idx) {
  TORCH_CHECK(idx >= 0 && idx < count(), "CUDA error: invalid device ordinal\n"
              "CUDA kernel errors might be asynchronously reported at some other API call, "
              "so the stacktrace below might be incorrect.\n"
              "For debugging consider passing CUDA_LAUNCH_BLOCKING=1");
}

struct VGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::CUDA; }
  Device exchangeDevice(Device d) const override {
    Device old(DeviceType::CUDA, t_current);
    if (d.index() >= 0) {
      check_index(d.index());
      t_current = d.index();
    }
    return old;
  }
  Device getDevice() const override { return Device(DeviceType::CUDA, t_current); }
  void setDevice(Device d) const override {
    if (d.index() >= 0) {
      check_index(d.index());
      t_current = d.index();
    }
  }
  void uncheckedSetDevice(Device d) const noexcept override {
    if (d.index() >= 0) t_current = d.index();
  }
  Stream getStream(Device d) const override {
    return Stream(Stream::DEFAULT, Device(DeviceType::CUDA, d.index() < 0 ? t_current : d.index()));
  }
  Stream getNewStream(Device d, int /*priority*/) const override {
    return getStream(d);
  }
  Stream getStreamFromGlobalPool(Device d, bool /*isHighPriority*/) const override {
    return getStream(d);
  }
  Stream exchangeStream(Stream s) const override { return getStream(s.device()); }
  DeviceIndex deviceCount() const noexcept override { return count(); }
  void record(void** /*event*/, const Stream& /*stream*/, const DeviceIndex /*device_index*/,
              const c10::EventFlag /*flag*/) const override {}
  void block(void* /*event*/, const Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* /*event*/, const DeviceIndex /*device_index*/) const noexcept override {}
  bool queryStream(const Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const Stream& /*stream*/) const override {}
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(const DeviceIndex /*device_index*/) const override {}
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/,
                             const Stream& /*stream*/) const override {}
};

// torch's own CPU allocator, saved when the counting allocator replaces it.
c10::Allocator* g_cpu_allocator = nullptr;

c10::Allocator* cpu_allocator() { return g_cpu_allocator ? g_cpu_allocator : c10::GetCPUAllocator(); }

// "Pinned" host memory is ordinary CPU memory whose pointers are remembered, so that
// Tensor.is_pinned() answers as it does on a GPU machine.
std::mutex g_pinned_mutex;
std::unordered_set<const void*> g_pinned;

void pinned_delete(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(ptr);
  }
  cpu_allocator()->raw_deallocate(ptr);
}

struct PinnedAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* ptr = n ? cpu_allocator()->raw_allocate(n) : nullptr;
    if (ptr) {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.insert(ptr);
    }
    return {ptr, ptr, &pinned_delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &pinned_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

PinnedAllocator g_pinned_allocator;

bool is_pinned(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  return g_pinned.count(ptr) > 0;
}

// A generator on a virtual GPU: the CPU's Mersenne Twister, reporting device cuda:k and carrying
// the CUDA dispatch key (so an op handed it reaches the runtime's CUDA kernels, which check
// the generator's device as a CUDA build does and sample with a CPU twin of its state).
struct VCUDAGenerator final : public at::CPUGeneratorImpl {
  explicit VCUDAGenerator(DeviceIndex idx) {
    device_ = Device(DeviceType::CUDA, idx);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::CUDA);
  }

 private:
  VCUDAGenerator* clone_impl() const override {
    auto* copy = new VCUDAGenerator(device_.index());
    copy->set_state(*get_state());
    return copy;
  }
};

// Memory statistics of the virtual GPUs. While the runtime computes a result for cuda:k it sets
// t_alloc_device = k; CPU allocations made then are counted against cuda:k, rounded up as the
// CUDA caching allocator rounds block sizes (512 bytes), until their storage is freed.
constexpr int kMaxDevices = 64;
constexpr size_t kMinBlockSize = 512;
thread_local int t_alloc_device = -1;
std::atomic<int64_t> g_allocated[kMaxDevices];
std::atomic<int64_t> g_peak[kMaxDevices];
std::atomic<int64_t> g_alloc_count[kMaxDevices];
std::atomic<int64_t> g_free_count[kMaxDevices];
std::mutex g_counted_mutex;
std::unordered_map<const void*, std::pair<int64_t, int>> g_counted;
size_t rounded(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

void counted_delete(void* ptr) {
  if (ptr != nullptr) {
    std::lock_guard<std::mutex> lock(g_counted_mutex);
    auto it = g_counted.find(ptr);
    if (it != g_counted.end()) {
      g_allocated[it->second.second] -= it->second.first;
      g_free_count[it->second.second] += 1;
      g_counted.erase(it);
    }
  }
  g_cpu_allocator->raw_deleter()(ptr);
}

struct CountingAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    int dev = t_alloc_device;
    if (dev < 0 || n == 0) return g_cpu_allocator->allocate(n);
    void* ptr = g_cpu_allocator->raw_allocate(n);
    int64_t size = static_cast<int64_t>(rounded(n));
    {
      std::lock_guard<std::mutex> lock(g_counted_mutex);
      g_counted[ptr] = {size, dev};
    }
    int64_t now = (g_allocated[dev] += size);
    g_alloc_count[dev] += 1;
    int64_t peak = g_peak[dev].load();
    while (now > peak && !g_peak[dev].compare_exchange_weak(peak, now)) {
    }
    return {ptr, ptr, &counted_delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

CountingAllocator g_counting_allocator;

struct VHooks final : public at::CUDAHooksInterface {
  explicit VHooks(at::CUDAHooksArgs /*args*/) {}
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return count() > 0; }
  bool hasPrimaryContext(DeviceIndex /*device_index*/) const override { return true; }
  bool hasCUDA() const override { return count() > 0; }
  DeviceIndex deviceCount() const override { return count(); }
  int getNumGPUs() const override { return count(); }
  DeviceIndex current_device() const override { return t_current; }
  DeviceIndex getCurrentDevice() const override { return t_current; }
  void setCurrentDevice(DeviceIndex d) const override {
    check_index(d);
    t_current = d;
  }
  DeviceIndex exchangeDevice(DeviceIndex d) const override {
    DeviceIndex old = t_current;
    if (d >= 0) {
      check_index(d);
      t_current = d;
    }
    return old;
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex d) const override { return exchangeDevice(d); }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  // The default generator of every virtual GPU is the CPU's: `torch.manual_seed` seeds the
  // numbers drawn on the virtual GPUs, which differ from a real GPU's Philox stream.
  const at::Generator& getDefaultGenerator(DeviceIndex /*device_index*/) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Generator getNewGenerator(DeviceIndex device_index) const override {
    DeviceIndex idx = device_index < 0 ? t_current : device_index;
    check_index(idx);
    return at::make_generator<VCUDAGenerator>(idx);
  }
  void deviceSynchronize(DeviceIndex /*device_index*/) const override {}
};

c10::impl::DeviceGuardImplRegistrar g_guard(DeviceType::CUDA, new VGuardImpl());

}  // namespace

namespace at {
// torch looks the hooks up under the key "CUDAHooks".
C10_REGISTER_TYPED_CLASS(CUDAHooksRegistry, "CUDAHooks", VHooks)
}  // namespace at

extern "C" int devfix_vgpu_current_device() { return t_current; }
extern "C" void devfix_vgpu_set_current_device(int d) { t_current = static_cast<DeviceIndex>(d); }
extern "C" int devfix_vgpu_device_count() { return count(); }

// Memory statistics (see CountingAllocator).
extern "C" void devfix_vgpu_install_allocator() {
  if (g_cpu_allocator == nullptr) {
    g_cpu_allocator = c10::GetCPUAllocator();
    c10::SetCPUAllocator(&g_counting_allocator, /*priority=*/100);
  }
}
extern "C" int devfix_vgpu_set_alloc_device(int d) {
  int old = t_alloc_device;
  t_alloc_device = d;
  return old;
}
extern "C" int64_t devfix_vgpu_memory(int d, int which) {
  if (d < 0 || d >= kMaxDevices) return 0;
  switch (which) {
    case 0: return g_allocated[d].load();
    case 1: return g_peak[d].load();
    case 2: return g_alloc_count[d].load();
    case 3: return g_free_count[d].load();
    default: return 0;
  }
}
extern "C" void devfix_vgpu_reset_peak(int d) {
  if (d >= 0 && d < kMaxDevices) g_peak[d] = g_allocated[d].load();
}
extern "C" void devfix_vgpu_reset_counts(int d) {
  if (d >= 0 && d < kMaxDevices) {
    g_alloc_count[d] = 0;
    g_free_count[d] = 0;
  }
}

// The same setter as a Python builtin: the runtime calls it twice per op, and a builtin call
// costs a tenth of a ctypes call. Fetched once through ctypes.PyDLL (the GIL is held).
namespace {
PyObject* py_set_alloc_device(PyObject* /*self*/, PyObject* arg) {
  long d = PyLong_AsLong(arg);
  if (d == -1 && PyErr_Occurred()) return nullptr;
  int old = t_alloc_device;
  t_alloc_device = static_cast<int>(d);
  return PyLong_FromLong(old);
}
PyMethodDef g_py_methods[] = {
    {"set_alloc_device", py_set_alloc_device, METH_O,
     "set_alloc_device(k) -> previous: count CPU allocations against cuda:k (-1: none)"},
    {nullptr, nullptr, 0, nullptr}};
}  // namespace

extern "C" PyObject* devfix_vgpu_py_set_alloc_device() {
  return PyCFunction_New(&g_py_methods[0], nullptr);
}
