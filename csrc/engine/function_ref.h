// A non-owning reference to a callable: an object pointer and a function
// that calls it. Unlike std::function it never allocates or copies the
// callable, so a lambda passed down a hot path (Engine::runOnCaller) costs
// nothing. The callable must outlive the reference: pass it as an argument,
// never store it.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace ringreduce {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<
                         !std::is_same_v<std::decay_t<F>, FunctionRef> &&
                         std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& callable) noexcept  // NOLINT: implicit, as a lambda argument
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(callable)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::add_pointer_t<std::remove_reference_t<F>>>(object))(
              std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace ringreduce
