// devfix virtual-GPU shim for a CPU-only torch build: a no-op CUDA device guard and CUDA hooks,
// the allocator that counts (and caches) each virtual GPU's memory, provenance, and the fast
// path that runs the common op on virtual tensors without Python.
//
// Loaded with RTLD_GLOBAL *before* `import torch`, because torch reads the CUDA hooks once
// while it is imported. The number of virtual devices comes from DEVFIX_VGPU_COUNT.
#include <Python.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/PythonDispatcherTLS.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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

std::atomic<bool> g_prov_on{false};

int switch_alloc_device(int d) {
  int old = t_alloc_device;
  t_alloc_device = d;
  return old;
}
std::atomic<int64_t> g_allocated[kMaxDevices];
std::atomic<int64_t> g_peak[kMaxDevices];
std::atomic<int64_t> g_alloc_count[kMaxDevices];
std::atomic<int64_t> g_free_count[kMaxDevices];
std::mutex g_counted_mutex;
std::unordered_map<const void*, std::pair<int64_t, int>> g_counted;
size_t rounded(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// Freed blocks of a virtual GPU are kept for reuse, by device and size, as CUDA's caching
// allocator keeps them (and as the runtime's model of reserved memory assumes), up to the
// device's peak allocation. Without them glibc hands large blocks back to the OS when they are
// freed and the next step faults their pages in again: a small Transformer step took seven
// times the page faults of the same step on plain CPU tensors. Smaller blocks come from
// malloc's own free lists, which do not fault.
constexpr int64_t kCachedMinBlock = 64 * 1024;
std::unordered_map<uint64_t, std::vector<void*>> g_cached_blocks;  // guarded by g_counted_mutex
int64_t g_cached_bytes[kMaxDevices] = {};                          // guarded by g_counted_mutex

uint64_t cache_key(int dev, int64_t size) {
  return (static_cast<uint64_t>(dev) << 48) | static_cast<uint64_t>(size);
}

void counted_delete(void* ptr) {
  if (ptr != nullptr) {
    std::lock_guard<std::mutex> lock(g_counted_mutex);
    auto it = g_counted.find(ptr);
    if (it != g_counted.end()) {
      const int64_t size = it->second.first;
      const int dev = it->second.second;
      g_allocated[dev] -= size;
      g_free_count[dev] += 1;
      g_counted.erase(it);
      if (size >= kCachedMinBlock && g_cached_bytes[dev] + size <= g_peak[dev].load()) {
        g_cached_blocks[cache_key(dev, size)].push_back(ptr);
        g_cached_bytes[dev] += size;
        return;
      }
    }
  }
  g_cpu_allocator->raw_deleter()(ptr);
}

struct CountingAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    int dev = t_alloc_device;
    if (dev < 0 || n == 0) return g_cpu_allocator->allocate(n);
    const int64_t size = static_cast<int64_t>(rounded(n));
    void* ptr = nullptr;
    if (size >= kCachedMinBlock) {
      std::lock_guard<std::mutex> lock(g_counted_mutex);
      auto it = g_cached_blocks.find(cache_key(dev, size));
      if (it != g_cached_blocks.end() && !it->second.empty()) {
        ptr = it->second.back();
        it->second.pop_back();
        g_cached_bytes[dev] -= size;
      }
    }
    if (ptr == nullptr) {
      // a cacheable block is allocated at its rounded size, so any request of that size fits
      ptr = g_cpu_allocator->raw_allocate(size >= kCachedMinBlock ? static_cast<size_t>(size) : n);
    }
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
extern "C" int devfix_vgpu_set_alloc_device(int d) { return switch_alloc_device(d); }
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
// torch.cuda.empty_cache(): the cached blocks go back to the OS.
extern "C" void devfix_vgpu_release_cached() {
  std::unordered_map<uint64_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(g_counted_mutex);
    blocks.swap(g_cached_blocks);
    for (int64_t& bytes : g_cached_bytes) bytes = 0;
  }
  for (auto& entry : blocks) {
    for (void* ptr : entry.second) g_cpu_allocator->raw_deleter()(ptr);
  }
}
extern "C" int64_t devfix_vgpu_cached_bytes(int d) {
  if (d < 0 || d >= kMaxDevices) return 0;
  std::lock_guard<std::mutex> lock(g_counted_mutex);
  return g_cached_bytes[d];
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
  return PyLong_FromLong(switch_alloc_device(static_cast<int>(d)));
}
PyMethodDef g_py_methods[] = {
    {"set_alloc_device", py_set_alloc_device, METH_O,
     "set_alloc_device(k) -> previous: count CPU allocations against cuda:k (-1: none)"},
    {nullptr, nullptr, 0, nullptr}};
}  // namespace

