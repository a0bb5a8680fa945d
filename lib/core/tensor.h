// Tensor: a shape, a dtype and a view into shared storage. Dense and row-major; views
// (reshape, a contiguous slice along dim 0) share the storage and keep it alive.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"

namespace dt {

using Shape = std::vector<int64_t>;

// Element count of `shape`, with every dim >= 1 (a scalar has none) and the element and
// byte counts within 63 bits; throws INVALID_ARGUMENT naming `arg_name` otherwise.
int64_t checked_numel(const Shape& shape, DType dtype, const char* arg_name);
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu(),
                      MemTag tag = MemTag::Workspace);
  // Uninitialized: for scratch that is fully written before it is read.
  static Tensor uninit(const Shape& shape, DType dtype, Device device = Device::cpu(),
                       MemTag tag = MemTag::Workspace);

  // A tensor over all of `storage` from its start (e.g. Storage::borrow); its byte size
  // must hold shape x dtype, and its address be aligned to the element size.
  static Tensor over(const Shape& shape, DType dtype, std::shared_ptr<Storage> storage);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  template <class T> T* data() const { return static_cast<T*>(raw()); }

  // Same storage, new shape of equal element count.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) of dim 0, sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Rows of the last dim when viewed as a matrix: numel / dim(-1).
  int64_t rows() const { return ndim() ? numel_ / shape_.back() : 1; }
  int64_t cols() const { return ndim() ? shape_.back() : 1; }

 private:
  static Tensor make(const Shape& shape, DType dtype, Device device, MemTag tag, bool zero);
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
};

}  // namespace dt
