// The last word of each rank to every peer in a collective where peers read
// and write each other's memory (algorithms/cross_memory/allreduce.h):
// "finished" or "failed", meaning in both cases "I no longer touch your
// memory". A rank may hand its buffer back to its caller only once every
// peer that could touch it has said so, or died: on success as on failure,
// or a peer still copying would write into memory the caller has reused.
//
// The receives are posted first thing in the collective, so that a rank
// that fails anywhere, even before the buffers are exchanged, can still wait
// for them; and a peer that comes late finds the "failed" words waiting and
// stops before its first copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/op_context.h"
#include "transport/transport.h"

namespace ringreduce {

class StopWords {
 public:
  // Posts a receive for every peer's word (tag slot `slot` of `op`).
  StopWords(Transport& transport, const OpContext& op, uint32_t slot);
  // Abandons whatever is still posted.
  ~StopWords();
  StopWords(const StopWords&) = delete;
  StopWords& operator=(const StopWords&) = delete;

  // Between copies: progresses the transport and throws TransportError if
  // a peer has already said "failed".
  void throwIfAPeerFailed();
  // Success: says "finished" and waits (as any transport wait: to the
  // deadline, ended by a peer's death or a rank giving up) for every peer's
  // word; throws if one said "failed" (its part of the result is missing).
  void finish();
  // Failure (never throws): says "failed" (with `reason`, which a peer's
  // error quotes) unless this rank already spoke, then waits for the word
  // of each peer in `waitFor` (by rank) until it comes, the peer is known
  // dead or has left the group, the transport is aborted, or `until`; and
  // for a moment for its own words to leave.
  void stopAfterFailure(const std::vector<bool>& waitFor, Clock::time_point until,
                        const char* reason) noexcept;

 private:
  enum Word : uint8_t { kNone = 0, kFinished = 1, kFailed = 2 };
  // One message: the word and, for "failed", the start of the reason.
  struct Message {
    uint8_t word = kNone;
    char reason[255] = {};
  };
  void say(Word word, const char* reason = "");
  // Whether there is nothing more to wait for on `r` (a word to or from a
  // peer): it completed, or the peer failed, died or left (then `r` is
  // abandoned). Only that peer's own news counts (`alone`); progresses nothing.
  bool settled(Request& r, const OpContext& alone) noexcept;
  // Whether every word this rank sent is settled.
  bool wordsSent(const OpContext& alone) noexcept;
  void throwIfFailed(int q) const;

  Transport& t_;
  const OpContext& op_;
  const uint32_t slot_;
  // On the heap: UCX cannot take back a send it has accepted, so a word
  // abandoned in flight may still be packed after this object is gone, and
  // must still say what this rank said (not a stale frame that a peer would
  // read as "finished"). The transport keeps it then (keepUntilClosed).
  std::shared_ptr<Message> mine_;
  std::vector<Message> theirs_;    // by rank
  std::vector<Request> receives_;  // by rank; none for this rank
  std::vector<Request> sends_;
};

}  // namespace ringreduce