extern "C" PyObject* devfix_vgpu_py_set_alloc_device() {
  return PyCFunction_New(&g_py_methods[0], nullptr);
}

namespace {
// {name: builtin} for a table of methods: how the runtime fetches a group of the shim's
// builtins through ctypes.PyDLL (the GIL is held).
PyObject* builtins_dict(PyMethodDef* methods) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  for (PyMethodDef* m = methods; m->ml_name != nullptr; ++m) {
    PyObject* f = PyCFunction_New(m, nullptr);
    if (f == nullptr || PyDict_SetItemString(out, m->ml_name, f) < 0) {
      Py_XDECREF(f);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(f);
  }
  return out;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Provenance: where each tensor's device was decided, as a site id stored in the TensorImpl
// (c10::BackendMeta, which views, detach and shallow copies carry along).
//
// A RecordFunction observer sees every aten op: an output without a site takes the site of the
// first input on its device (ops propagate placement); an output on a device none of the
// inputs is on (`.to()`, `.cuda()`, `.cpu()`) gets a new "moved" site, and an output of an op
// with no placed input (a factory) a new "created" site. A new site is the innermost frame of
// the user's code on the calling thread's Python stack; file names are classified once by a
// Python callable (user code, library, or the runtime itself). Nothing here runs Python on
// the per-op path: the GIL is taken only to read the stack for a new site.
namespace {

enum SiteKind : int { kCreated = 0, kMoved = 1 };

struct ProvMeta final : public c10::BackendMeta {
  explicit ProvMeta(int32_t s) : site(s) {}
  const int32_t site;
};

struct Site {
  PyObject* filename;  // strong references: sites live as long as the process
  int line;
  PyObject* function;
  std::string op;
  int kind;
  int parent;
  PyObject* via;  // qualified name of the library function the user's line called, or None
  c10::intrusive_ptr<c10::BackendMeta> meta;
};

struct SiteKey {
  PyObject* code;
  int line;
  int kind;
  int parent;
  const std::string* op;
  PyObject* via;
  bool operator==(const SiteKey& o) const {
    return code == o.code && line == o.line && kind == o.kind && parent == o.parent &&
           op == o.op && via == o.via;
  }
};

struct SiteKeyHash {
  size_t operator()(const SiteKey& k) const {
    size_t h = std::hash<const void*>()(k.code);
    h = h * 31 + std::hash<int>()(k.line);
    h = h * 31 + std::hash<int>()(k.kind * 1000003 + k.parent);
    h = h * 31 + std::hash<const void*>()(k.op);
    h = h * 31 + std::hash<const void*>()(k.via);
    return h;
  }
};

std::mutex g_site_mutex;  // guards the tables below (taken with the GIL held, never the reverse)
std::vector<Site> g_sites;
std::unordered_map<SiteKey, int, SiteKeyHash> g_site_index;
std::unordered_set<std::string> g_op_names;
std::unordered_map<PyObject*, int> g_file_class;  // filename -> 0 library, 1 user, 2 runtime
PyObject* g_classify = nullptr;                   // Python: filename -> 0 / 1 / 2

int32_t site_of(const c10::TensorImpl* impl) {
  auto* meta = const_cast<c10::TensorImpl*>(impl)->get_backend_meta();
  if (meta == nullptr) return -1;
  auto* prov = dynamic_cast<ProvMeta*>(meta);
  return prov ? prov->site : -1;
}

void set_site(c10::TensorImpl* impl, int32_t site) {
  c10::intrusive_ptr<c10::BackendMeta> meta;
  {
    std::lock_guard<std::mutex> lock(g_site_mutex);
    if (site < 0 || site >= static_cast<int32_t>(g_sites.size())) return;
    meta = g_sites[site].meta;
  }
  impl->set_backend_meta(std::move(meta));
}

#if PY_VERSION_HEX >= 0x030D0000
#define DEVFIX_PY_FINALIZING() Py_IsFinalizing()
#else
#define DEVFIX_PY_FINALIZING() _Py_IsFinalizing()
#endif

// Needs the GIL. 0 library, 1 user code, 2 the runtime itself.
int file_class(PyObject* filename) {
  auto it = g_file_class.find(filename);
  if (it != g_file_class.end()) return it->second;
  int cls = 0;
  if (g_classify != nullptr) {
    PyObject* r = PyObject_CallOneArg(g_classify, filename);
    if (r == nullptr) {
      PyErr_Clear();
    } else {
      cls = static_cast<int>(PyLong_AsLong(r));
      if (cls == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        cls = 0;
      }
      Py_DECREF(r);
    }
  }
  Py_INCREF(filename);  // the key must outlive the cache
  g_file_class.emplace(filename, cls);
  return cls;
}

PyObject* qualname(PyObject* code) {
  PyObject* name = PyObject_GetAttrString(code, "co_qualname");
  if (name == nullptr) {
    PyErr_Clear();
    name = PyObject_GetAttrString(code, "co_name");
    if (name == nullptr) {
      PyErr_Clear();
      Py_INCREF(Py_None);
      name = Py_None;
    }
  }
  return name;  // new reference
}

bool is_call_plumbing(PyObject* code) {
  // Module.__call__'s own frames say nothing about what the user's line asked for.
  PyObject* name = PyObject_GetAttrString(code, "co_name");
  if (name == nullptr) {
    PyErr_Clear();
    return false;
  }
  const char* s = PyUnicode_AsUTF8(name);
  bool plumbing = s != nullptr && (std::strcmp(s, "_wrapped_call_impl") == 0 ||
                                   std::strcmp(s, "_call_impl") == 0);
  if (s == nullptr) PyErr_Clear();
  Py_DECREF(name);
  return plumbing;
}

// Needs the GIL. The site of the innermost user frame of this thread's Python stack, or -1.
// With `skip_runtime`, an op called by the runtime itself (the innermost frame is the
// runtime's) gets none: it computes on the CPU tensors behind the virtual ones.
int capture_site(int kind, int parent, const char* op, bool skip_runtime) {
  PyThreadState* ts = PyThreadState_Get();
  PyFrameObject* frame = PyThreadState_GetFrame(ts);  // new reference or NULL
  bool first = true;
  PyObject* via_code = nullptr;  // borrowed from a frame we still hold below
  PyObject* via_holder = nullptr;  // the code object kept alive for via_code
  int site = -1;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    PyObject* filename = code->co_filename;
    int cls = file_class(filename);
    if (first && skip_runtime && cls == 2) {
      Py_DECREF(code);
      break;
    }
    first = false;
    if (cls == 1) {
      int line = PyFrame_GetLineNumber(frame);
      const std::string* op_name;
      std::lock_guard<std::mutex> lock(g_site_mutex);
      op_name = &*g_op_names.insert(op ? std::string(op) : std::string()).first;
      SiteKey key{reinterpret_cast<PyObject*>(code), line, kind, parent, op_name, via_code};
      auto it = g_site_index.find(key);
      if (it != g_site_index.end()) {
        site = it->second;
        Py_DECREF(code);
      } else {
        Site s;
        s.filename = filename;
        Py_INCREF(filename);
        s.line = line;
        s.function = qualname(reinterpret_cast<PyObject*>(code));
        s.op = *op_name;
        s.kind = kind;
        s.parent = parent;
        s.via = via_code ? qualname(via_code) : (Py_INCREF(Py_None), Py_None);
        site = static_cast<int>(g_sites.size());
        s.meta = c10::make_intrusive<ProvMeta>(site);
        g_sites.push_back(std::move(s));
        // the key holds the code objects: keep them alive so their addresses stay unique
        key.code = reinterpret_cast<PyObject*>(code);  // reference kept
        if (via_code) Py_INCREF(via_code);
        g_site_index.emplace(key, site);
      }
      break;
    }
    if (cls == 0 && !is_call_plumbing(reinterpret_cast<PyObject*>(code))) {
      Py_XDECREF(via_holder);
      via_holder = reinterpret_cast<PyObject*>(code);
      via_code = via_holder;
    } else {
      Py_DECREF(code);
    }
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or NULL
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  Py_XDECREF(via_holder);
  PyErr_Clear();
  return site;
}

// Takes the GIL if this thread has a Python thread state and the interpreter is running.
int capture_site_from_op(int kind, int parent, const char* op, bool skip_runtime) {
  if (!Py_IsInitialized() || DEVFIX_PY_FINALIZING()) return -1;
  PyThreadState* mine = PyGILState_GetThisThreadState();
  if (mine == nullptr) return -1;  // a thread that never ran Python: no user frame
  PyGILState_STATE gil = PyGILState_Ensure();
  int site = capture_site(kind, parent, op, skip_runtime);
  PyGILState_Release(gil);
  return site;
}

constexpr int kMaxPlaced = 4;

using MetaPtr = c10::intrusive_ptr<c10::BackendMeta>;

// Every ProvMeta is a site's own (g_sites keeps a reference for the life of the process), so
// raw pointers to them stay valid.
ProvMeta* meta_of_site(int32_t site) {
  if (site < 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_site_mutex);
  if (site >= static_cast<int32_t>(g_sites.size())) return nullptr;
  return static_cast<ProvMeta*>(g_sites[site].meta.get());
}

ProvMeta* prov_meta(c10::TensorImpl* impl) {
  c10::BackendMeta* meta = impl->get_backend_meta();
  return meta == nullptr ? nullptr : dynamic_cast<ProvMeta*>(meta);
}

void attach(c10::TensorImpl* impl, ProvMeta* meta) {
  impl->set_backend_meta(MetaPtr::reclaim_copy(meta));
}

// What an op's start callback keeps of its inputs for the end callback.
struct OpInputs {
  bool skip = false;  // the runtime's own computation on the CPU tensors behind virtual ones
  int n = 0;          // placed inputs recorded: the first one on each device
  c10::Device devices[kMaxPlaced] = {
      c10::Device(c10::DeviceType::CPU), c10::Device(c10::DeviceType::CPU),
      c10::Device(c10::DeviceType::CPU), c10::Device(c10::DeviceType::CPU)};
  ProvMeta* metas[kMaxPlaced] = {nullptr, nullptr, nullptr, nullptr};
  bool has_first = false;  // the first tensor input, placed or not
  c10::Device first_device = c10::Device(c10::DeviceType::CPU);
  bool has_list = false;
  std::vector<ProvMeta*> first_list;  // the first tensor-list input, element by element
};

thread_local std::vector<OpInputs> t_ops;
thread_local size_t t_depth = 0;  // entries of t_ops in use (kept allocated between ops)

ProvMeta* note_input(OpInputs& in, const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  auto* impl = t.unsafeGetTensorImpl();
  c10::Device d = impl->device();
  if (!in.has_first) {
    in.has_first = true;
    in.first_device = d;
  }
  ProvMeta* meta = prov_meta(impl);
  if (meta == nullptr) return nullptr;
  for (int i = 0; i < in.n; ++i) {
    if (in.devices[i] == d) return meta;
  }
  if (in.n < kMaxPlaced) {
    in.devices[in.n] = d;
    in.metas[in.n] = meta;
    in.n += 1;
  }
  return meta;
}

std::unique_ptr<at::ObserverContext> prov_start(const at::RecordFunction& fn) {
  if (t_depth == t_ops.size()) t_ops.emplace_back();
  OpInputs& in = t_ops[t_depth++];
  in.n = 0;
  in.has_first = false;
  in.has_list = false;
  in.first_list.clear();
  // The runtime computing on the CPU tensors behind virtual ones: the script never sees these
  // results (the virtual result takes its site from the op on the virtual tensors).
  in.skip = t_alloc_device >= 0;
  if (in.skip) return nullptr;
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor()) {
      note_input(in, v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      bool first_list = !in.has_list;
      in.has_list = true;
      for (size_t i = 0; i < list.size(); ++i) {
        ProvMeta* meta = note_input(in, list.get(i));
        if (first_list) in.first_list.push_back(meta);
      }
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) note_input(in, e.toTensor());
      }
    }
  }
  return nullptr;
}

