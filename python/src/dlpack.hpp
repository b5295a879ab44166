// The DLPack data structures (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h),
// declared here from the public specification instead of depending on the
// header: the legacy DLManagedTensor of DLPack 0.8 (capsule "dltensor") and
// DLManagedTensorVersioned of DLPack 1.0 (capsule "dltensor_versioned").
// Layout and values follow the spec exactly; the static asserts pin the sizes.
#pragma once

#include <cstdint>

namespace encgraph::python::dlpack {

// DLPack 1.0 (the version written into DLManagedTensorVersioned).
inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 0;

enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // NULL: compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

inline constexpr uint64_t kDLPackFlagBitmaskReadOnly = 1ull << 0;

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

static_assert(sizeof(DLDevice) == 8);
static_assert(sizeof(DLDataType) == 4);
static_assert(sizeof(DLTensor) == 48);
static_assert(sizeof(DLManagedTensor) == 64);
static_assert(sizeof(DLManagedTensorVersioned) == 80);

}  // namespace encgraph::python::dlpack
