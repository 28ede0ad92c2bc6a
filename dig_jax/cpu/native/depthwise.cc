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
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

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

// out[c] = Σ_t taps[t][c] · weights[t][c] for c in [c_begin, C), f32 each. The channels go in
// blocks of 16 (then 8, then one) summed in registers, so each output is written once.
inline void WeightedTapSum(const float* const* taps, const float* const* weights, int64_t count,
                           int64_t C, float* out, int64_t c_begin = 0) {
  int64_t c0 = c_begin;
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

// Interior columns of one output row, channels [0, C16) (C16 a multiple of 16): for v in
// [v_begin, v_end), out[v·out_step + c] = Σ_{r < R} Σ_{j < K} rows[r][(v·S + j)·C + c] ·
// w_rows[r][j·w_step + c], where rows[r] points at the input column that output column 0's
// first tap reads (every column read lies inside the row). The forward pass has w_step =
// out_step = C; the strided input gradient walks a reversed, strided subset of the taps
// (w_step = −stride·C) and writes every stride-th column (out_step = stride·C). kBlock
// neighbouring outputs are summed together, 16 channels at a time, so each input vector is
// loaded once for all the taps that read it; the channel loop is inside the column loop so the
// input is read in address order. The forward adds taps in WeightedTapSum's (r, j) order.
template <int K, int S, int R, int kBlock>
inline void InteriorOutputs(const float* const* rows, const float* const* w_rows, int64_t w_step,
                            int64_t C, int64_t C16, int64_t v, float* out, int64_t out_step) {
  for (int64_t c0 = 0; c0 < C16; c0 += 16) {
    Vec8 lo[kBlock] = {}, hi[kBlock] = {};
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float* p = rows[r] + v * S * C + c0;
      const float* w = w_rows[r] + c0;
#pragma GCC unroll 8
      for (int j = 0; j < K; ++j) {
        const Vec8 wl = Load(w + j * w_step), wh = Load(w + j * w_step + 8);
#pragma GCC unroll 4
        for (int u = 0; u < kBlock; ++u) {
          lo[u] += Load(p + (u * S + j) * C) * wl;
          hi[u] += Load(p + (u * S + j) * C + 8) * wh;
        }
      }
    }
    for (int u = 0; u < kBlock; ++u) {
      Store(out + (v + u) * out_step + c0, lo[u]);
      Store(out + (v + u) * out_step + c0 + 8, hi[u]);
    }
  }
}

template <int K, int S, int R>
void InteriorBlock(const float* const* rows, const float* const* w_rows, int64_t w_step,
                   int64_t C, int64_t C16, int64_t v_begin, int64_t v_end, float* out,
                   int64_t out_step) {
  constexpr int kBlock = 4;
  int64_t v = v_begin;
  for (; v + kBlock <= v_end; v += kBlock) {
    InteriorOutputs<K, S, R, kBlock>(rows, w_rows, w_step, C, C16, v, out, out_step);
  }
  for (; v < v_end; ++v) InteriorOutputs<K, S, R, 1>(rows, w_rows, w_step, C, C16, v, out, out_step);
}

using InteriorFn = void (*)(const float* const*, const float* const*, int64_t, int64_t, int64_t,
                            int64_t, int64_t, float*, int64_t);

template <int K, int S, int... Rs>
InteriorFn PickRows(int64_t rows, std::integer_sequence<int, Rs...>) {
  InteriorFn table[] = {nullptr, &InteriorBlock<K, S, Rs + 1>...};
  return rows >= 1 && rows <= int64_t{sizeof...(Rs)} ? table[rows] : nullptr;
}

// The unrolled interior for (taps per row, stride, kernel rows), or nullptr where there is none
// (the generic per-pixel path runs): the forward's kernels 3 and 5 at strides 1 and 2, and the
// strided input gradient's 1–3 taps per row on up to 3 rows.
InteriorFn PickInterior(int64_t k, int64_t stride, int64_t rows) {
  if (k == 1 && stride == 1) return PickRows<1, 1>(rows, std::make_integer_sequence<int, 3>{});
  if (k == 2 && stride == 1) return PickRows<2, 1>(rows, std::make_integer_sequence<int, 3>{});
  if (k == 3 && stride == 1) return PickRows<3, 1>(rows, std::make_integer_sequence<int, 3>{});
  if (k == 3 && stride == 2) return PickRows<3, 2>(rows, std::make_integer_sequence<int, 3>{});
  if (k == 5 && stride == 1) return PickRows<5, 1>(rows, std::make_integer_sequence<int, 5>{});
  if (k == 5 && stride == 2) return PickRows<5, 2>(rows, std::make_integer_sequence<int, 5>{});
  return nullptr;
}

