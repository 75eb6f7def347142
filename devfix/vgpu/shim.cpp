// devfix virtual-GPU shim: a no-op CUDA device guard and CUDA hooks for a CPU-only torch build.
//
// Loaded with RTLD_GLOBAL *before* `import torch`, because torch reads the CUDA hooks once
// while it is imported. The number of virtual devices comes from DEVFIX_VGPU_COUNT.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
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

// "Pinned" host memory is ordinary CPU memory whose pointers are remembered, so that
// Tensor.is_pinned() answers as it does on a GPU machine.
std::mutex g_pinned_mutex;
std::unordered_set<const void*> g_pinned;

void pinned_delete(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(ptr);
  }
  c10::GetCPUAllocator()->raw_deallocate(ptr);
}

struct PinnedAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* ptr = n ? c10::GetCPUAllocator()->raw_allocate(n) : nullptr;
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
  const at::Generator& getDefaultGenerator(DeviceIndex /*device_index*/) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  // Random numbers for virtual GPUs come from CPU generators (values differ from a GPU's).
  at::Generator getNewGenerator(DeviceIndex /*device_index*/) const override {
    return at::detail::createCPUGenerator();
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
