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
#pragma once

namespace ringreduce {

// Installs the handler once per process (later calls do nothing).
void keepUcxFromAbortingOnAGonePeer();

// Whether a UCX log message (the source file it came from, its level as
// UCX numbers them, the formatted text) is the copy from a gone peer's
// memory that the handler takes.
bool isCopyFromAGonePeer(const char* file, int level, const char* message);

}  // namespace ringreduce
