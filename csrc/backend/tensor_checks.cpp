// Argument checks on the caller's thread before anything is queued (tensor_checks.h)
#include "backend/tensor_checks.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/contiguous_buffers.h"
#include "backend/dtype_mapping.h"

namespace ringreduce {

namespace {
std::string where(const CallSite& site) {
  return std::string("ringreduce: ") + site.op + " on rank " + std::to_string(site.rank) + ": ";
}
}  // namespace

void checkSingleTensor(const std::vector<at::Tensor>& tensors, const CallSite& site) {
  TORCH_CHECK_VALUE(tensors.size() == 1, where(site), "expected exactly one tensor, got ",
                    tensors.size(), " (one tensor per process; the multi-device list form is "
                    "not supported)");
}

void checkHostTensor(const at::Tensor& tensor, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(tensor.defined(), where(site), role, " tensor is undefined");
  TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, where(site), role, " tensor has layout ",
                    tensor.layout(), "; only dense (strided) tensors are supported");
  // A call whose tensors are all on one CUDA device is staged before these
  // checks (host_staging.h); a CUDA tensor here came with CPU tensors.
  TORCH_CHECK_VALUE(!tensor.is_cuda(), where(site), role, " tensor is on ", tensor.device(),
                    " while other tensors of the call are on the CPU; one call's tensors "
                    "must all be on one device");
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), where(site), role, " tensor is on ",
                    tensor.device(), "; ringreduce takes CPU tensors");
}

void checkReducibleDtype(const at::Tensor& tensor, const CallSite& site) {
  TORCH_CHECK_TYPE(isSupportedScalarType(tensor.scalar_type()), where(site),
                   "tensor has unsupported dtype ", tensor.scalar_type(),
                   " (supported: float32, float64, float16, bfloat16, int8, uint8, int16, "
                   "int32, int64, bool, complex64, complex128)");
}

void checkListLike(const std::vector<at::Tensor>& list, size_t expectedLength,
                   const at::Tensor& like, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(list.size() == expectedLength, where(site), role, " list has ", list.size(),
                    " tensors, expected one per rank (", expectedLength, ")");
  for (const at::Tensor& t : list) {
    checkHostTensor(t, site, role);
    checkSameDtype(t, like, site, role, "input");
    checkNumel(t, like.numel(), site, role);
  }
  // Inputs are only read, so they may share memory (one tensor sent to
  // every rank, as gloo takes it); outputs may not.
  if (std::string(role) != "input") checkNoOverlap(list, site, role);
}

void checkDeviceTensor(const at::Tensor& tensor, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(tensor.defined(), where(site), role, " tensor is undefined");
  TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, where(site), role, " tensor has layout ",
                    tensor.layout(), "; only dense (strided) tensors are supported");
}

namespace {
// An expanded (stride 0) output would receive several results in one place.
constexpr const char* kSelfOverlap =
    " has overlapping memory (an expanded view?); results would overwrite each other";
}  // namespace

void checkWritable(const at::Tensor& tensor, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(at::has_internal_overlap(tensor) != at::MemOverlap::Yes, where(site), role,
                    " tensor", kSelfOverlap);
}

void checkWritable(const at::Tensor& tensor, size_t index, const CallSite& site,
                   const char* role) {
  TORCH_CHECK_VALUE(at::has_internal_overlap(tensor) != at::MemOverlap::Yes, where(site), role,
                    " tensor ", index, kSelfOverlap);
}

