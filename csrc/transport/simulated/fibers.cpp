// Cooperative fibers for the virtual-time transport (fibers.h)
#include "transport/simulated/fibers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#include "core/base/errors.h"

#if defined(__x86_64__)
// switchStacks(save, load): pushes the callee-saved registers and the SSE
// and x87 control words, stores the stack pointer in *save, takes `load` as
// the stack pointer and pops the same from it. A new fiber's stack is laid
// out so that the first switch "returns" into fiberStart, which calls
// r13(r12) with the stack aligned as the ABI wants.
extern "C" void ringreduceSwitchStacks(void** save, void* load);
extern "C" void ringreduceFiberStart();
asm(R"(
  .text
  .globl ringreduceSwitchStacks
  .type ringreduceSwitchStacks, @function
ringreduceSwitchStacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ringreduceSwitchStacks, .-ringreduceSwitchStacks
  .globl ringreduceFiberStart
  .type ringreduceFiberStart, @function
ringreduceFiberStart:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size ringreduceFiberStart, .-ringreduceFiberStart
)");
#endif

namespace ringreduce {

namespace {
// makecontext passes only ints: the fiber being started is found here.
thread_local void* starting = nullptr;
}  // namespace

Fibers::Fibers(size_t stackBytes) : stackBytes_(stackBytes) {}

Fibers::~Fibers() {
  for (auto& f : fibers_) {
    if (f->stack != nullptr) munmap(f->stack, stackBytes_);
  }
}

int Fibers::add(std::function<void()> body) {
  auto fiber = std::make_unique<Fiber>();
  fiber->stack = mmap(nullptr, stackBytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (fiber->stack == MAP_FAILED) throw std::bad_alloc();
  // The lowest page faults instead of letting an overflow corrupt a neighbour.
  mprotect(fiber->stack, static_cast<size_t>(sysconf(_SC_PAGESIZE)), PROT_NONE);
  fiber->body = std::move(body);
  fiber->owner = this;
#if defined(__x86_64__)
  // From the 16-byte aligned top: padding, then what the switch pops:
  // control words (MXCSR's default, x87's default), r15, r14, r13 = run,
  // r12 = fiber, rbx, rbp, and the return address.
  auto top = reinterpret_cast<uintptr_t>(fiber->stack) + stackBytes_;
  auto* slot = reinterpret_cast<uint64_t*>((top & ~uintptr_t{15}) - 80);
  slot[0] = 0x1f80 | (uint64_t{0x037f} << 32);
  slot[1] = 0;
  slot[2] = 0;
  slot[3] = reinterpret_cast<uint64_t>(&Fibers::run);
  slot[4] = reinterpret_cast<uint64_t>(fiber.get());
  slot[5] = 0;
  slot[6] = 0;
  slot[7] = reinterpret_cast<uint64_t>(&ringreduceFiberStart);
  fiber->sp = slot;
#else
  if (getcontext(&fiber->context) != 0) throw Error("ringreduce: getcontext failed");
  fiber->context.uc_stack.ss_sp = fiber->stack;
  fiber->context.uc_stack.ss_size = stackBytes_;
  fiber->context.uc_link = nullptr;
  makecontext(&fiber->context, &Fibers::entry, 0);
#endif
  fibers_.push_back(std::move(fiber));
  return static_cast<int>(fibers_.size()) - 1;
}

void Fibers::entry() { run(static_cast<Fiber*>(starting)); }

// A fiber's whole life: its body, then back to the scheduler for good.
void Fibers::run(Fiber* fiber) {
  fiber->body();
  fiber->finished = true;
  fiber->owner->suspend();
}

void Fibers::resume(int id) {
  current_ = id;
  Fiber& fiber = *fibers_[id];
#if defined(__x86_64__)
  ringreduceSwitchStacks(&schedulerSp_, fiber.sp);
#else
  starting = &fiber;
  swapcontext(&scheduler_, &fiber.context);
#endif
  current_ = -1;
}

void Fibers::suspend() {
  Fiber& fiber = *fibers_[current_];
#if defined(__x86_64__)
  ringreduceSwitchStacks(&fiber.sp, schedulerSp_);
#else
  swapcontext(&fiber.context, &scheduler_);
#endif
}

}  // namespace ringreduce
