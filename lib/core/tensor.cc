#include "core/tensor.h"

#include "core/error.h"

namespace dt {

int64_t checked_numel(const Shape& shape, DType dtype, const char* arg_name) {
  if (shape.size() > DT_MAX_DIMS)
    invalid(std::string(arg_name) + ": " + std::to_string(shape.size()) + " dims; accepted: 0 to " +
            std::to_string(DT_MAX_DIMS));
  const int64_t max_bytes = INT64_MAX / 2;  // 63 bits, room for offsets
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1)
      invalid(std::string(arg_name) + "[" + std::to_string(i) + "] = " + std::to_string(shape[i]) +
              "; every dim must be >= 1");
    if (n > max_bytes / shape[i])
      invalid(std::string(arg_name) + " " + shape_str(shape) + " has more elements than fit in 63 bits");
    n *= shape[i];
  }
  if (n > max_bytes / static_cast<int64_t>(dtype_size(dtype)))
    invalid(std::string(arg_name) + " " + shape_str(shape) + " of " + dtype_name(dtype) +
            " has a byte size that does not fit in 63 bits");
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor Tensor::make(const Shape& shape, DType dtype, Device device, MemTag tag, bool zero) {
  Tensor t;
  t.numel_ = checked_numel(shape, dtype, "shape");
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = Storage::create(device, t.nbytes(), tag, zero);
  return t;
}

Tensor Tensor::over(const Shape& shape, DType dtype, std::shared_ptr<Storage> storage) {
  Tensor t;
  t.numel_ = checked_numel(shape, dtype, "shape");
  t.shape_ = shape;
  t.dtype_ = dtype;
  DT_CHECK(storage && storage->bytes() >= t.nbytes(), "the memory holds fewer bytes than shape " + shape_str(shape) +
                                                          " of " + dtype_name(dtype) + " needs");
  DT_CHECK(reinterpret_cast<uintptr_t>(storage->data()) % dtype_size(dtype) == 0,
           std::string("the memory is not aligned to the ") + dtype_name(dtype) + " element size (" +
               std::to_string(dtype_size(dtype)) + " bytes)");
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, MemTag tag) {
  return make(shape, dtype, device, tag, true);
}

Tensor Tensor::uninit(const Shape& shape, DType dtype, Device device, MemTag tag) {
  return make(shape, dtype, device, tag, false);
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? i + n : i;
  DT_CHECK(j >= 0 && j < n, "dim " + std::to_string(i) + " out of range for a tensor of " + std::to_string(n) + " dims");
  return shape_[j];
}

Tensor Tensor::reshape(const Shape& shape) const {
  int64_t n = checked_numel(shape, dtype_, "shape");
  DT_CHECK(n == numel_, "reshape " + shape_str(shape_) + " to " + shape_str(shape) + ": element counts differ");
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  DT_CHECK(ndim() >= 1 && begin >= 0 && begin < end && end <= shape_[0],
           "slice0 [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " + shape_str(shape_));
  Tensor t = *this;
  int64_t row = numel_ / shape_[0];
  t.shape_[0] = end - begin;
  t.numel_ = row * (end - begin);
  t.offset_bytes_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

}  // namespace dt
