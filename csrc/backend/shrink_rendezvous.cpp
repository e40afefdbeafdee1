// Where the ranks that stay in a shrunk group meet (shrink_rendezvous.h)
#include "backend/shrink_rendezvous.h"

#include <c10/util/Exception.h>

namespace ringreduce {

namespace {

// What a rank whose wait ran out adds to the counter: far above any count
// of ranks, so a count at or over it says the attempt was closed.
constexpr int64_t kClosed = int64_t{1} << 40;

// What a store that fails here means.
constexpr const char* kStoreHostGone =
    "The new group meets on the group's store; if the process that hosted it (torchrun's "
    "agent on the rendezvous host, or rank 0 with init_method=tcp:// or MASTER_ADDR) is "
    "gone, the ranks that stay cannot meet: restart the job instead.";

std::string attemptKey(int64_t attempt, const std::string& name) {
  return "attempt" + std::to_string(attempt) + "/" + name;
}

std::string arrivedKey(int64_t attempt, int rank) {
  return attemptKey(attempt, "arrived/" + std::to_string(rank));
}

std::string text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

[[noreturn]] void storeFailed(const std::string& what, const std::exception& e) {
  C10_THROW_ERROR(DistBackendError, what + ": the store failed while the ranks that stay met on "
                                           "it (" + e.what() + "). " + kStoreHostGone);
}

// The ranks of `staying` whose arrival in `attempt` the store does not show.
std::vector<int> missingFrom(c10d::Store& store, int64_t attempt,
                             const std::vector<int>& staying) {
  std::vector<int> missing;
  for (int r : staying) {
    if (!store.check({arrivedKey(attempt, r)})) missing.push_back(r);
  }
  return missing;
}

}  // namespace

std::string joinRanks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) {
    if (!text.empty()) text += ", ";
    text += std::to_string(r);
  }
  return text;
}

int64_t meetRanksThatStay(c10d::Store& store, int rank, const std::vector<int>& staying,
                          std::chrono::milliseconds timeout, const std::string& what) {
  const auto ranks = static_cast<int64_t>(staying.size());
  int64_t attempt = 0;
  try {
    attempt = store.add("attempt", 0);
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistBackendError,
                    what + ": the store is unreachable (" + e.what() + "). " + kStoreHostGone);
  }
  try {
    // Join the attempt under way; one closed meanwhile sends us to the next.
    for (;;) {
      store.set(arrivedKey(attempt, rank), std::vector<uint8_t>{1});
      const int64_t count = store.add(attemptKey(attempt, "count"), 1);
      if (count < kClosed) {
        if (count == ranks) store.set(attemptKey(attempt, "outcome"), std::string("met"));
        break;
      }
      ++attempt;
    }
  } catch (const std::exception& e) {
    storeFailed(what, e);
  }
  const std::string outcome = attemptKey(attempt, "outcome");
  try {
    store.wait({outcome}, timeout);
    if (text(store.get(outcome)) == "met") return attempt;
  } catch (const std::exception&) {
    // The wait ran out (or the store failed, which closing it then says):
    // close the attempt, unless every rank came meanwhile.
  }
  std::vector<int> missing;
  try {
    const int64_t before = store.add(attemptKey(attempt, "count"), kClosed) - kClosed;
    if (before == ranks) {
      // Complete before we closed it: the last rank sets the outcome at once.
      store.wait({outcome}, timeout);
      if (text(store.get(outcome)) == "met") return attempt;
    } else if (before < ranks) {
      // We closed it: later arrivals go to the next attempt.
      store.set(outcome, std::string("closed"));
      store.add("attempt", 1);
    }
    missing = missingFrom(store, attempt, staying);
  } catch (const std::exception& e) {
    storeFailed(what, e);
  }
  C10_THROW_ERROR(DistBackendError,
                  what + ": rank(s) " + joinRanks(missing) + " did not call shrink_group within " +
                      std::to_string(timeout.count()) +
                      " ms. Every rank that stays must call it with the same ranks to exclude; "
                      "a rank that died too must be excluded as well. A retry meets afresh.");
}

}  // namespace ringreduce
