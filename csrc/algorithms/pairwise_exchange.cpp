// Gather, scatter and all-to-all by one message per pair of ranks (pairwise_exchange.h)
#include "algorithms/pairwise_exchange.h"

#include <cstring>

#include "core/base/errors.h"
#include "transport/tag.h"

namespace ringreduce {

BlockLayout BlockLayout::uniform(int n, size_t blockBytes) {
  BlockLayout layout;
  layout.offsets.reserve(static_cast<size_t>(n));
  layout.bytes.assign(static_cast<size_t>(n), blockBytes);
  for (int i = 0; i < n; ++i) {
    layout.offsets.push_back(static_cast<size_t>(i) * blockBytes);
  }
  return layout;
}

namespace {
void checkLayout(const BlockLayout& layout, int n, const OpContext& op) {
  if (static_cast<int>(layout.offsets.size()) != n || static_cast<int>(layout.bytes.size()) != n) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": expected " +
                          std::to_string(n) + " blocks, got " +
                          std::to_string(layout.bytes.size()));
  }
}
}  // namespace

void gatherToRoot(const Comm& comm, const OpContext& op, const GatherArgs& args) {
  Transport& transport = comm.transport;
  const void* input = args.input;
  const size_t inputBytes = args.inputBytes;
  const BlockLayout& layout = args.layout;
  const int root = args.root;
  const uint32_t slot = args.slot;
  const int n = transport.size();
  const int rank = transport.rank();
  if (rank != root) {
    Request send = transport.isend(root, makeTag(rank, op.seq, slot), input, inputBytes, op);
    transport.wait(send, op);
    return;
  }
  checkLayout(layout, n, op);
  char* out = static_cast<char*>(args.output);
  const auto blockOf = [&](int r) {
    return args.blocks.empty() ? out + layout.offsets[static_cast<size_t>(r)]
                               : static_cast<char*>(args.blocks[static_cast<size_t>(r)]);
  };
  std::vector<Request> recvs;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    recvs.push_back(transport.irecv(peer, makeTag(peer, op.seq, slot), blockOf(peer),
                                    layout.bytes[peer], op));
  }
  if (layout.bytes[rank] != inputBytes) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": root block size mismatch");
  }
  // The root's block may already be in place (a reduce's reduced chunk).
  if (inputBytes > 0 && blockOf(rank) != input) std::memmove(blockOf(rank), input, inputBytes);
  transport.waitAll(recvs, op);
}

void scatterFromRoot(const Comm& comm, const OpContext& op, const ScatterArgs& args) {
  Transport& transport = comm.transport;
  const void* input = args.input;
  const BlockLayout& layout = args.layout;
  void* output = args.output;
  const size_t outputBytes = args.outputBytes;
  const int root = args.root;
  const uint32_t slot = args.slot;
  const int n = transport.size();
  const int rank = transport.rank();
  if (rank != root) {
    Request recv = transport.irecv(root, makeTag(root, op.seq, slot), output, outputBytes, op);
    transport.wait(recv, op);
    return;
  }
  checkLayout(layout, n, op);
  const char* in = static_cast<const char*>(input);
  const auto blockOf = [&](int r) {
    return args.blocks.empty() ? in + layout.offsets[static_cast<size_t>(r)]
                               : static_cast<const char*>(args.blocks[static_cast<size_t>(r)]);
  };
  std::vector<Request> sends;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    sends.push_back(transport.isend(peer, makeTag(rank, op.seq, slot), blockOf(peer),
                                    layout.bytes[peer], op));
  }
  if (layout.bytes[rank] > 0) std::memmove(output, blockOf(rank), layout.bytes[rank]);
  transport.waitAll(sends, op);
}

void allToAll(const Comm& comm, const OpContext& op, const AllToAllArgs& args) {
  Transport& transport = comm.transport;
  const void* send = args.send;
  void* recv = args.recv;
  const BlockLayout& sendLayout = args.sendLayout;
  const BlockLayout& recvLayout = args.recvLayout;
  const int n = transport.size();
  const int rank = transport.rank();
  checkLayout(sendLayout, n, op);
  checkLayout(recvLayout, n, op);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<Request> recvs;
  std::vector<Request> sends;
  // Peers in a rotated order (r+1, r+2, ...) so ranks do not all hit rank 0 first.
  for (int i = 1; i < n; ++i) {
    const int from = (rank - i + n) % n;
    recvs.push_back(transport.irecv(from, makeTag(from, op.seq, 0), out + recvLayout.offsets[from],
                                    recvLayout.bytes[from], op));
  }
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n;
    sends.push_back(transport.isend(to, makeTag(rank, op.seq, 0), in + sendLayout.offsets[to],
                                    sendLayout.bytes[to], op));
  }
  if (sendLayout.bytes[rank] != recvLayout.bytes[rank]) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": this rank sends " +
                          std::to_string(sendLayout.bytes[rank]) + " bytes to itself but expects " +
                          std::to_string(recvLayout.bytes[rank]));
  }
  if (sendLayout.bytes[rank] > 0) {
    std::memmove(out + recvLayout.offsets[rank], in + sendLayout.offsets[rank],
                 sendLayout.bytes[rank]);
  }
  transport.waitAll(recvs, op);
  transport.waitAll(sends, op);
}

}  // namespace ringreduce