struct OpEnd {
  const at::RecordFunction& fn;
  OpInputs& in;
  bool is_copy;
  int created = -2;  // the op's new "created" site, once computed (-2: not yet)
  int moved = -2;    // its new "moved" site

  ProvMeta* moved_meta() {
    if (moved == -2) {
      int parent = in.n > 0 ? in.metas[0]->site : -1;
      moved = capture_site_from_op(kMoved, parent, fn.name(), false);
    }
    return meta_of_site(moved);
  }

  // The meta an output should get, or none to leave it as it is.
  ProvMeta* meta_for(c10::TensorImpl* impl, ProvMeta* from_list) {
    c10::Device d = impl->device();
    if (is_copy) {
      // `.to()` builds its result with a factory first: the copy's own site replaces the
      // factory's "created" one (the input's on the same device, a new "moved" one across)
      if (d != in.first_device) return moved_meta();
      if (in.n > 0 && in.devices[0] == d) return in.metas[0];
    }
    if (impl->get_backend_meta() != nullptr) return nullptr;  // in-place ops, out=
    if (from_list != nullptr) return from_list;
    for (int i = 0; i < in.n; ++i) {
      if (in.devices[i] == d) return in.metas[i];
    }
    if (in.n > 0) {
      // on a device none of the placed inputs is on: placement decided here
      ProvMeta* meta = moved_meta();
      return meta != nullptr ? meta : in.metas[0];
    }
    if (created == -2) created = capture_site_from_op(kCreated, -1, fn.name(), true);
    return meta_of_site(created);
  }

