// What the native kernels share (header only: each source gets its own copy of ParallelFor in
// an anonymous namespace): the thread split and the FFI binding of their handlers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace {

// Runs body(i) for i in [0, n) on the caller and the pool's threads. The caller takes work
// too, so the call finishes even when every pool thread is busy (or blocked in another call);
// tasks that start after all the work is taken return at once.
template <typename Body>
void ParallelFor(xla::ffi::ThreadPool& pool, int64_t n, const Body& body) {
  struct Shared {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
  };
  auto shared = std::make_shared<Shared>();
  auto work = [shared, n, &body]() {
    for (int64_t i; (i = shared->next.fetch_add(1)) < n;) {
      body(i);
      shared->done.fetch_add(1, std::memory_order_release);
    }
  };
  const int64_t helpers = std::min<int64_t>(pool.num_threads(), n - 1);
  for (int64_t t = 0; t < helpers; ++t) {
    // A helper may run after this call returned: it holds `shared` but must not touch `body`
    // then. It only calls body(i) for an i it took before `next` reached n, and the caller
    // waits for every taken i to be done, so `body` is alive whenever it runs.
    pool.Schedule([work]() { work(); });
  }
  work();
  while (shared->done.load(std::memory_order_acquire) < n) std::this_thread::yield();
}

}  // namespace

// Every handler takes two f32 buffers, returns one, and reads the stride and the SAME padding's
// top / left offsets.
#define DIG_JAX_BINDING                        \
  xla::ffi::Ffi::Bind()                        \
      .Ctx<xla::ffi::ThreadPool>()             \
      .Arg<xla::ffi::Buffer<xla::ffi::F32>>()  \
      .Arg<xla::ffi::Buffer<xla::ffi::F32>>()  \
      .Ret<xla::ffi::Buffer<xla::ffi::F32>>()  \
      .Attr<int64_t>("stride")                 \
      .Attr<int64_t>("top")                    \
      .Attr<int64_t>("left")