ffi::Error CheckTaps(int64_t k) {
  if (k * k > kMaxTaps) return ffi::Error::InvalidArgument("depthwise: kernel larger than 8x8");
  return ffi::Error::Success();
}

// y[b, h, v, :] = Σ_ij x[b, h·s + i − top, v·s + j − left, :] · w[i, j, :] (zero outside x),
// for x f32[N, H, W, C] and y f32[N, OH, OW, C]. Per output row: the columns whose taps all lie
// inside x run InteriorBlock on whole 16-channel blocks; the border columns and the channels
// past the last block take the per-pixel path.
void Correlate(ffi::ThreadPool& pool, const Geometry& g, const float* xs, const float* ws,
               float* ys) {
  const int64_t C = g.channels, C16 = C / 16 * 16;
  const int64_t v_begin = std::min(g.out_width, std::max<int64_t>(0, g.left + g.stride - 1) / g.stride);
  const int64_t last = g.width - g.k + g.left;  // v·s must not exceed it
  const int64_t v_end = last < 0 ? v_begin : std::max(v_begin, std::min(g.out_width, last / g.stride + 1));
  ParallelFor(pool, g.batch * g.out_height, [&](int64_t row) {
    const int64_t b = row / g.out_height, h = row % g.out_height;
    float* y_row = ys + row * g.out_width * C;
    const float* rows[8];
    const float* w_rows[8];
    int64_t row_count = 0;
    for (int64_t i = 0; i < g.k; ++i) {
      const int64_t yy = h * g.stride + i - g.top;
      if (yy < 0 || yy >= g.height) continue;
      rows[row_count] = xs + ((b * g.height + yy) * g.width - g.left) * C;
      w_rows[row_count++] = ws + i * g.k * C;
    }
    const InteriorFn interior = PickInterior(g.k, g.stride, row_count);
    const float* taps[kMaxTaps];
    const float* weights[kMaxTaps];
    auto pixel = [&](int64_t v, int64_t c_begin) {
      int64_t count = 0;
      for (int64_t r = 0; r < row_count; ++r) {
        for (int64_t j = 0; j < g.k; ++j) {
          const int64_t xx = v * g.stride + j - g.left;
          if (xx < 0 || xx >= g.width) continue;
          taps[count] = rows[r] + (v * g.stride + j) * C;
          weights[count++] = w_rows[r] + j * C;
        }
      }
      WeightedTapSum(taps, weights, count, C, y_row + v * C, c_begin);
    };
    if (interior == nullptr || C16 == 0) {
      for (int64_t v = 0; v < g.out_width; ++v) pixel(v, 0);
      return;
    }
    for (int64_t v = 0; v < v_begin; ++v) pixel(v, 0);
    interior(rows, w_rows, C, C, C16, v_begin, v_end, y_row, C);
    if (C16 < C) {
      for (int64_t v = v_begin; v < v_end; ++v) pixel(v, C16);
    }
    for (int64_t v = v_end; v < g.out_width; ++v) pixel(v, 0);
  });
}

