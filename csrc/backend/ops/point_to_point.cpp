// send, recv and recv from any source. They are posted on the executor
// thread and completed by a poller, so a pending recv never holds up the
// collectives queued after it (isend/irecv, pipelines of stages).
#include <c10/util/Exception.h>

#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/contiguous_buffers.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

void checkTag(int tag, const CallSite& site) {
  TORCH_CHECK_VALUE(tag >= 0, "ringreduce: ", site.op, " on rank ", site.rank,
                    ": tag must be >= 0, got ", tag);
}

void checkPeer(int peer, int size, const CallSite& site) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, "ringreduce: ", site.op, " on rank ", site.rank,
                    ": invalid peer rank ", peer, " for a group of size ", size);
}

// What the trace and the log say of it ("16 x float32 to rank 1, tag 0"),
// kept as fields: a send or receive costs no string.
OpFields messageFields(const OpFields& tensor, OpFields::Direction direction, int peer, int tag) {
  OpFields fields = tensor;
  fields.direction = direction;
  fields.peer = peer;
  fields.tag = tag;
  return fields;
}

// A receive target: the tensor itself when contiguous, else a staging copy
// that `finish` copies back.
struct ReceiveTarget {
  at::Tensor buffer;
  std::function<void()> finish;
};

ReceiveTarget receiveTarget(const at::Tensor& tensor) {
  if (tensor.is_contiguous() && !tensor.is_conj() && !tensor.is_neg()) return {tensor, nullptr};
  at::Tensor staged = at::empty(tensor.sizes(), tensor.options());
  return {staged, [tensor, staged] { tensor.copy_(staged); }};
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                      int tag) {
  const CallSite site{"send", rank_};
  if (auto device = deviceOfCall(site, tensors)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> host = staging.read(tensors);
    return staging.run([&](const Staged& staged) { return send(host, dstRank, tag, staged); });
  }
  return send(tensors, dstRank, tag, nullptr);
}

// The host form of send: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                      int tag, const Staged& staged) {
  const CallSite site{"send", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "input");
  checkPeer(dstRank, size_, site);
  checkTag(tag, site);
  return enqueuePointToPoint(staged, c10d::OpType::SEND, site.op, {tensor},
                             messageFields(fieldsOf(tensor), OpFields::Direction::To, dstRank, tag),
                             [this, tensor, dstRank, tag](const OpContext& ctx) {
                               // Keep the bytes alive and unchanged until the send completes.
                               at::Tensor data = contiguousInput(tensor);
                               PostedMessage posted;
                               posted.request =
                                   comm().transport.isend(dstRank, makeP2PTag(rank_, tag),
                                                          data.data_ptr(), data.nbytes(), ctx);
                               posted.finish = [data] {};
                               return posted;
                             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                      int tag) {
  const CallSite site{"recv", rank_};
  checkPeer(srcRank, size_, site);
  return enqueueReceive(tensors, srcRank, tag, site);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  return enqueueReceive(tensors, -1, tag, CallSite{"recv_anysource", rank_});
}

// A receive from `srcRank`, or from any rank when it is -1 (the tag's source
// bits are then left out of the match).
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueueReceive(std::vector<at::Tensor>& tensors,
                                                                int srcRank, int tag,
                                                                const CallSite& site) {
  if (auto device = deviceOfCall(site, tensors)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> host = staging.write(tensors);
    return staging.run(
        [&](const Staged& staged) { return enqueueReceive(host, srcRank, tag, site, staged); });
  }
  return enqueueReceive(tensors, srcRank, tag, site, nullptr);
}

// The host form of enqueueReceive: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueueReceive(std::vector<at::Tensor>& tensors,
                                                                int srcRank, int tag,
                                                                const CallSite& site,
                                                                const Staged& staged) {
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "output");
  checkWritable(tensor, site, "output");
  checkTag(tag, site);
  const bool anySource = srcRank < 0;
  return enqueuePointToPoint(
      staged, anySource ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, site.op, {tensor},
      messageFields(fieldsOf(tensor), OpFields::Direction::From, srcRank, tag),
      [this, tensor, srcRank, tag, anySource](const OpContext& ctx) {
        ReceiveTarget target = receiveTarget(tensor);
        PostedMessage posted;
        posted.request = comm().transport.irecv(srcRank, makeP2PTag(anySource ? 0 : srcRank, tag),
                                                target.buffer.data_ptr(), target.buffer.nbytes(),
                                                ctx, anySource ? kTagAnySourceMask : kTagFullMask);
        at::Tensor keep = target.buffer;  // alive until the receive completes
        auto copyBack = target.finish;
        posted.finish = [keep, copyBack] {
          if (copyBack) copyBack();
        };
        return posted;
      });
}

}  // namespace ringreduce