  void place(const at::Tensor& t, ProvMeta* from_list) {
    if (!t.defined()) return;
    auto* impl = t.unsafeGetTensorImpl();
    ProvMeta* meta = meta_for(impl, from_list);
    if (meta != nullptr && prov_meta(impl) != meta) attach(impl, meta);
  }
};

void prov_end(const at::RecordFunction& fn, at::ObserverContext* /*ctx*/) {
  if (t_depth == 0) return;
  OpInputs& in = t_ops[--t_depth];
  if (in.skip) return;
  const auto& outs = fn.outputs();
  if (outs.empty()) return;
  OpEnd end{fn, in, in.has_first && std::strcmp(fn.name(), "aten::_to_copy") == 0};
  for (const c10::IValue& v : outs) {
    if (v.isTensor()) {
      end.place(v.toTensor(), nullptr);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      bool by_index = in.first_list.size() == list.size();
      for (size_t i = 0; i < list.size(); ++i) {
        end.place(list.get(i), by_index ? in.first_list[i] : nullptr);
      }
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) end.place(e.toTensor(), nullptr);
      }
    }
  }
}

at::CallbackHandle g_prov_handle = 0;

c10::TensorImpl* impl_of(PyObject* arg) {
  void* ptr = PyLong_AsVoidPtr(arg);
  if (ptr == nullptr && PyErr_Occurred()) return nullptr;
  return static_cast<c10::TensorImpl*>(ptr);
}

