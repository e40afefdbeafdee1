// Getting tensor memory into the contiguous layout the algorithms work on,
// and results back into the caller's tensors.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "backend/dtype_mapping.h"
#include "core/base/data_type.h"
#include "core/base/inline_vector.h"

namespace ringreduce {

// Whether the tensor's memory is its values, in order: contiguous, and not a
// lazy conj/neg view.
inline bool plainContiguous(const at::Tensor& tensor) {
  return tensor.is_contiguous() && !tensor.is_conj() && !tensor.is_neg();
}

// Whether two tensors' memory shares any byte.
inline bool sharesMemory(const at::Tensor& a, const at::Tensor& b) {
  const auto* aBegin = static_cast<const char*>(a.data_ptr());
  const auto* bBegin = static_cast<const char*>(b.data_ptr());
  return aBegin < bBegin + b.nbytes() && bBegin < aBegin + a.nbytes();
}

// The memory of a set of tensors, to ask whether another tensor shares any
// of it: sorted spans, so a block of many tensors costs a sort rather than
// a comparison of every pair.
class MemorySpans {
 public:
  using Span = std::pair<const char*, const char*>;  // begin, end
  // Inline for a host's few ranks' tensors: no allocation per call.
  using Spans = InlineVector<Span, 8>;

  explicit MemorySpans(at::TensorList tensors) : MemorySpans(spansOf(tensors)) {}
  // Spans already read from their tensors (a caller that walks them anyway).
  explicit MemorySpans(Spans spans) : spans_(std::move(spans)) {
    std::sort(spans_.begin(), spans_.end());
    const char* most = nullptr;
    for (auto& span : spans_) {  // from here on: the furthest end up to this span
      most = std::max(most, span.second);
      span.second = most;
    }
  }
  // Whether `tensor` shares a byte with any of the set.
  bool overlaps(const at::Tensor& tensor) const {
    const auto* begin = static_cast<const char*>(tensor.data_ptr());
    const char* end = begin + tensor.nbytes();
    // The spans that start before `end`; one of them reaches past `begin`?
    const auto after = std::lower_bound(
        spans_.begin(), spans_.end(), end,
        [](const Span& span, const char* at) {
          return span.first < at;
        });
    return begin < end && after != spans_.begin() && std::prev(after)->second > begin;
  }

  static Span spanOf(const at::Tensor& t) {
    const auto* begin = static_cast<const char*>(t.data_ptr());
    return {begin, begin + t.nbytes()};
  }

 private:
  static Spans spansOf(at::TensorList tensors) {
    Spans spans;
    spans.reserve(tensors.size());
    for (const at::Tensor& t : tensors) spans.push_back(spanOf(t));
    return spans;
  }

  Spans spans_;  // begin, furthest end so far
};

// The list's tensors' memory, each read or written where it is: false when
// one of them is not its values in order or shares memory with `apart`
// (read while they are written, or the other way round), which then go
// through a flat copy. `pointers` gets one per tensor.
template <typename Pointers>
bool pointersInPlace(const std::vector<at::Tensor>& list, const at::Tensor& apart,
                     Pointers& pointers) {
  pointers.clear();
  pointers.reserve(list.size());
  for (const at::Tensor& t : list) {
    if (!plainContiguous(t) || (apart.defined() && sharesMemory(t, apart))) return false;
    pointers.push_back(t.data_ptr());
  }
  return true;
}

// Runs `fn` on a pointer to the tensor's data laid out contiguously; copies
// back when a temporary was needed (non-contiguous, or conj/neg views).
template <typename Fn>
void withContiguous(const at::Tensor& tensor, Fn fn) {
  if (plainContiguous(tensor)) {
    fn(tensor.data_ptr());
    return;
  }
  at::Tensor staged = tensor.resolve_conj().resolve_neg().contiguous();
  fn(staged.data_ptr());
  tensor.copy_(staged);
}

// The tensor's values, contiguous (the tensor itself when it already is).
inline at::Tensor contiguousInput(const at::Tensor& tensor) {
  // The same tensor either way; asked first, it skips three dispatcher
  // calls at every send and small collective.
  if (plainContiguous(tensor)) return tensor;
  return tensor.resolve_conj().resolve_neg().contiguous();
}

// One flat, contiguous tensor holding the list's tensors back to back.
inline at::Tensor flattenList(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const at::Tensor& t : list) flat.push_back(contiguousInput(t).reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive pieces of `flat` into the list's tensors.
inline void unflattenInto(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  int64_t offset = 0;
  for (const at::Tensor& t : list) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

// "16 x float32": built at every queued collective, so without a stream
// (an ostringstream's locale set-up cost more than the rest). The dtype's
// name is the one the collectives run on the caller's thread and the sends
// and receives record (dataTypeName), so an op reads alike in the trace and
// the logs whichever way it ran; a dtype moved only as bytes keeps torch's
// name ("Float8_e4m3fn").
inline std::string describeTensor(const at::Tensor& t) {
  std::string s = std::to_string(t.numel());
  s += " x ";
  const at::ScalarType type = t.scalar_type();
  s += isSupportedScalarType(type) ? dataTypeName(toDataType(type, "trace"))
                                   : c10::toString(type);
  return s;
}

}  // namespace ringreduce