namespace {

// Calls fn(offset) with the storage byte offset of each of the tensor's
// elements, in any order.
template <typename Fn>
void forEachElementOffset(const at::Tensor& t, Fn fn) {
  const int64_t itemsize = static_cast<int64_t>(t.element_size());
  const int64_t base = t.storage_offset() * itemsize;
  const int64_t dims = t.dim();
  if (dims == 0) {
    fn(base);
    return;
  }
  std::vector<int64_t> index(static_cast<size_t>(dims), 0);
  const int64_t last = dims - 1;
  while (true) {
    int64_t offset = base;
    for (int64_t d = 0; d < last; ++d) offset += index[d] * t.stride(d) * itemsize;
    for (int64_t k = 0; k < t.size(last); ++k) fn(offset + k * t.stride(last) * itemsize);
    int64_t d = last - 1;
    while (d >= 0 && ++index[d] == t.size(d)) index[d--] = 0;
    if (d < 0) return;
  }
}

// A view whose elements lie at equal steps in its storage (a column of a
// matrix, every k-th element): byte offset of the first, step, count.
struct EvenView {
  int64_t first;
  int64_t step;
  int64_t count;
};

std::optional<EvenView> asEvenView(const at::Tensor& t) {
  const int64_t itemsize = static_cast<int64_t>(t.element_size());
  int64_t step = 0, count = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {  // innermost first
    if (t.size(d) == 1) continue;
    if (count == 1) {
      step = t.stride(d);
      count = t.size(d);
    } else if (t.stride(d) == step * count) {
      count *= t.size(d);
    } else {
      return std::nullopt;
    }
  }
  return EvenView{t.storage_offset() * itemsize, step * itemsize, count};
}

// Whether two evenly stepped views of one storage share a byte, in constant
// time; nullopt when they are not both such views with one step.
std::optional<bool> evenViewsShare(const at::Tensor& a, const at::Tensor& b) {
  const int64_t itemsize = static_cast<int64_t>(a.element_size());
  const auto va = asEvenView(a), vb = asEvenView(b);
  if (!va || !vb || static_cast<int64_t>(b.element_size()) != itemsize) return std::nullopt;
  const int64_t step = va->count > 1 ? va->step : vb->step;
  if ((va->count > 1 && vb->count > 1 && va->step != vb->step) ||
      (step < itemsize && (va->count > 1 || vb->count > 1)))
    return std::nullopt;
  // b's k-th element lies at delta + (k - m) * step from a's m-th: they meet
  // when that distance is under an element for some q = k - m in range.
  const int64_t delta = vb->first - va->first;
  if (va->count == 1 && vb->count == 1) return delta > -itemsize && delta < itemsize;
  int64_t q = -delta / step;
  if (-delta % step != 0 && -delta < 0) --q;  // floor
  for (int64_t c : {q, q + 1}) {
    const int64_t distance = delta + c * step;
    if (c > -va->count && c < vb->count && distance > -itemsize && distance < itemsize) return true;
  }
  return false;
}

// The most cells the exact test below marks (a 32 MiB bitmap).
constexpr int64_t kMaxMarkedSpan = int64_t{1} << 28;

// Strided views of one storage that torch cannot tell apart (columns of one
// matrix, say): the first two of them that share a byte (a view may be its
// own partner: one that overlaps itself), {SIZE_MAX, SIZE_MAX} if none, or
// nullopt when they span too much to check. Marks every element of the views
// in a bitmap over the bytes they span: one pass over their elements.
std::optional<std::pair<size_t, size_t>> firstSharedElement(
    const std::vector<at::Tensor>& list, const std::vector<size_t>& views) {
  // The span, from sizes and strides alone; cells of an element's size when
  // every offset and stride is a multiple of it, else of a byte.
  int64_t low = INT64_MAX, high = INT64_MIN;
  int64_t unit = static_cast<int64_t>(list[views[0]].element_size());
  for (size_t i : views) {
    const at::Tensor& t = list[i];
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    int64_t first = t.storage_offset() * itemsize, last = first;
    if (first % unit != 0 || itemsize != unit) unit = 1;
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t reach = (t.size(d) - 1) * t.stride(d) * itemsize;
      (reach < 0 ? first : last) += reach;
      if ((t.stride(d) * itemsize) % unit != 0) unit = 1;
    }
    low = std::min(low, first);
    high = std::max(high, last + itemsize);
  }
  const int64_t cellsTotal = (high - low) / unit;
  if (cellsTotal > kMaxMarkedSpan) return std::nullopt;
  std::vector<uint64_t> marked(static_cast<size_t>(cellsTotal / 64 + 1), 0);
  for (size_t n = 0; n < views.size(); ++n) {
    const at::Tensor& t = list[views[n]];
    const int64_t cells = static_cast<int64_t>(t.element_size()) / unit;
    int64_t hit = -1;
    forEachElementOffset(t, [&](int64_t o) {
      for (int64_t c = 0; c < cells; ++c) {
        const uint64_t cell = static_cast<uint64_t>((o - low) / unit + c);
        uint64_t& word = marked[cell >> 6];
        const uint64_t bit = uint64_t{1} << (cell & 63);
        if ((word & bit) != 0 && hit < 0) hit = o + c * unit;
        word |= bit;
      }
    });
    if (hit < 0) continue;
    for (size_t m = 0; m <= n; ++m) {  // the view that marked that byte first
      bool holds = false;
      const int64_t size = static_cast<int64_t>(list[views[m]].element_size());
      forEachElementOffset(list[views[m]],
                           [&](int64_t o) { holds = holds || (o <= hit && hit < o + size); });
      if (holds) return std::make_pair(views[m], views[n]);
    }
  }
  return std::make_pair(SIZE_MAX, SIZE_MAX);
}

}  // namespace