// prov_install(classify) -> None: start observing ops.
PyObject* py_prov_install(PyObject* /*self*/, PyObject* classify) {
  if (!PyCallable_Check(classify)) {
    PyErr_SetString(PyExc_TypeError, "prov_install expects a callable");
    return nullptr;
  }
  Py_INCREF(classify);
  Py_XSETREF(g_classify, classify);
  if (!g_prov_on.exchange(true)) {
    g_prov_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&prov_start, &prov_end)
            .needsInputs(true)
            .needsOutputs(true)
            .scopes({at::RecordScope::FUNCTION}));
  }
  Py_RETURN_NONE;
}

// prov_of(tensor._cdata) -> site id, or -1.
PyObject* py_prov_of(PyObject* /*self*/, PyObject* arg) {
  auto* impl = impl_of(arg);
  if (impl == nullptr) return nullptr;
  return PyLong_FromLong(site_of(impl));
}

// prov_set(tensor._cdata, site) -> None.
PyObject* py_prov_set(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "prov_set(cdata, site)");
    return nullptr;
  }
  auto* impl = impl_of(args[0]);
  if (impl == nullptr) return nullptr;
  long site = PyLong_AsLong(args[1]);
  if (site == -1 && PyErr_Occurred()) return nullptr;
  set_site(impl, static_cast<int32_t>(site));
  Py_RETURN_NONE;
}

// prov_mark(tensor._cdata, kind, op) -> site id or -1: a new site at the innermost user frame
// of the caller's stack (the tensor's current site becomes its parent).
PyObject* py_prov_mark(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "prov_mark(cdata, kind, op)");
    return nullptr;
  }
  auto* impl = impl_of(args[0]);
  if (impl == nullptr) return nullptr;
  long kind = PyLong_AsLong(args[1]);
  if (kind == -1 && PyErr_Occurred()) return nullptr;
  const char* op = PyUnicode_AsUTF8(args[2]);
  if (op == nullptr) return nullptr;
  int site = capture_site(static_cast<int>(kind), site_of(impl), op, false);
  if (site >= 0) set_site(impl, site);
  return PyLong_FromLong(site);
}

// prov_site(id) -> (filename, line, function, op, kind, parent, via)
PyObject* py_prov_site(PyObject* /*self*/, PyObject* arg) {
  long id = PyLong_AsLong(arg);
  if (id == -1 && PyErr_Occurred()) return nullptr;
  std::lock_guard<std::mutex> lock(g_site_mutex);
  if (id < 0 || id >= static_cast<long>(g_sites.size())) {
    PyErr_SetString(PyExc_IndexError, "no such provenance site");
    return nullptr;
  }
  const Site& s = g_sites[id];
  return Py_BuildValue("(OiOsiiO)", s.filename, s.line, s.function, s.op.c_str(), s.kind,
                       s.parent, s.via);
}