ffi::Error Forward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w,
                   ffi::ResultBuffer<ffi::F32> y, int64_t stride, int64_t top, int64_t left) {
  const Geometry g = MakeGeometry(x.dimensions(), y->dimensions(), w.dimensions()[0], stride,
                                  top, left);
  if (ffi::Error e = CheckShapes(g, x.dimensions(), w.dimensions()); e.failure()) return e;
  if (ffi::Error e = CheckTaps(g.k); e.failure()) return e;
  Correlate(pool, g, x.typed_data(), w.typed_data(), y->typed_data());
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
  if (g.stride == 1) {
    // dx[yy, xx] = Σ_ij dy[yy + top − i, xx + left − j] · w[i, j]: the forward correlation of
    // dy with the flipped kernel, padded by k − 1 − top and k − 1 − left.
    std::vector<float> flipped(g.k * g.k * C);
    for (int64_t t = 0; t < g.k * g.k; ++t) {
      std::memcpy(flipped.data() + (g.k * g.k - 1 - t) * C, ws + t * C, sizeof(float) * C);
    }
    const Geometry transposed{g.batch,      g.out_height, g.out_width,      C, g.height, g.width,
                              g.k,          1,            g.k - 1 - g.top, g.k - 1 - g.left};
    Correlate(pool, transposed, gs, flipped.data(), xs);
    return ffi::Error::Success();
  }
  const int64_t C16 = C / 16 * 16;
  ParallelFor(pool, g.batch * g.height, [&](int64_t row) {
    const int64_t b = row / g.height, yy = row % g.height;
    float* dx_row = xs + row * g.width * C;
    const float* taps[kMaxTaps];
    const float* weights[kMaxTaps];
    // Kernel rows i with yy + top − i a multiple of the stride, and their output rows h.
    int64_t rows_i[8], rows_h[8], row_count = 0;
    const int64_t ty = yy + g.top;
    for (int64_t i = ty % g.stride, h = ty / g.stride; i < g.k && h >= 0; i += g.stride, --h) {
      if (h < g.out_height) rows_i[row_count] = i, rows_h[row_count++] = h;
    }
    auto pixel = [&](int64_t xx, int64_t c_begin) {
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
      WeightedTapSum(taps, weights, count, C, dx_row + xx * C, c_begin);
    };
    // The columns xx = stride·m + p of one residue p read the kernel columns j ≡ p + left
    // (mod stride), j = j0 + stride·t, at dy columns m + c − t: a stride-1 correlation of dy
    // with those T taps reversed, written to every stride-th column of dx.
    for (int64_t p = 0; p < std::min(g.stride, g.width); ++p) {
      const int64_t j0 = (p + g.left) % g.stride, c = (p + g.left - j0) / g.stride;
      const int64_t T = (g.k - j0 + g.stride - 1) / g.stride;
      const int64_t columns = (g.width - p + g.stride - 1) / g.stride;
      const InteriorFn interior = T > 0 ? PickInterior(T, 1, row_count) : nullptr;
      const int64_t m_begin = std::min(columns, std::max<int64_t>(0, T - 1 - c));
      const int64_t m_end = std::max(m_begin, std::min(columns, g.out_width - c));
      if (interior == nullptr || C16 == 0) {
        for (int64_t m = 0; m < columns; ++m) pixel(g.stride * m + p, 0);
        continue;
      }
      const float* rows[8];
      const float* w_rows[8];
      for (int64_t r = 0; r < row_count; ++r) {
        rows[r] = gs + ((b * g.out_height + rows_h[r]) * g.out_width + c - (T - 1)) * C;
        w_rows[r] = ws + (rows_i[r] * g.k + j0 + g.stride * (T - 1)) * C;
      }
      for (int64_t m = 0; m < m_begin; ++m) pixel(g.stride * m + p, 0);
      interior(rows, w_rows, -g.stride * C, C, C16, m_begin, m_end, dx_row + p * C,
               g.stride * C);
      if (C16 < C) {
        for (int64_t m = m_begin; m < m_end; ++m) pixel(g.stride * m + p, C16);
      }
      for (int64_t m = m_end; m < columns; ++m) pixel(g.stride * m + p, 0);
    }
  });
  return ffi::Error::Success();
}

constexpr int64_t kGradBlocks = 16;  // fixed row blocks of the kernel gradient (determinism)

