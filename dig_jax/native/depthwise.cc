// Depthwise k×k convolution (NHWC, float32, TF "SAME" padding given as top/left offsets) as
// XLA FFI handlers for the CPU: forward, input gradient and kernel gradient.
//
// XLA's CPU backend has no fast depthwise convolution: its grouped convolution runs at 1–2
// GFLOP/s, and the fused shift-and-multiply-add form (dig_jax.models.depthwise, "shift") is
// vectorised but its kernel gradient is a variadic reduction XLA emits as scalar code. These
// loops keep the channel axis innermost (contiguous in NHWC), so the compiler vectorises every
// one of them, and split the rows over XLA's own intra-op thread pool.
//
// Determinism: the kernel gradient sums fixed blocks of rows into separate partial sums, then
// adds the partials in block order, so the bytes do not depend on the number of threads.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Runs body(i) for i in [0, n) on the caller and the pool's threads. The caller takes work
// too, so the call finishes even when every pool thread is busy (or blocked in another call);
// tasks that start after all the work is taken return at once.
template <typename Body>
void ParallelFor(ffi::ThreadPool& pool, int64_t n, const Body& body) {
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

struct Geometry {
  int64_t batch, height, width, channels;  // input
  int64_t out_height, out_width;           // output
  int64_t k, stride, top, left;
};

ffi::Error CheckShapes(const Geometry& g, ffi::Span<const int64_t> x_dims,
                       ffi::Span<const int64_t> w_dims) {
  if (x_dims.size() != 4) return ffi::Error::InvalidArgument("depthwise: x must be rank 4 NHWC");
  if (w_dims.size() != 3 || w_dims[0] != w_dims[1] || w_dims[2] != x_dims[3]) {
    return ffi::Error::InvalidArgument("depthwise: kernel must be f32[k, k, C]");
  }
  if (g.stride < 1 || g.top < 0 || g.left < 0) {
    return ffi::Error::InvalidArgument("depthwise: stride >= 1 and non-negative padding");
  }
  return ffi::Error::Success();
}

Geometry MakeGeometry(ffi::Span<const int64_t> x_dims, ffi::Span<const int64_t> y_dims,
                      int64_t k, int64_t stride, int64_t top, int64_t left) {
  return Geometry{x_dims[0], x_dims[1], x_dims[2], x_dims[3], y_dims[1], y_dims[2],
                  k,         stride,    top,       left};
}

constexpr int64_t kMaxTaps = 64;  // k ≤ 8

// Eight floats as one value (GCC/Clang vector extension: AVX registers on x86, pairs of NEON
// registers on ARM). Written out because left to itself the compiler vectorised the loop over
// taps (gathers) instead of the channels.
typedef float Vec8 __attribute__((vector_size(32)));

inline Vec8 Load(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void Store(float* p, Vec8 v) { std::memcpy(p, &v, sizeof v); }

// out[:] = Σ_t taps[t][:] · weights[t][:], f32[C] each. The channels go in blocks of 16 (then
// 8, then one) summed in registers, so each output is written once.
inline void WeightedTapSum(const float* const* taps, const float* const* weights, int64_t count,
                           int64_t C, float* out) {
  int64_t c0 = 0;
  for (; c0 + 16 <= C; c0 += 16) {
    Vec8 lo = {}, hi = {};
    for (int64_t t = 0; t < count; ++t) {
      lo += Load(taps[t] + c0) * Load(weights[t] + c0);
      hi += Load(taps[t] + c0 + 8) * Load(weights[t] + c0 + 8);
    }
    Store(out + c0, lo);
    Store(out + c0 + 8, hi);
  }
  for (; c0 + 8 <= C; c0 += 8) {
    Vec8 acc = {};
    for (int64_t t = 0; t < count; ++t) acc += Load(taps[t] + c0) * Load(weights[t] + c0);
    Store(out + c0, acc);
  }
  for (; c0 < C; ++c0) {
    float acc = 0.0f;
    for (int64_t t = 0; t < count; ++t) acc += taps[t][c0] * weights[t][c0];
    out[c0] = acc;
  }
}

ffi::Error CheckTaps(int64_t k) {
  if (k * k > kMaxTaps) return ffi::Error::InvalidArgument("depthwise: kernel larger than 8x8");
  return ffi::Error::Success();
}

// y[b, h, v, :] = Σ_ij x[b, h·s + i − top, v·s + j − left, :] · w[i, j, :] (zero outside x).
ffi::Error Forward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w,
                   ffi::ResultBuffer<ffi::F32> y, int64_t stride, int64_t top, int64_t left) {
  const Geometry g = MakeGeometry(x.dimensions(), y->dimensions(), w.dimensions()[0], stride,
                                  top, left);
  if (ffi::Error e = CheckShapes(g, x.dimensions(), w.dimensions()); e.failure()) return e;
  if (ffi::Error e = CheckTaps(g.k); e.failure()) return e;
  const float* xs = x.typed_data();
  const float* ws = w.typed_data();
  float* ys = y->typed_data();
  const int64_t C = g.channels;
  ParallelFor(pool, g.batch * g.out_height, [&](int64_t row) {
    const int64_t b = row / g.out_height, h = row % g.out_height;
    const float* taps[kMaxTaps];
    const float* weights[kMaxTaps];
    for (int64_t v = 0; v < g.out_width; ++v) {
      int64_t count = 0;
      for (int64_t i = 0; i < g.k; ++i) {
        const int64_t yy = h * g.stride + i - g.top;
        if (yy < 0 || yy >= g.height) continue;
        for (int64_t j = 0; j < g.k; ++j) {
          const int64_t xx = v * g.stride + j - g.left;
          if (xx < 0 || xx >= g.width) continue;
          taps[count] = xs + ((b * g.height + yy) * g.width + xx) * C;
          weights[count++] = ws + (i * g.k + j) * C;
        }
      }
      WeightedTapSum(taps, weights, count, C, ys + (row * g.out_width + v) * C);
    }
  });
  return ffi::Error::Success();
}

// dx[b, yy, xx, :] = Σ over taps (i, j) and output pixels (h, v) with h·s + i − top = yy and
// v·s + j − left = xx of dy[b, h, v, :] · w[i, j, :] (the transpose of Forward).
ffi::Error InputGrad(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> dy, ffi::Buffer<ffi::F32> w,
                     ffi::ResultBuffer<ffi::F32> dx, int64_t stride, int64_t top,
                     int64_t left) {
  const Geometry g = MakeGeometry(dx->dimensions(), dy.dimensions(), w.dimensions()[0], stride,
                                  top, left);
  if (ffi::Error e = CheckShapes(g, dx->dimensions(), w.dimensions()); e.failure()) return e;
  if (ffi::Error e = CheckTaps(g.k); e.failure()) return e;
  const float* gs = dy.typed_data();
  const float* ws = w.typed_data();
  float* xs = dx->typed_data();
  const int64_t C = g.channels;
  ParallelFor(pool, g.batch * g.height, [&](int64_t row) {
    const int64_t b = row / g.height, yy = row % g.height;
    const float* taps[kMaxTaps];
    const float* weights[kMaxTaps];
    // Kernel rows i with yy + top − i a multiple of the stride, and their output rows h.
    int64_t rows_i[8], rows_h[8], row_count = 0;
    const int64_t ty = yy + g.top;
    for (int64_t i = ty % g.stride, h = ty / g.stride; i < g.k && h >= 0; i += g.stride, --h) {
      if (h < g.out_height) rows_i[row_count] = i, rows_h[row_count++] = h;
    }
    for (int64_t xx = 0; xx < g.width; ++xx) {
      int64_t count = 0;
      const int64_t tx = xx + g.left, j0 = tx % g.stride, v0 = tx / g.stride;
      for (int64_t r = 0; r < row_count; ++r) {
        const float* g_row = gs + (b * g.out_height + rows_h[r]) * g.out_width * C;
        const float* w_row = ws + rows_i[r] * g.k * C;
        for (int64_t j = j0, v = v0; j < g.k && v >= 0; j += g.stride, --v) {
          if (v >= g.out_width) continue;
          taps[count] = g_row + v * C;
          weights[count++] = w_row + j * C;
        }
      }
      WeightedTapSum(taps, weights, count, C, xs + (row * g.width + xx) * C);
    }
  });
  return ffi::Error::Success();
}

constexpr int64_t kGradBlocks = 16;  // fixed row blocks of the kernel gradient (determinism)

// dw[i, j, :] = Σ_{b, h, v} x[b, h·s + i − top, v·s + j − left, :] · dy[b, h, v, :].
ffi::Error KernelGrad(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> dy,
                      ffi::ResultBuffer<ffi::F32> dw, int64_t stride, int64_t top,
                      int64_t left) {
  const Geometry g = MakeGeometry(x.dimensions(), dy.dimensions(), dw->dimensions()[0], stride,
                                  top, left);
  if (ffi::Error e = CheckShapes(g, x.dimensions(), dw->dimensions()); e.failure()) return e;
  if (ffi::Error e = CheckTaps(g.k); e.failure()) return e;
  const float* __restrict xs = x.typed_data();
  const float* __restrict gs = dy.typed_data();
  const int64_t C = g.channels, taps = g.k * g.k;
  const int64_t rows = g.batch * g.out_height;
  const int64_t blocks = std::min(rows, kGradBlocks);
  std::vector<float> partial(blocks * taps * C, 0.0f);
  ParallelFor(pool, blocks, [&](int64_t block) {
    float* acc = partial.data() + block * taps * C;
    for (int64_t row = block * rows / blocks; row < (block + 1) * rows / blocks; ++row) {
      const int64_t b = row / g.out_height, h = row % g.out_height;
      const float* g_row = gs + row * g.out_width * C;
      for (int64_t i = 0; i < g.k; ++i) {
        const int64_t yy = h * g.stride + i - g.top;
        if (yy < 0 || yy >= g.height) continue;
        const float* x_row = xs + (b * g.height + yy) * g.width * C;
        for (int64_t j = 0; j < g.k; ++j) {
          // Output columns v whose input column v·s + j − left lies inside the row.
          const int64_t shift = j - g.left;
          const int64_t v_lo = shift >= 0 ? 0 : (-shift + g.stride - 1) / g.stride;
          const int64_t v_hi = std::min(g.out_width, (g.width - 1 - shift) / g.stride + 1);
          const float* x_first = x_row + shift * C;
          const int64_t step = g.stride * C;
          float* o = acc + (i * g.k + j) * C;
          int64_t c0 = 0;
          for (; c0 + 16 <= C; c0 += 16) {
            Vec8 lo = {}, hi = {};
            for (int64_t v = v_lo; v < v_hi; ++v) {
              const float* a = x_first + v * step + c0;
              const float* d = g_row + v * C + c0;
              lo += Load(a) * Load(d);
              hi += Load(a + 8) * Load(d + 8);
            }
            Store(o + c0, Load(o + c0) + lo);
            Store(o + c0 + 8, Load(o + c0 + 8) + hi);
          }
          for (; c0 + 8 <= C; c0 += 8) {
            Vec8 sum = {};
            for (int64_t v = v_lo; v < v_hi; ++v) {
              sum += Load(x_first + v * step + c0) * Load(g_row + v * C + c0);
            }
            Store(o + c0, Load(o + c0) + sum);
          }
          for (; c0 < C; ++c0) {
            float sum = 0.0f;
            for (int64_t v = v_lo; v < v_hi; ++v) sum += x_first[v * step + c0] * g_row[v * C + c0];
            o[c0] += sum;
          }
        }
      }
    }
  });
  float* __restrict out = dw->typed_data();
  std::memcpy(out, partial.data(), sizeof(float) * taps * C);
  for (int64_t block = 1; block < blocks; ++block) {
    const float* __restrict p = partial.data() + block * taps * C;
    for (int64_t e = 0; e < taps * C; ++e) out[e] += p[e];
  }
  return ffi::Error::Success();
}

}  // namespace

#define DEPTHWISE_BINDING                      \
  ffi::Ffi::Bind()                             \
      .Ctx<ffi::ThreadPool>()                  \
      .Arg<ffi::Buffer<ffi::F32>>()            \
      .Arg<ffi::Buffer<ffi::F32>>()            \
      .Ret<ffi::Buffer<ffi::F32>>()            \
      .Attr<int64_t>("stride")                 \
      .Attr<int64_t>("top")                    \
      .Attr<int64_t>("left")

XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxDepthwiseForward, Forward, DEPTHWISE_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxDepthwiseInputGrad, InputGrad, DEPTHWISE_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxDepthwiseKernelGrad, KernelGrad, DEPTHWISE_BINDING);
