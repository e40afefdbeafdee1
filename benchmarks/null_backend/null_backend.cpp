// A c10d backend that moves nothing: every call returns a completed Work at
// once and leaves every tensor as it found it. Timed through
// torch.distributed, its calls are what any C++ backend pays before and
// after its own work (torch's Python, the dispatcher, the Work and its
// future, with the caches the caller left), at every size.
//
// Why not torch's own `fake` backend: it fills the outputs of the gathers,
// scatters, reduce-scatters and all-to-alls with copies of the inputs
// (FakeProcessGroup.hpp), so from 64 KiB its calls grow with the bytes by
// copies no backend has to make, and it stops being a floor there.
//
// Built by benchmarks/null_backend/__init__.py (torch.utils.cpp_extension);
// a benchmark helper, not part of the product.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

namespace {

using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;
using Tensors = std::vector<at::Tensor>;

class DoneWork : public Work {
 public:
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
    future->markCompleted();
    return future;
  }
};

WorkPtr done() { return c10::make_intrusive<DoneWork>(); }

class NullBackend : public c10d::Backend {
 public:
  NullBackend(int rank, int size) : Backend(rank, size) {}

  const std::string getBackendName() const override { return "null"; }

  WorkPtr broadcast(Tensors&, const c10d::BroadcastOptions&) override { return done(); }
  WorkPtr allreduce(Tensors&, const c10d::AllreduceOptions&) override { return done(); }
  WorkPtr allreduce_coalesced(Tensors&, const c10d::AllreduceCoalescedOptions&) override {
    return done();
  }
  WorkPtr reduce(Tensors&, const c10d::ReduceOptions&) override { return done(); }
  WorkPtr allgather(std::vector<Tensors>&, Tensors&, const c10d::AllgatherOptions&) override {
    return done();
  }
  WorkPtr _allgather_base(at::Tensor&, at::Tensor&, const c10d::AllgatherOptions&) override {
    return done();
  }
  WorkPtr allgather_coalesced(std::vector<Tensors>&, Tensors&,
                              const c10d::AllgatherOptions&) override {
    return done();
  }
  WorkPtr allgather_into_tensor_coalesced(Tensors&, Tensors&,
                                          const c10d::AllgatherOptions&) override {
    return done();
  }
  WorkPtr gather(std::vector<Tensors>&, Tensors&, const c10d::GatherOptions&) override {
    return done();
  }
  WorkPtr scatter(Tensors&, std::vector<Tensors>&, const c10d::ScatterOptions&) override {
    return done();
  }
  WorkPtr reduce_scatter(Tensors&, std::vector<Tensors>&,
                         const c10d::ReduceScatterOptions&) override {
    return done();
  }
  WorkPtr _reduce_scatter_base(at::Tensor&, at::Tensor&,
                               const c10d::ReduceScatterOptions&) override {
    return done();
  }
  WorkPtr reduce_scatter_tensor_coalesced(Tensors&, Tensors&,
                                          const c10d::ReduceScatterOptions&) override {
    return done();
  }
  WorkPtr alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&, std::vector<int64_t>&,
                        const c10d::AllToAllOptions&) override {
    return done();
  }
  WorkPtr alltoall(Tensors&, Tensors&, const c10d::AllToAllOptions&) override { return done(); }
  WorkPtr send(Tensors&, int, int) override { return done(); }
  WorkPtr recv(Tensors&, int, int) override { return done(); }
  WorkPtr recvAnysource(Tensors&, int) override { return done(); }
  WorkPtr barrier(const c10d::BarrierOptions&) override { return done(); }
  // The coalescing manager: what was issued inside it is already done.
  void startCoalescing() override {}
  WorkPtr endCoalescing() override { return done(); }
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // The base class must be known to pybind11 before a class derives from it.
  pybind11::module_::import("torch.distributed");
  pybind11::class_<NullBackend, c10d::Backend, c10::intrusive_ptr<NullBackend>>(m, "NullBackend")
      .def(pybind11::init<int, int>(), pybind11::arg("rank"), pybind11::arg("size"));
}