// One kernel row's share of one output row, channels [0, C16) (C16 a multiple of 16):
// o[j, :] += Σ_v x_first[v·S + j, :] · dy_row[v, :] over the columns v whose input column lies
// inside the row, where x_first points at the input column that output column 0's first tap
// reads. The K tap sums stay in registers while dy is read once; v runs in ascending order for
// every tap, as in the per-channel path, so both paths round alike.
template <int K, int S>
void KernelGradRow(const float* x_first, const float* dy_row, int64_t C, int64_t C16,
                   int64_t out_width, int64_t width, int64_t left, float* o) {
  const int64_t v_begin = std::min(out_width, std::max<int64_t>(0, left + S - 1) / S);
  const int64_t last = width - K + left;
  const int64_t v_end = last < 0 ? v_begin : std::max(v_begin, std::min(out_width, last / S + 1));
  for (int64_t c0 = 0; c0 < C16; c0 += 16) {
    Vec8 lo[K] = {}, hi[K] = {};
    auto edge = [&](int64_t v) {
      const Vec8 dl = Load(dy_row + v * C + c0), dh = Load(dy_row + v * C + c0 + 8);
      for (int j = 0; j < K; ++j) {
        const int64_t xx = v * S + j - left;
        if (xx < 0 || xx >= width) continue;
        lo[j] += Load(x_first + (v * S + j) * C + c0) * dl;
        hi[j] += Load(x_first + (v * S + j) * C + c0 + 8) * dh;
      }
    };
    for (int64_t v = 0; v < v_begin; ++v) edge(v);
    for (int64_t v = v_begin; v < v_end; ++v) {
      const Vec8 dl = Load(dy_row + v * C + c0), dh = Load(dy_row + v * C + c0 + 8);
      const float* p = x_first + v * S * C + c0;
#pragma GCC unroll 8
      for (int j = 0; j < K; ++j) {
        lo[j] += Load(p + j * C) * dl;
        hi[j] += Load(p + j * C + 8) * dh;
      }
    }
    for (int64_t v = v_end; v < out_width; ++v) edge(v);
    for (int j = 0; j < K; ++j) {
      Store(o + j * C + c0, Load(o + j * C + c0) + lo[j]);
      Store(o + j * C + c0 + 8, Load(o + j * C + c0 + 8) + hi[j]);
    }
  }
}

using KernelGradRowFn = void (*)(const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                 int64_t, float*);

KernelGradRowFn PickKernelGradRow(int64_t k, int64_t stride) {
  if (k == 3 && stride == 1) return &KernelGradRow<3, 1>;
  if (k == 3 && stride == 2) return &KernelGradRow<3, 2>;
  if (k == 5 && stride == 1) return &KernelGradRow<5, 1>;
  if (k == 5 && stride == 2) return &KernelGradRow<5, 2>;
  return nullptr;
}

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
  const KernelGradRowFn fast_row = PickKernelGradRow(g.k, g.stride);
  const int64_t C16 = C / 16 * 16;
  ParallelFor(pool, blocks, [&](int64_t block) {
    float* acc = partial.data() + block * taps * C;
    for (int64_t row = block * rows / blocks; row < (block + 1) * rows / blocks; ++row) {
      const int64_t b = row / g.out_height, h = row % g.out_height;
      const float* g_row = gs + row * g.out_width * C;
      for (int64_t i = 0; i < g.k; ++i) {
        const int64_t yy = h * g.stride + i - g.top;
        if (yy < 0 || yy >= g.height) continue;
        const float* x_row = xs + (b * g.height + yy) * g.width * C;
        if (fast_row != nullptr) {
          fast_row(x_row - g.left * C, g_row, C, C16, g.out_width, g.width, g.left,
                   acc + i * g.k * C);
        }
        for (int64_t j = 0; j < g.k; ++j) {
          // Output columns v whose input column v·s + j − left lies inside the row.
          const int64_t shift = j - g.left;
          const int64_t v_lo = shift >= 0 ? 0 : (-shift + g.stride - 1) / g.stride;
          // None when the tap starts past the row's end (C++ division truncates towards 0).
          const int64_t v_hi = g.width - 1 - shift < 0
                                   ? 0
                                   : std::min(g.out_width, (g.width - 1 - shift) / g.stride + 1);
          const float* x_first = x_row + shift * C;
          const int64_t step = g.stride * C;
          float* o = acc + (i * g.k + j) * C;
          int64_t c0 = fast_row != nullptr ? C16 : 0;
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxDepthwiseForward, Forward, DIG_JAX_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxDepthwiseInputGrad, InputGrad, DIG_JAX_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxDepthwiseKernelGrad, KernelGrad, DIG_JAX_BINDING);
