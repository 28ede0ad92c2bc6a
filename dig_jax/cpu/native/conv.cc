// Dense 3×3 convolution, forward pass and kernel gradient (NHWC activations, HWIO kernel,
// float32, strides 1 and 2, padding given as top/left offsets, zero outside the input), as XLA
// FFI handlers for the CPU. The stride-1 input gradient is the forward pass of the output
// gradient with the flipped kernel (`dig_jax.cpu.convs`).
//
// XLA's CPU convolutions (YNNPACK) ran HRNet-18s's narrow 3×3 layers 1.5–3× slower than
// torch's oneDNN (18 → 18 channels at 64² × 8 images: 6.4 against 2.6 ms): they vectorise
// poorly where the channel counts are not multiples of the vector width. This is the classic
// direct convolution: a tile of P neighbouring output pixels × G blocks of 16 output channels
// is summed in registers while the taps and input channels stream by, one broadcast input
// value and G weight vectors per step; the output channels are padded to a multiple of 16 in
// a packed copy of the kernel, so every step is whole vectors, and only the valid lanes are
// stored.
//
// Summation order: for each output value, taps in (row, column) order, input channels in order
// within a tap: the same for every tile shape and thread count, so the bytes do not depend on
// the number of threads.

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Sixteen floats as one value (GCC/Clang vector extension: one AVX-512 register, two AVX ones
// or four NEON ones).
typedef float Vec16 __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline Vec16 Load(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void Store(float* p, Vec16 v, int64_t lanes) {
  if (lanes >= kLanes) {
    std::memcpy(p, &v, sizeof v);
  } else {
    float tmp[kLanes];
    std::memcpy(tmp, &v, sizeof v);
    std::memcpy(p, tmp, sizeof(float) * lanes);
  }
}

struct Geometry {
  int64_t batch, height, width, cin;  // input
  int64_t out_height, out_width, cout;
  int64_t k, stride, top, left;
  int64_t cout_padded;  // packed kernel row length: cout rounded up to a multiple of 16
};

// The geometry of x f32[N, H, W, C_in], y (or dy) f32[N, OH, OW, C_out] and a kernel (or its
// gradient) f32[k, k, C_in, C_out], or the error that says which shape is wrong.
ffi::Error MakeGeometry(ffi::Span<const int64_t> xd, ffi::Span<const int64_t> yd,
                        ffi::Span<const int64_t> wd, int64_t stride, int64_t top, int64_t left,
                        Geometry& g) {
  if (xd.size() != 4 || wd.size() != 4 || yd.size() != 4) {
    return ffi::Error::InvalidArgument("conv: x, y and kernel must be rank 4 (NHWC, HWIO)");
  }
  if (wd[0] != wd[1] || wd[2] != xd[3] || wd[3] != yd[3] || xd[0] != yd[0]) {
    return ffi::Error::InvalidArgument("conv: kernel must be f32[k, k, C_in, C_out]");
  }
  if (stride < 1 || top < 0 || left < 0) {
    return ffi::Error::InvalidArgument("conv: stride >= 1 and non-negative padding");
  }
  g = Geometry{xd[0], xd[1], xd[2], xd[3], yd[1], yd[2], yd[3], wd[0], stride, top, left, 0};
  g.cout_padded = (g.cout + kLanes - 1) / kLanes * kLanes;
  return ffi::Error::Success();
}

// One output row's pixels [v, v + P) × output channels [16·g0, 16·(g0 + G)): `rows[r]` is the
// zero-padded input row that kernel row `kys[r]` reads, starting at the column output pixel
// 0's first tap reads. Accumulates in registers, then stores the valid lanes.
template <int K, int S, int P, int G>
inline void Tile(const Geometry& g, const float* const* rows, const int64_t* kys,
                 int64_t row_count, const float* wp, int64_t v, int64_t g0, float* y_row) {
  const int64_t cin = g.cin, cp = g.cout_padded;
  Vec16 acc[P][G] = {};
  for (int64_t r = 0; r < row_count; ++r) {
    const float* x0 = rows[r] + v * S * cin;
    for (int kx = 0; kx < K; ++kx) {
      const float* xk = x0 + kx * cin;
      const float* wk = wp + ((kys[r] * K + kx) * cin) * cp + g0 * kLanes;
      for (int64_t ci = 0; ci < cin; ++ci) {
        Vec16 w[G];
#pragma GCC unroll 4
        for (int b = 0; b < G; ++b) w[b] = Load(wk + ci * cp + b * kLanes);
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) {
          const float xv = xk[p * S * cin + ci];
#pragma GCC unroll 4
          for (int b = 0; b < G; ++b) acc[p][b] += xv * w[b];
        }
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    for (int b = 0; b < G; ++b) {
      const int64_t c0 = (g0 + b) * kLanes;
      Store(y_row + (v + p) * g.cout + c0, acc[p][b], g.cout - c0);
    }
  }
}

// The whole output row for channel blocks [g0, g0 + G), in tiles of P pixels; the last one
// overlaps the one before where P does not divide the width (its pixels are summed in the same
// order, so the overlap is rewritten with the same bits). Needs out_width >= P.
template <int K, int S, int G, int P>
void RowBlocks(const Geometry& g, const float* const* rows, const int64_t* kys,
               int64_t row_count, const float* wp, int64_t g0, float* y_row) {
  const int64_t n = g.out_width;
  int64_t v = 0;
  for (; v + P <= n; v += P) Tile<K, S, P, G>(g, rows, kys, row_count, wp, v, g0, y_row);
  if (v < n) Tile<K, S, P, G>(g, rows, kys, row_count, wp, n - P, g0, y_row);
}

using RowFn = void (*)(const Geometry&, const float* const*, const int64_t*, int64_t,
                       const float*, int64_t, float*);

// Tile shapes (channel blocks G, pixels P): P·G accumulators stay within the 32 vector
// registers with room for the G weight vectors and a broadcast.
constexpr int kShapes[][2] = {{1, 1}, {1, 4}, {1, 8}, {1, 14}, {2, 1}, {2, 4}, {2, 8}, {2, 12},
                              {3, 1}, {3, 4}, {3, 8},  {4, 1}, {4, 4}, {4, 6}};
constexpr int kShapeCount = sizeof(kShapes) / sizeof(kShapes[0]);

template <int K, int S, int... I>
constexpr std::array<RowFn, kShapeCount> RowFns(std::integer_sequence<int, I...>) {
  return {&RowBlocks<K, S, kShapes[I][0], kShapes[I][1]>...};
}

// Estimated cycles per input channel and tap of one row's blocks with tile shape `i`: each
// step issues P·G multiply-adds and G + P loads, two of each per cycle.
int64_t RowCost(int i, int64_t width) {
  const int64_t G = kShapes[i][0], P = kShapes[i][1];
  if (width < P) return INT64_MAX;
  return (width + P - 1) / P * std::max(P * G, P + G);
}

// A row's plan: (first block, tile shape) segments covering all channel blocks. The blocks go
// in groups of one size G (the remainder as one smaller group), each with its cheapest P;
// the G with the cheapest total wins. Narrow rows (HRNet's 8-pixel stage at 256²) avoid the
// wide tiles' overlap waste this way.
std::vector<std::pair<int64_t, int>> PlanRow(int64_t blocks, int64_t width) {
  auto best_shape = [&](int64_t G) {
    int best = -1;
    for (int i = 0; i < kShapeCount; ++i) {
      if (kShapes[i][0] != G) continue;
      if (best < 0 || RowCost(i, width) < RowCost(best, width)) best = i;
    }
    return best;
  };
  std::vector<std::pair<int64_t, int>> plan;
  int64_t plan_cost = INT64_MAX;
  for (int64_t G = 1; G <= 4 && G <= blocks; ++G) {
    std::vector<std::pair<int64_t, int>> option;
    int64_t cost = 0;
    for (int64_t g0 = 0; g0 < blocks; g0 += G) {
      const int shape = best_shape(std::min(G, blocks - g0));
      option.emplace_back(g0, shape);
      cost += RowCost(shape, width);
    }
    if (cost <= plan_cost) plan = std::move(option), plan_cost = cost;  // ties: wider groups
  }
  return plan;
}

template <int K, int S>
void Correlate(ffi::ThreadPool& pool, const Geometry& g, const float* xs, const float* wp,
               float* ys) {
  static constexpr std::array<RowFn, kShapeCount> kRowFns =
      RowFns<K, S>(std::make_integer_sequence<int, kShapeCount>{});
  const auto plan = PlanRow(g.cout_padded / kLanes, g.out_width);
  // Padded row: every column the output row's taps read, (out_width - 1)·S + K of them.
  const int64_t padded_width = (g.out_width - 1) * S + K;
  const int64_t first = std::min(g.left, padded_width);  // padded columns before the input's
  const int64_t copied = std::max<int64_t>(0, std::min(g.width, padded_width - first));
  ParallelFor(pool, g.batch * g.out_height, [&](int64_t row) {
    const int64_t b = row / g.out_height, h = row % g.out_height;
    // The K input rows, zero-padded left and right, in a buffer of this thread's.
    thread_local std::vector<float> scratch;
    scratch.resize(K * padded_width * g.cin);
    const float* rows[K];
    int64_t kys[K];
    int64_t row_count = 0;
    for (int64_t ky = 0; ky < K; ++ky) {
      const int64_t yy = h * S + ky - g.top;
      if (yy < 0 || yy >= g.height) continue;
      float* padded = scratch.data() + row_count * padded_width * g.cin;
      const float* source = xs + (b * g.height + yy) * g.width * g.cin;
      std::memset(padded, 0, sizeof(float) * first * g.cin);
      std::memcpy(padded + first * g.cin, source, sizeof(float) * copied * g.cin);
      std::memset(padded + (first + copied) * g.cin, 0,
                  sizeof(float) * (padded_width - first - copied) * g.cin);
      rows[row_count] = padded;
      kys[row_count++] = ky;
    }
    float* y_row = ys + row * g.out_width * g.cout;
    if (row_count == 0) {
      std::memset(y_row, 0, sizeof(float) * g.out_width * g.cout);
      return;
    }
    for (const auto& [g0, shape] : plan) kRowFns[shape](g, rows, kys, row_count, wp, g0, y_row);
  });
}

ffi::Error Forward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w,
                   ffi::ResultBuffer<ffi::F32> y, int64_t stride, int64_t top, int64_t left) {
  Geometry g;
  if (ffi::Error e = MakeGeometry(x.dimensions(), y->dimensions(), w.dimensions(), stride, top,
                                  left, g);
      e.failure()) {
    return e;
  }
  // The kernel with its output channels padded by zeros to whole vectors.
  std::vector<float> packed(g.k * g.k * g.cin * g.cout_padded, 0.0f);
  const float* ws = w.typed_data();
  for (int64_t row = 0; row < g.k * g.k * g.cin; ++row) {
    std::memcpy(packed.data() + row * g.cout_padded, ws + row * g.cout, sizeof(float) * g.cout);
  }
  if (g.k == 3 && stride == 1) {
    Correlate<3, 1>(pool, g, x.typed_data(), packed.data(), y->typed_data());
  } else if (g.k == 3 && stride == 2) {
    Correlate<3, 2>(pool, g, x.typed_data(), packed.data(), y->typed_data());
  } else {
    return ffi::Error::InvalidArgument("conv: only 3x3 kernels at stride 1 or 2");
  }
  return ffi::Error::Success();
}

// ---- Kernel gradient -------------------------------------------------------------------------
//
// dw[ky, kx, ci, co] = Σ_{b, h, v} x[b, h·S + ky − top, v·S + kx − left, ci] · dy[b, h, v, co]:
// for each tap a product xᵀ·dy over the output pixels. The same register tile as the forward
// pass with the roles turned: P input channels × G blocks of 16 output channels are summed in
// registers over a block of output rows, one broadcast input value per channel and G output
// gradient vectors per pixel. The output rows go in at most kGradBlocks fixed blocks summed
// separately, then added in block order: the bytes do not depend on the number of threads.

constexpr int64_t kGradBlocks = 16;
constexpr int64_t kGradBlockPixels = 1024;
constexpr int64_t kGradPassBytes = 256 << 10;

struct GradGeometry {
  Geometry g;
  const float* xs;                // x f32[N, H, W, C_in]
  const float* const* dy_rows;    // output gradient rows, each out_width · cout floats, readable
                                  // to a whole vector past the last pixel's valid lanes
};

// out[(ky·K + kx)·C_in + ci0 + j][16·(g0 + b) + lane] (the block's own partial, cout_padded
// wide) += Σ over the output rows [row_begin, row_end) and their pixels whose tap (ky, kx) lies
// inside x of x[.., ci0 + j] · dy[.., 16·(g0 + b) + lane], summed in registers in pixel order
// from the partial's value (so a block's rows may come in several calls, same bits).
template <int K, int S, int P, int G>
void GradTile(const GradGeometry& gg, int64_t row_begin, int64_t row_end, int64_t ky, int64_t kx,
              int64_t ci0, int64_t g0, float* out) {
  const Geometry& g = gg.g;
  const int64_t cin = g.cin, cout = g.cout;
  // Output columns whose tap column lies inside the row.
  const int64_t shift = kx - g.left;
  const int64_t v_lo = shift >= 0 ? 0 : (-shift + S - 1) / S;
  // (Past the row's end when the tap starts beyond it: C++ division truncates towards 0.)
  const int64_t v_hi = g.width - 1 - shift < 0 ? 0 : std::min(g.out_width, (g.width - 1 - shift) / S + 1);
  const int64_t cp = g.cout_padded;
  float* o = out + ((ky * K + kx) * cin + ci0) * cp + g0 * kLanes;
  Vec16 acc[P][G];
  for (int j = 0; j < P; ++j) {
    for (int u = 0; u < G; ++u) acc[j][u] = Load(o + j * cp + u * kLanes);
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t b = row / g.out_height, h = row % g.out_height;
    const int64_t yy = h * S + ky - g.top;
    if (yy < 0 || yy >= g.height) continue;
    const float* x_row = gg.xs + ((b * g.height + yy) * g.width + shift) * cin + ci0;
    const float* dy = gg.dy_rows[row] + g0 * kLanes;
    for (int64_t v = v_lo; v < v_hi; ++v) {
      Vec16 d[G];
#pragma GCC unroll 4
      for (int u = 0; u < G; ++u) d[u] = Load(dy + v * cout + u * kLanes);
      const float* xv = x_row + v * S * cin;
#pragma GCC unroll 16
      for (int j = 0; j < P; ++j) {
        const float x = xv[j];
#pragma GCC unroll 4
        for (int u = 0; u < G; ++u) acc[j][u] += x * d[u];
      }
    }
  }
  for (int j = 0; j < P; ++j) {
    for (int u = 0; u < G; ++u) std::memcpy(o + j * cp + u * kLanes, &acc[j][u], sizeof(Vec16));
  }
}

using GradFn = void (*)(const GradGeometry&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        float*);

template <int K, int S, int... I>
constexpr std::array<GradFn, kShapeCount> GradFns(std::integer_sequence<int, I...>) {
  return {&GradTile<K, S, kShapes[I][1], kShapes[I][0]>...};
}

// (first input channel, first block, tile shape) pieces covering C_in × the channel blocks:
// the blocks in groups of one size G (the remainder as one smaller group), the input channels
// cut greedily into that G's tile widths, largest first (a kernel gradient's tiles cannot
// overlap: a channel summed twice would count twice); the G with the fewest estimated cycles.
std::vector<std::array<int64_t, 3>> PlanGrad(int64_t blocks, int64_t cin) {
  std::vector<std::array<int64_t, 3>> plan;
  int64_t plan_cost = INT64_MAX;
  for (int64_t G = 1; G <= 4 && G <= blocks; ++G) {
    std::vector<std::array<int64_t, 3>> option;
    int64_t cost = 0;
    for (int64_t g0 = 0; g0 < blocks; g0 += G) {
      const int64_t width = std::min(G, blocks - g0);
      int64_t ci = 0;
      for (int i = kShapeCount - 1; i >= 0; --i) {  // widest P first (shapes sorted by P per G)
        if (kShapes[i][0] != width) continue;
        const int64_t P = kShapes[i][1];
        for (; ci + P <= cin; ci += P) {
          option.push_back({ci, g0, i});
          cost += std::max(P * width, P + width);
        }
      }
    }
    if (cost <= plan_cost) plan = std::move(option), plan_cost = cost;
  }
  return plan;
}

template <int K, int S>
void KernelGradient(ffi::ThreadPool& pool, const GradGeometry& gg, float* dw) {
  static constexpr std::array<GradFn, kShapeCount> kGradFns =
      GradFns<K, S>(std::make_integer_sequence<int, kShapeCount>{});
  const Geometry& g = gg.g;
  const auto plan = PlanGrad(g.cout_padded / kLanes, g.cin);
  const int64_t rows = g.batch * g.out_height;
  // Blocks of at least kGradBlockPixels output pixels: each block's partial is a whole kernel.
  const int64_t blocks = std::clamp<int64_t>(rows * g.out_width / kGradBlockPixels, 1,
                                             std::min(rows, kGradBlocks));
  const int64_t size = K * K * g.cin * g.cout_padded;
  std::vector<float> partial(blocks * size, 0.0f);
  // One task per (row block, tap): every piece of the plan writes its own part of the block's
  // partial, so tasks never share an output element.
  // Rows per pass over the plan: the input rows they read (~kGradPassBytes) stay in cache
  // while every piece of the plan streams them.
  const int64_t row_bytes = std::max<int64_t>(1, S * g.width * g.cin * 4);
  const int64_t pass_rows = std::max<int64_t>(1, kGradPassBytes / row_bytes);
  ParallelFor(pool, blocks * K * K, [&](int64_t task) {
    const int64_t block = task / (K * K), tap = task % (K * K);
    const int64_t row_begin = block * rows / blocks, row_end = (block + 1) * rows / blocks;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += pass_rows) {
      const int64_t r1 = std::min(row_end, r0 + pass_rows);
      for (const auto& [ci0, g0, shape] : plan) {
        kGradFns[shape](gg, r0, r1, tap / K, tap % K, ci0, g0, partial.data() + block * size);
      }
    }
  });
  // Sum the blocks in order, then drop the padded lanes.
  float* __restrict sum = partial.data();
  for (int64_t block = 1; block < blocks; ++block) {
    const float* __restrict p = partial.data() + block * size;
    for (int64_t e = 0; e < size; ++e) sum[e] += p[e];
  }
  for (int64_t e = 0; e < K * K * g.cin; ++e) {
    std::memcpy(dw + e * g.cout, sum + e * g.cout_padded, sizeof(float) * g.cout);
  }
}

ffi::Error KernelGrad(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> dy,
                      ffi::ResultBuffer<ffi::F32> dw, int64_t stride, int64_t top, int64_t left) {
  Geometry g;
  if (ffi::Error e = MakeGeometry(x.dimensions(), dy.dimensions(), dw->dimensions(), stride,
                                  top, left, g);
      e.failure()) {
    return e;
  }
  const int64_t rows = g.batch * g.out_height, row_floats = g.out_width * g.cout;
  // Vector loads of a row's last pixel read up to 15 floats past its valid lanes: inside the
  // buffer except for the last row, which is read from a padded copy.
  std::vector<const float*> dy_rows(rows);
  std::vector<float> last(row_floats + kLanes, 0.0f);
  for (int64_t r = 0; r < rows; ++r) dy_rows[r] = dy.typed_data() + r * row_floats;
  if (rows > 0) {
    std::memcpy(last.data(), dy_rows[rows - 1], sizeof(float) * row_floats);
    dy_rows[rows - 1] = last.data();
  }
  const GradGeometry gg{g, x.typed_data(), dy_rows.data()};
  if (g.k == 3 && stride == 1) {
    KernelGradient<3, 1>(pool, gg, dw->typed_data());
  } else if (g.k == 3 && stride == 2) {
    KernelGradient<3, 2>(pool, gg, dw->typed_data());
  } else {
    return ffi::Error::InvalidArgument("conv: only 3x3 kernels at stride 1 or 2");
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxConvForward, Forward, DIG_JAX_BINDING);
XLA_FFI_DEFINE_HANDLER_SYMBOL(DigJaxConvKernelGrad, KernelGrad, DIG_JAX_BINDING);