PyMethodDef g_prov_methods[] = {
    {"prov_install", py_prov_install, METH_O, "prov_install(classify): observe every op"},
    {"prov_of", py_prov_of, METH_O, "prov_of(cdata) -> site id or -1"},
    {"prov_set", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_prov_set)),
     METH_FASTCALL, "prov_set(cdata, site)"},
    {"prov_mark", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_prov_mark)),
     METH_FASTCALL, "prov_mark(cdata, kind, op) -> site id or -1"},
    {"prov_site", py_prov_site, METH_O, "prov_site(id) -> (file, line, function, op, kind, parent, via)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

extern "C" PyObject* devfix_vgpu_py_provenance() {
  return builtins_dict(g_prov_methods);
}

// ---------------------------------------------------------------------------------------------
// The fast path: the common op on virtual tensors without a round trip through Python.
//
// For each op whose Python path has nothing to decide but "one device in, the same device out"
// (no special rule, no random numbers, no out= and no in-place alias but `self`), the runtime
// registers this kernel at the Python dispatch key, where torch would otherwise call
// VTensor.__torch_dispatch__. When every tensor argument is a VTensor on one virtual GPU and
// nothing else wants to see the op (a TorchDispatchMode, the Python dispatcher, a functorch
// transform), it does what the Python path does: unwrap, run the CPU kernel with allocations
// counted against the device, wrap each result on that device. Everything else (a mismatch,
// a CPU operand, another tensor subclass) goes to torch's Python fallback unchanged, so the
// texts and rules of the device checks stay in one place.

// torch.Tensor's object and the two functions of torch/csrc/autograd/python_variable.h the fast
// path uses, declared here because that header's pybind11 doubles the shim's build time. The
// runtime turns the fast path on only where sizeof(THPVariable) is torch._C.TensorBase.__basicsize__.
struct THPVariable {
  PyObject_HEAD
  at::Tensor cdata;
  PyObject* backward_hooks = nullptr;
  PyObject* post_accumulate_grad_hooks = nullptr;
};
extern PyObject* THPVariableClass;
PyObject* THPVariable_Wrap(const at::TensorBase& var);

namespace {

bool is_torch_tensor(PyObject* obj) {
  if (THPVariableClass == nullptr) return false;
  return Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(THPVariableClass) ||
         PyObject_IsInstance(obj, THPVariableClass) == 1;
}

const at::Tensor& unpack(PyObject* obj) { return reinterpret_cast<THPVariable*>(obj)->cdata; }

PyTypeObject* g_vtensor_type = nullptr;
PyObject* g_make_vtensor = nullptr;  // _core._mk(elem, device) -> VTensor
PyObject* g_devices = nullptr;       // _core.DEVICES: torch.device per virtual GPU
PyObject* g_elem_name = nullptr;     // "_elem"
PyObject* g_dev_name = nullptr;      // "_dev"
PyObject* g_dtype_name = nullptr;    // "dtype"
PyObject* g_make_wrapper = nullptr;  // torch.Tensor._make_wrapper_subclass
PyObject* g_wrapper_kwnames = nullptr;  // ("strides", "dtype", "device")
std::unique_ptr<torch::Library> g_fast_library;
std::atomic<int64_t> g_fast_taken{0};
std::atomic<int64_t> g_fast_declined{0};

// What torch's Python fallback does: hand the op to __torch_dispatch__ (of the innermost
// TorchDispatchMode, or of the arguments' subclass).
void python_path(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  g_fast_declined.fetch_add(1, std::memory_order_relaxed);
  (*c10::impl::getGlobalPyInterpreter())->dispatch(op, stack);
}

bool nothing_else_intercepts() {
  if (c10::impl::TorchDispatchModeTLS::stack_len() > 0) return false;
  if (c10::impl::PythonDispatcherTLS::get_state() != nullptr) return false;
  // torch's defaults and autocast's keys have done their work above this one; anything else
  // included (functorch, functionalization) would see the CPU computation in the Python path
  auto included = c10::impl::tls_local_dispatch_key_set().included_;
  return (included - c10::default_included_set - c10::autocast_dispatch_keyset).empty();
}

// The VTensor behind `t`, or nullptr when `t` is anything else (a plain tensor, a subclass).
PyObject* vtensor_of(const at::Tensor& t) {
  PyObject* obj = t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj();
  return obj != nullptr && Py_TYPE(obj) == g_vtensor_type ? obj : nullptr;
}

bool plain_values_only(const c10::IValue& v) {
  for (const c10::IValue& e : v.toListRef()) {
    if (!(e.isInt() || e.isDouble() || e.isBool() || e.isSymInt() || e.isNone())) return false;
  }
  return true;
}

// The virtual GPU every tensor argument is on, or -1 to leave the op to the Python path.
int common_device(torch::jit::Stack* stack, size_t first) {
  int device = -1;
  // false for anything but a VTensor on the device of the ones before it
  auto on_device = [&device](const at::Tensor& t) {
    if (vtensor_of(t) == nullptr) return false;
    int d = t.device().index();
    if (device < 0) device = d;
    return d == device;
  };
  for (size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && !on_device(t)) return -1;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (!t.defined() || !on_device(t)) return -1;
      }
    } else if (v.isList()) {
      if (v.isOptionalTensorList() || !plain_values_only(v)) return -1;
    } else if (v.isGenerator() || v.isDevice() || v.isStorage() || v.isObject() ||
               v.isCapsule() || v.isCustomClass()) {
      return -1;
    }
  }
  return device;
}

