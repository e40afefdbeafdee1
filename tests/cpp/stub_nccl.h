// A stand-in for libnccl.so.2 (tests/cpp/stub_nccl.cpp, built as a shared
// library for the tests only): the symbols NcclLibrary::open resolves, with
// behaviour a test chooses per rank, so that NCCL's supervision
// (cuda/nccl/nccl_watchdog.h, the bounded init of nccl_communicator.h) runs
// without a GPU. A "stream" is a StubNcclStream: an op whose kernels would
// spin on a dead peer holds it until the communicator is aborted, as
// NCCL's kernels hold a real stream. ncclCommFinalize (absent from the old
// one, as before NCCL 2.14) answers ncclInProgress and turns quiescent a
// few looks later, unless an op still holds a stream: NCCL's kernels that
// wait on a peer never let a finalize finish.
#pragma once

#include <atomic>

struct StubNcclStream {
  std::atomic<int> heldBy{0};  // how many of NCCL's unfinished ops hold it
};

// "Never" below is 30 s: then the work ends in ncclSystemError, so that a
// test whose bound broke fails rather than hangs.
enum StubNcclBehaviour : int {
  kStubNcclWorks = 0,
  kStubNcclInitHangs = 1,       // the non-blocking init never finishes
  kStubNcclInitFails = 2,       // the init ends with ncclSystemError
  kStubNcclAsyncErrorInOp = 3,  // an op holds its stream and NCCL reports ncclRemoteError
  kStubNcclOpHangs = 4,         // an op holds its stream until the abort
  kStubNcclOpInProgress = 5,    // an op answers ncclInProgress, done a few looks later
  kStubNcclOpStuck = 6,         // an op answers ncclInProgress and never gets enqueued
  kStubNcclFinalizeHangs = 7,   // ncclCommFinalize never gets quiescent (a peer never closes)
};

extern "C" {
// Forgets every behaviour and count.
void stubNcclReset();
void stubNcclSetBehaviour(int rank, int behaviour);
// ncclCommAbort calls on rank `rank`'s communicators.
int stubNcclAborts(int rank);
// ncclCommDestroy calls while an op still held a stream: a real NCCL would
// wait for those kernels, forever when they wait on a dead peer.
int stubNcclDestroysWhileHeld(int rank);
// Communicators made and not yet destroyed or aborted.
int stubNcclLiveComms();
// Inits that went through ncclCommInitRank (blocking) rather than the Config one.
int stubNcclBlockingInits();
// What was done to rank `rank`'s communicators, in order, words apart:
// "init", "finalize" (called), "quiescent" (a look found the finalize
// done), "destroy", "abort"; the ops are left out. Copies at most
// `capacity` bytes with the terminating zero into `out`; returns the length.
int stubNcclCalls(int rank, char* out, int capacity);
// The devices a rank's communicators were used from: every call that makes
// or names a communicator asks `probe` for the calling thread's current
// device (the test's model of it: fake_device_context.h), as NCCL works on
// the device current on the calling thread (and restores it afterwards,
// creating a context there). Kept until stubNcclReset; no probe, no record.
void stubNcclSetDeviceProbe(int (*probe)());
// Those devices for rank `rank`, a bit per device (bit k: device k).
unsigned long long stubNcclDevicesUsedBy(int rank);
// How many threads called rank `rank`'s communicators (its own, watchdogs).
int stubNcclThreadsOf(int rank);
}
