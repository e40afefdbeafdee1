// Collectives on CUDA tensors through pinned host copies (host_staging.h)
#include "backend/host_staging.h"

#include <c10/util/Exception.h>

namespace ringreduce {

std::optional<c10::Device> deviceOfCall(const CallSite& site, const std::vector<at::Tensor>& a,
                                        const std::vector<at::Tensor>& b) {
  std::optional<c10::Device> found;
  bool anyHost = false;
  for (const std::vector<at::Tensor>* list : {&a, &b}) {
    for (const at::Tensor& t : *list) {
      if (!t.defined()) continue;
      if (!t.is_cuda()) {
        anyHost = true;
        continue;
      }
      TORCH_CHECK_VALUE(!found || *found == t.device(), "ringreduce: ", site.op, " on rank ",
                        site.rank, ": tensors on ", *found, " and ", t.device(),
                        "; one call's tensors must all be on one device");
      found = t.device();
    }
  }
  TORCH_CHECK_VALUE(!found || !anyHost, "ringreduce: ", site.op, " on rank ", site.rank,
                    ": tensors on ", *found,
                    " and on the CPU; one call's tensors must all be on one device");
  return found;
}

at::Tensor HostStaging::shadow(const at::Tensor& t, bool in, bool out) {
  if (!t.defined() || !t.is_cuda()) return t;
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "ringreduce: only dense (strided) CUDA tensors "
                    "are supported, got layout ", t.layout());
  if (out) checkWritable(t, site_, in ? "input" : "output");
  at::Tensor host = pinnedLike(t);
  if (in) call_->copiesIn.emplace_back(t, host);
  if (out) call_->copiesOut.emplace_back(host, t);
  call_->shadows.emplace_back(host.unsafeGetTensorImpl(), t);
  deviceTensors_.push_back(t);
  return host;
}

// Outputs a collective writes whole must be apart on the device, where the
// host form's check cannot see it: their shadows always are, and copying
// them back would overwrite one result with another without a word. Before
// anything is staged, as the host forms refuse such host tensors. (An
// allreduce_coalesced's tensors are read and written: views that share
// elements are taken there, as on the host.)
void HostStaging::checkDeviceOutputsApart(const std::vector<at::Tensor>& outputs) const {
  if (outputs.size() < 2) return;
  std::vector<at::Tensor> written;
  written.reserve(outputs.size());
  for (const at::Tensor& t : outputs) {
    if (t.defined() && t.is_cuda()) written.push_back(t);
  }
  // An undefined or host tensor among them: the host form refuses the call.
  if (written.size() == outputs.size()) checkOutputsApart(written, site_);
}

std::vector<at::Tensor> HostStaging::map(const std::vector<at::Tensor>& ts, bool in, bool out) {
  if (out && !in) checkDeviceOutputsApart(ts);
  std::vector<at::Tensor> mapped;
  mapped.reserve(ts.size());
  for (const at::Tensor& t : ts) mapped.push_back(shadow(t, in, out));
  return mapped;
}

std::vector<std::vector<at::Tensor>> HostStaging::read(
    const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> mapped;
  for (const auto& list : lists) mapped.push_back(map(list, true, false));
  return mapped;
}

std::vector<std::vector<at::Tensor>> HostStaging::write(
    const std::vector<std::vector<at::Tensor>>& lists) {
  // Every list's tensors together (all_gather_coalesced's, rank by rank),
  // numbered as one list.
  if (lists.size() > 1) {
    std::vector<at::Tensor> all;
    for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
    checkDeviceOutputsApart(all);
  }
  std::vector<std::vector<at::Tensor>> mapped;
  for (const auto& list : lists) mapped.push_back(map(list, false, true));
  return mapped;
}

std::vector<at::Tensor> HostStaging::deviceOutputs(const DeviceCall& call,
                                                   const std::vector<at::Tensor>& outputs) {
  std::vector<at::Tensor> mapped;
  mapped.reserve(outputs.size());
  for (const at::Tensor& t : outputs) {
    at::Tensor device = t;
    for (const auto& [impl, original] : call.shadows) {
      if (t.defined() && t.unsafeGetTensorImpl() == impl) device = original;
    }
    mapped.push_back(device);
  }
  return mapped;
}

}  // namespace ringreduce