struct GilHeld {
  PyGILState_STATE state = PyGILState_Ensure();
  GilHeld() = default;
  GilHeld(const GilHeld&) = delete;
  GilHeld& operator=(const GilHeld&) = delete;
  ~GilHeld() { PyGILState_Release(state); }
};

struct GilReleased {
  PyThreadState* saved = PyEval_SaveThread();
  GilReleased() = default;
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;
  ~GilReleased() { PyEval_RestoreThread(saved); }
};

struct AllocDeviceSet {
  int previous;
  explicit AllocDeviceSet(int d) : previous(switch_alloc_device(d)) {}
  AllocDeviceSet(const AllocDeviceSet&) = delete;
  AllocDeviceSet& operator=(const AllocDeviceSet&) = delete;
  ~AllocDeviceSet() { switch_alloc_device(previous); }
};

[[noreturn]] void raise_python_error(const char* what) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  std::string text = what;
  if (value != nullptr) {
    PyObject* str = PyObject_Str(value);
    if (str != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(str);
      if (utf8 != nullptr) text += std::string(": ") + utf8;
      Py_DECREF(str);
    }
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  TORCH_CHECK(false, "devfix virtual GPU: ", text);
}

at::Tensor elem_of(const at::Tensor& wrapper) {
  PyObject* elem = PyObject_GetAttr(vtensor_of(wrapper), g_elem_name);
  if (elem == nullptr || !is_torch_tensor(elem)) {
    Py_XDECREF(elem);
    raise_python_error("a virtual tensor without its CPU tensor");
  }
  at::Tensor out = unpack(elem);
  Py_DECREF(elem);
  return out;
}

PyObject* int_tuple(c10::IntArrayRef values) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(values.size()));
  if (tuple == nullptr) return nullptr;
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* n = PyLong_FromLongLong(values[i]);
    if (n == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), n);
  }
  return tuple;
}

// What _core._mk(elem, device) does for the common result (contiguous or strided, at offset
// 0), without its Python frame and the attribute calls on `elem`; any other result goes
// through _mk itself.
PyObject* make_vtensor(PyObject* cpu, const at::Tensor& elem, PyObject* device) {
  if (elem.storage_offset() != 0 || elem.layout() != c10::kStrided || elem.is_nested()) {
    return PyObject_CallFunctionObjArgs(g_make_vtensor, cpu, device, nullptr);
  }
  PyObject* dtype = PyObject_GetAttr(cpu, g_dtype_name);
  PyObject* sizes = int_tuple(elem.sizes());
  PyObject* strides = int_tuple(elem.strides());
  PyObject* vt = nullptr;
  if (dtype != nullptr && sizes != nullptr && strides != nullptr) {
    PyObject* args[] = {reinterpret_cast<PyObject*>(g_vtensor_type), sizes, strides, dtype, device};
    vt = PyObject_Vectorcall(g_make_wrapper, args, 2, g_wrapper_kwnames);
    if (vt != nullptr && (PyObject_SetAttr(vt, g_elem_name, cpu) < 0 ||
                          PyObject_SetAttr(vt, g_dev_name, device) < 0)) {
      Py_CLEAR(vt);
    }
  }
  Py_XDECREF(dtype);
  Py_XDECREF(sizes);
  Py_XDECREF(strides);
  return vt;
}

at::Tensor wrapped(const at::Tensor& elem, PyObject* device) {
  PyObject* cpu = THPVariable_Wrap(elem);
  if (cpu == nullptr) raise_python_error("wrapping a result");
  PyObject* vt = make_vtensor(cpu, elem, device);
  Py_DECREF(cpu);
  if (vt == nullptr) raise_python_error("wrapping a result");
  at::Tensor out = unpack(vt);
  Py_DECREF(vt);  // the TensorImpl keeps the VTensor (and its _elem) alive from here
  return out;
}