void checkNoOverlap(const std::vector<at::Tensor>& list, const CallSite& site, const char* role) {
  // Views of one storage torch cannot tell apart ("too hard": strided views):
  // evenly stepped pairs are tested at once, the others by storage, element
  // by element, below.
  std::vector<std::vector<size_t>> unclear;
  for (size_t i = 0; i < list.size(); ++i) {
    checkWritable(list[i], i, site, role);
    for (size_t j = i + 1; j < list.size(); ++j) {
      if (list[i].numel() == 0 || list[j].numel() == 0) continue;
      const at::MemOverlapStatus status = at::get_overlap_status(list[i], list[j]);
      if (status == at::MemOverlapStatus::TooHard &&
          list[i].storage().is_alias_of(list[j].storage())) {
        if (const std::optional<bool> share = evenViewsShare(list[i], list[j])) {
          TORCH_CHECK_VALUE(!*share, where(site), role, " tensors ", i, " and ", j,
                            " share memory; results would overwrite each other");
          continue;
        }
        auto group = std::find_if(unclear.begin(), unclear.end(), [&](const auto& g) {
          return list[g[0]].storage().is_alias_of(list[i].storage());
        });
        if (group == unclear.end()) group = unclear.insert(unclear.end(), std::vector<size_t>{});
        for (size_t k : {i, j})
          if (std::find(group->begin(), group->end(), k) == group->end()) group->push_back(k);
        continue;
      }
      TORCH_CHECK_VALUE(status != at::MemOverlapStatus::Full &&
                            status != at::MemOverlapStatus::Partial,
                        where(site), role, " tensors ", i, " and ", j,
                        " share memory; results would overwrite each other");
    }
  }
  for (std::vector<size_t>& views : unclear) {
    std::sort(views.begin(), views.end());
    const auto pair = firstSharedElement(list, views);
    TORCH_CHECK_VALUE(pair.has_value(), where(site), role, " tensors ", views[0], " and ",
                      views[1], " are strided views of one storage spanning more than ",
                      kMaxMarkedSpan, " elements, too far apart to check for shared memory; "
                      "give them storages of their own");
    if (pair->first == SIZE_MAX) continue;  // apart
    TORCH_CHECK_VALUE(pair->first != pair->second, where(site), role, " tensor ", pair->first,
                      " has overlapping memory; results would overwrite each other");
    TORCH_CHECK_VALUE(false, where(site), role, " tensors ", pair->first, " and ", pair->second,
                      " share memory; results would overwrite each other");
  }
}

bool checkNoOverlapPlain(const std::vector<at::Tensor>& tensors, const CallSite& site,
                         const char* role) {
  struct Span {
    const char* begin;
    const char* end;
    size_t index;
  };
  InlineVector<Span, 8> spans;  // no allocation for a host's few ranks' tensors
  spans.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!plainContiguous(t)) return false;
    if (t.numel() == 0) continue;  // no memory to share
    const MemorySpans::Span span = MemorySpans::spanOf(t);
    spans.push_back({span.first, span.second, i});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  // Sorted by where they begin, a span shares memory with an earlier one
  // exactly when it begins before the furthest end so far.
  const Span* furthest = nullptr;
  for (const Span& span : spans) {
    if (furthest != nullptr) {
      TORCH_CHECK_VALUE(span.begin >= furthest->end, where(site), role, " tensors ",
                        std::min(furthest->index, span.index), " and ",
                        std::max(furthest->index, span.index),
                        " share memory; results would overwrite each other");
    }
    if (furthest == nullptr || span.end > furthest->end) furthest = &span;
  }
  return true;
}

