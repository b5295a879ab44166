// Lays a forward's arrays out one after another in one workspace. Run once with
// a null base to measure (every pointer null, size() the bytes or elements
// needed), then with the real base: the same calls give the same offsets.
#pragma once

#include <cstddef>

namespace encoder_kit {

template <class T>
class WorkspaceCarver {
 public:
  // align: each array starts at a multiple of this many T from base.
  WorkspaceCarver(T* base, size_t align) : base_(base), align_(align) {}
  // n T's: the next array, or nullptr while measuring.
  T* take(size_t n) {
    T* ptr = base_ ? base_ + off_ : nullptr;
    off_ += (n + align_ - 1) / align_ * align_;
    return ptr;
  }
  // n U's carved from a byte workspace (WorkspaceCarver<char>).
  template <class U>
  U* take_as(size_t n) {
    return reinterpret_cast<U*>(take(n * sizeof(U)));
  }
  // The T's taken so far, alignment included.
  size_t size() const { return off_; }

 private:
  T* base_;
  size_t align_;
  size_t off_ = 0;
};

}  // namespace encoder_kit