template <bool kReturnsSelf>
void fast_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!nothing_else_intercepts()) return python_path(op, stack);
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  GilHeld gil;
  const int device = common_device(stack, first);
  if (device < 0 || device >= PyList_GET_SIZE(g_devices)) return python_path(op, stack);
  g_fast_taken.fetch_add(1, std::memory_order_relaxed);
  // borrowed: _core.DEVICES is filled once at install and never changes
  PyObject* device_obj = PyList_GET_ITEM(g_devices, device);
  c10::IValue self_arg;
  if (kReturnsSelf) self_arg = (*stack)[first];
  c10::DispatchKeySet keys;
  for (size_t i = first; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor() && v.toTensor().defined()) {
      v = elem_of(v.toTensor());
      keys = keys | v.toTensor().key_set();
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> elems;
      for (const at::Tensor& t : v.toTensorVector()) {
        at::Tensor elem = elem_of(t);
        keys = keys | elem.key_set();
        elems.push_back(std::move(elem));
      }
      v = std::move(elems);
    }
  }
  // below autograd, as inside __torch_dispatch__; a redispatch also skips RecordFunction, so
  // observers see the op on the virtual tensors once, as on a GPU
  keys = keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::ADInplaceOrView);
  {
    GilReleased no_gil;
    AllocDeviceSet counted(device);
    op.redispatchBoxed(keys, stack);
  }
  const size_t nret = op.schema().returns().size();
  if (kReturnsSelf) {
    torch::jit::drop(*stack, nret);
    stack->push_back(std::move(self_arg));
    return;
  }
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) v = wrapped(v.toTensor(), device_obj);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (size_t j = 0; j < list.size(); ++j) out.push_back(wrapped(list.get(j), device_obj));
      v = std::move(out);
    }
  }
}

// fast_install(VTensor, make_vtensor, devices) -> None
PyObject* py_fast_install(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyType_Check(args[0]) || !PyList_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "fast_install(VTensor, make_vtensor, devices)");
    return nullptr;
  }
  Py_INCREF(args[0]);
  Py_INCREF(args[1]);
  Py_INCREF(args[2]);
  g_vtensor_type = reinterpret_cast<PyTypeObject*>(args[0]);
  g_make_vtensor = args[1];
  g_devices = args[2];
  g_elem_name = PyUnicode_InternFromString("_elem");
  g_dev_name = PyUnicode_InternFromString("_dev");
  g_dtype_name = PyUnicode_InternFromString("dtype");
  g_make_wrapper = PyObject_GetAttrString(args[0], "_make_wrapper_subclass");
  g_wrapper_kwnames = Py_BuildValue("(sss)", "strides", "dtype", "device");
  if (g_elem_name == nullptr || g_dev_name == nullptr || g_dtype_name == nullptr ||
      g_make_wrapper == nullptr || g_wrapper_kwnames == nullptr) {
    return nullptr;
  }
  if (!g_fast_library) {
    g_fast_library = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::Python, __FILE__, __LINE__);
  }
  Py_RETURN_NONE;
}

// fast_add("add.Tensor", returns_self) -> None: take the op's common case off the Python path.
PyObject* py_fast_add(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "fast_add(name, returns_self)");
    return nullptr;
  }
  if (!g_fast_library) {
    PyErr_SetString(PyExc_RuntimeError, "fast_add before fast_install");
    return nullptr;
  }
  const char* name = PyUnicode_AsUTF8(args[0]);
  if (name == nullptr) return nullptr;
  int returns_self = PyObject_IsTrue(args[1]);
  if (returns_self < 0) return nullptr;
  try {
    if (returns_self) {
      g_fast_library->impl(name, torch::CppFunction::makeFromBoxedFunction<&fast_kernel<true>>());
    } else {
      g_fast_library->impl(name, torch::CppFunction::makeFromBoxedFunction<&fast_kernel<false>>());
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// fast_remove() -> None: every op back on the Python path (the benchmark's A/B, the tests).
PyObject* py_fast_remove(PyObject* /*self*/, PyObject* /*unused*/) {
  g_fast_library.reset();
  Py_RETURN_NONE;
}

// fast_layout() -> sizeof(THPVariable) as declared here, to compare with torch.Tensor's.
PyObject* py_fast_layout(PyObject* /*self*/, PyObject* /*unused*/) {
  return PyLong_FromSize_t(sizeof(THPVariable));
}

// fast_counts() -> (ops taken, ops left to the Python path) since the process started.
PyObject* py_fast_counts(PyObject* /*self*/, PyObject* /*unused*/) {
  return Py_BuildValue("(LL)", static_cast<long long>(g_fast_taken.load()),
                       static_cast<long long>(g_fast_declined.load()));
}

PyMethodDef g_fast_methods[] = {
    {"fast_install", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_fast_install)),
     METH_FASTCALL, "fast_install(VTensor, make_vtensor, devices)"},
    {"fast_add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_fast_add)),
     METH_FASTCALL, "fast_add(name, returns_self)"},
    {"fast_remove", py_fast_remove, METH_NOARGS, "fast_remove(): all ops back on the Python path"},
    {"fast_layout", py_fast_layout, METH_NOARGS, "fast_layout() -> sizeof(THPVariable)"},
    {"fast_counts", py_fast_counts, METH_NOARGS, "fast_counts() -> (taken, declined)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

extern "C" PyObject* devfix_vgpu_py_fast_path() {
  return builtins_dict(g_fast_methods);
}