void checkOutputsApart(const std::vector<at::Tensor>& outputs, const CallSite& site) {
  if (!checkNoOverlapPlain(outputs, site, "output")) checkNoOverlap(outputs, site, "output");
}

void checkSameDtype(const at::Tensor& a, const at::Tensor& b, const CallSite& site,
                    const char* roleA, const char* roleB) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), where(site), roleA, " dtype ",
                   a.scalar_type(), " differs from ", roleB, " dtype ", b.scalar_type());
}

void checkNumel(const at::Tensor& tensor, int64_t expected, const CallSite& site,
                const char* role) {
  TORCH_CHECK_VALUE(tensor.numel() == expected, where(site), role, " tensor has ",
                    tensor.numel(), " elements (shape ", tensor.sizes(), "), expected ",
                    expected);
}

void checkRoot(int64_t root, int size, const CallSite& site) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, where(site), "invalid root rank ", root,
                    " for a group of size ", size);
}

}  // namespace ringreduce

namespace ringreduce {

namespace {

// PREMUL_SUM, as NCCL defines it: each rank's input times a factor (a Python
// number or a one-element tensor), then SUM. Floating and complex dtypes
// only: the factor is a real number. NCCLPreMulSumSupplement is the name
// torch 2.11 has; later versions keep it as an alias of PreMulSumSupplement.
Reduction checkPremulSum(const at::Tensor& tensor, const c10d::ReduceOp& op,
                         const CallSite& site) {
  const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK_VALUE(supplement != nullptr, where(site),
                    "PREMUL_SUM without its factor (make it with "
                    "torch.distributed._make_nccl_premul_sum)");
  const DataType type = toDataType(tensor.scalar_type(), site.op);
  TORCH_CHECK_TYPE(at::isFloatingType(tensor.scalar_type()) ||
                       at::isComplexType(tensor.scalar_type()),
                   where(site), "PREMUL_SUM is not defined for ", dataTypeName(type),
                   " (the factor multiplies floating-point or complex values)");
  double factor = supplement->double_factor;
  if (supplement->tensor_factor.defined()) {
    const at::Tensor& f = supplement->tensor_factor;
    TORCH_CHECK_TYPE(!f.is_complex(), where(site), "PREMUL_SUM factor is complex (",
                     f.scalar_type(), "); a real factor is needed");
    factor = f.item<double>();
  }
  return Reduction{type, ReduceOp::Sum, factor};
}

}  // namespace

std::string reductionName(const Reduction& red) {
  if (!red.premul) return reduceOpName(red.op);
  std::ostringstream text;
  text << "PREMUL_SUM(" << *red.premul << ")";
  return text.str();
}

int checkedReduceOp(const Reduction& red) {
  return red.premul ? kPremulSumCode : static_cast<int>(red.op);
}

at::Tensor premultiplied(const at::Tensor& tensor, const Reduction& red) {
  if (!red.premul) return tensor;
  // Contiguous whatever the input's strides (mul would keep a transposed
  // view's): the algorithms read the values in memory order.
  at::Tensor scaled = at::empty(tensor.sizes(), tensor.options().memory_format(
                                                    at::MemoryFormat::Contiguous));
  at::mul_out(scaled, tensor, at::scalar_tensor(*red.premul, at::kDouble));
  return scaled;
}

Reduction checkReduction(const at::Tensor& tensor, const c10d::ReduceOp& op,
                         const CallSite& site) {
  checkReducibleDtype(tensor, site);
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) return checkPremulSum(tensor, op, site);
  Reduction r{toDataType(tensor.scalar_type(), site.op), toReduceOp(op, site.op), std::nullopt};
  TORCH_CHECK_TYPE(reductionSupported(r.type, r.op), where(site), unsupportedReason(r.type, r.op));
  return r;
}

Reduction checkDeviceReduction(const at::Tensor& tensor, const c10d::ReduceOp& op,
                               const CallSite& site) {
  const Reduction red = checkReduction(tensor, op, site);
  TORCH_CHECK_VALUE(!red.premul, where(site),
                    "PREMUL_SUM is not supported on CUDA tensors by ringreduce (it is on CPU "
                    "tensors); multiply by the factor first and use SUM");
  return red;
}

}  // namespace ringreduce
