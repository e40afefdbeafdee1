// Keeps UCX from aborting this process when a peer's process is gone
// mid-transfer.
//
// Why: between ranks of one machine UCX's rendezvous reads or writes the
// peer's memory through its cma transport (process_vm_readv/writev). When
// the peer has died, that call fails with ESRCH, and on an endpoint without
// UCX's peer error handling (the data path's, for speed: UCX.md) that has
// sent before, UCX calls the failure unhandled and logs it at FATAL, which
// aborts the process: a surviving rank dumped a backtrace and died
// (SIGABRT) instead of raising. The failure itself takes UCX's ordinary
// error path (the transfer completes with an error, the endpoint is marked
// failed); only the log's level aborts. So a log handler, ahead of UCX's
// own, takes that one message: logged as a warning, the transfer fails,
// and the transport reports the dead peer as it does any other
// (Transport::test: "rank r is gone").
//
// The same copy fails with EFAULT ("Bad address") where the peer is alive
// but its buffer is not: a rank that gave up on a collective (another peer
// died) cancels its requests and raises, and its caller frees the tensors,
// but UCX cannot take back a rendezvous send a peer has already been told
// of, and that peer's read of the freed memory failed. 10 of 24 runs of a
// seed_sweep.py --kill draw (world 4, a rank killed mid-mix) aborted one or
// two of the three survivors so (2026-12-01). That copy is taken too:
// its transfer fails, and the transport names the rank that gave up and why
// (Transport::explainFailure). A bad address from our own mistake would
// then raise instead of abort, with this warning in the log.
#pragma once

namespace ringreduce {

// Installs the handler once per process (later calls do nothing).
void keepUcxFromAbortingOnAGonePeer();

// How many such copies the handler has taken in this process so far. A
// worker that saw one keeps the failed copy queued on its cma endpoint,
// and UCX 1.13 asserts (aborts) when it destroys that endpoint
// (ucs_arbiter_group_is_empty): a survivor that raised at once then died
// at destroy_process_group, in 1 of 19 runs of the draw above. A
// transport created before the count moved does not destroy its worker
// (UcxTransport::~UcxTransport).
unsigned long copiesFromGonePeersTaken();

// Whether a UCX log message (the source file it came from, its level as
// UCX numbers them, the formatted text) is the copy from a gone peer's
// memory, or from memory a peer gave up, that the handler takes.
bool isCopyFromAGonePeer(const char* file, int level, const char* message);

}  // namespace ringreduce
