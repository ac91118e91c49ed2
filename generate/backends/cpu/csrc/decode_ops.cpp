// The small operations of a decode step, fused, for generate/backends/cpu/fused.py: RMSNorm (with the
// residual add before it), rotary embedding (with the cache write after it) and SwiGLU's gate.
//
// Why: in transformers' Llama forward each of these is 4-10 PyTorch ops, each a dispatch and a
// pass over memory: together they took more of a CPU decode step than attention did. Here each is
// one pass over a few kilobytes per row.
// Every intermediate is rounded to bf16 where transformers' bf16 ops round it, so results match
// the model's own forward to the last bit except where fp32 sums are taken in another order.
//
// Tensors are bf16, on CPU; rows (B) are contiguous unless said otherwise. Rows are independent, so
// a prefill pass (thousands of rows) splits them over the threads; a decode step's few dozen rows
// stay on one (each op is tens of microseconds there, about what starting the threads costs).
#include "simd.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cmath>
#include <cstring>

namespace {

constexpr int64_t ROWS_PER_TASK = 64;  // rows of norm or rotary work past which threads pay off

void check(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kBFloat16 && t.device().is_cpu(), name, " must be a bf16 CPU tensor");
}

// One row: out = bf16(w * bf16(x * rsqrt(mean(x^2) + eps))), transformers' LlamaRMSNorm.
void norm_row(const at::BFloat16* x, const at::BFloat16* w, at::BFloat16* out, int64_t H, float eps) {
  __m512 ss = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= H; i += 16) { const __m512 v = load_bf16(x + i); ss = _mm512_fmadd_ps(v, v, ss); }
  if (i < H) { const __m512 v = load_bf16(x + i, H - i); ss = _mm512_fmadd_ps(v, v, ss); }
  const __m512 r = _mm512_set1_ps(1.f / std::sqrt(_mm512_reduce_add_ps(ss) / H + eps));
  for (i = 0; i + 16 <= H; i += 16)
    store_bf16(out + i, _mm512_mul_ps(load_bf16(w + i), round_bf16(_mm512_mul_ps(load_bf16(x + i), r))));
  if (i < H) {
    const int n = H - i;
    store_bf16(out + i, _mm512_mul_ps(load_bf16(w + i, n), round_bf16(_mm512_mul_ps(load_bf16(x + i, n), r))), n);
  }
}

// One head of D lanes: q * cos + rotate_half(q) * sin, each product and the sum rounded to bf16.
void rotate_head(const at::BFloat16* x, const at::BFloat16* c, const at::BFloat16* s, at::BFloat16* out, int64_t D) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; i += 16) {
    const __m512 lo = load_bf16(x + i), hi = load_bf16(x + half + i);
    const __m512 a = round_bf16(_mm512_mul_ps(lo, load_bf16(c + i)));
    const __m512 b = round_bf16(_mm512_mul_ps(hi, load_bf16(s + i)));
    store_bf16(out + i, _mm512_sub_ps(a, b));  // rotate_half puts -hi in the low half
    const __m512 a2 = round_bf16(_mm512_mul_ps(hi, load_bf16(c + half + i)));
    const __m512 b2 = round_bf16(_mm512_mul_ps(lo, load_bf16(s + half + i)));
    store_bf16(out + half + i, _mm512_add_ps(a2, b2));
  }
}

}  // namespace

// x: (B, H); w: (H). RMSNorm of each row.
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps) {
  check(x, "x"); check(w, "w");
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const int64_t B = xc.size(0), H = xc.size(1);
  at::parallel_for(0, B, ROWS_PER_TASK, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      norm_row(xc.data_ptr<at::BFloat16>() + b * H, w.data_ptr<at::BFloat16>(), out.data_ptr<at::BFloat16>() + b * H,
               H, float(eps));
  });
  return out;
}

// x: (B, H) contiguous, updated in place to bf16(x + r) (the residual stream); returns its RMSNorm.
torch::Tensor add_rms_norm(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps) {
  check(x, "x"); check(r, "r"); check(w, "w");
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  auto rc = r.contiguous();
  auto out = torch::empty_like(x);
  const int64_t B = x.size(0), H = x.size(1);
  auto* xp = x.data_ptr<at::BFloat16>();
  const auto* rp = rc.data_ptr<at::BFloat16>();
  at::parallel_for(0, B, ROWS_PER_TASK, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      at::BFloat16* row = xp + b * H;
      int64_t i = 0;
      for (; i + 16 <= H; i += 16) store_bf16(row + i, _mm512_add_ps(load_bf16(row + i), load_bf16(rp + b * H + i)));
      if (i < H) store_bf16(row + i, _mm512_add_ps(load_bf16(row + i, H - i), load_bf16(rp + b * H + i, H - i)), H - i);
      norm_row(row, w.data_ptr<at::BFloat16>(), out.data_ptr<at::BFloat16>() + b * H, H, float(eps));
    }
  });
  return out;
}

// qkv: (B, (Hq + 2 Hkv) D), the fused projection's output; cos, sin: (B, D), the rotary tables at
// each row's position. Returns the rotated queries (B, Hq, D); the rotated keys and the values are
// written at column `col` of k_cache and v_cache, (B, Hkv, W, D) with unit stride on D.
torch::Tensor rope_store(torch::Tensor qkv, torch::Tensor cos, torch::Tensor sin, torch::Tensor k_cache,
                         torch::Tensor v_cache, int64_t col, int64_t q_heads) {
  check(qkv, "qkv"); check(cos, "cos"); check(sin, "sin"); check(k_cache, "k_cache"); check(v_cache, "v_cache");
  const int64_t B = qkv.size(0), D = cos.size(1), kv_heads = k_cache.size(1);
  TORCH_CHECK(D % 32 == 0 && qkv.size(1) == (q_heads + 2 * kv_heads) * D, "rope_store: bad shapes");
  TORCH_CHECK(k_cache.stride(3) == 1 && v_cache.stride(3) == 1 && col < k_cache.size(2), "rope_store: bad cache");
  auto qc = qkv.contiguous(), cc = cos.contiguous(), sc = sin.contiguous();
  auto q = torch::empty({B, q_heads, D}, qkv.options());
  const auto* in = qc.data_ptr<at::BFloat16>();
  auto *kp = k_cache.data_ptr<at::BFloat16>(), *vp = v_cache.data_ptr<at::BFloat16>();
  at::parallel_for(0, B, ROWS_PER_TASK, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const at::BFloat16* row = in + b * qc.size(1);
      const at::BFloat16 *c = cc.data_ptr<at::BFloat16>() + b * D, *s = sc.data_ptr<at::BFloat16>() + b * D;
      for (int64_t h = 0; h < q_heads; ++h)
        rotate_head(row + h * D, c, s, q.data_ptr<at::BFloat16>() + (b * q_heads + h) * D, D);
      for (int64_t h = 0; h < kv_heads; ++h) {
        rotate_head(row + (q_heads + h) * D, c, s,
                    kp + b * k_cache.stride(0) + h * k_cache.stride(1) + col * k_cache.stride(2), D);
        std::memcpy(vp + b * v_cache.stride(0) + h * v_cache.stride(1) + col * v_cache.stride(2),
                    row + (q_heads + kv_heads + h) * D, D * sizeof(at::BFloat16));
      }
    }
  });
  return q;
}

// gu: (B, 2 I), the fused gate and up projections. Returns bf16(bf16(silu(gate)) * up), (B, I).
torch::Tensor silu_mul(torch::Tensor gu) {
  check(gu, "gu");
  auto gc = gu.contiguous();
  const int64_t B = gc.size(0), I = gc.size(1) / 2;
  TORCH_CHECK(I % 16 == 0, "silu_mul: width must be a multiple of 32");
  auto out = torch::empty({B, I}, gc.options());
  const __m512 one = _mm512_set1_ps(1.f);
  // A row here is heavier (exp and a division per lane), so a quarter of the grain of the others.
  at::parallel_for(0, B, ROWS_PER_TASK / 4, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const at::BFloat16 *g = gc.data_ptr<at::BFloat16>() + b * 2 * I, *u = g + I;
      at::BFloat16* o = out.data_ptr<at::BFloat16>() + b * I;
      for (int64_t i = 0; i < I; i += 16) {
        const __m512 x = load_bf16(g + i);
        // x / (1 + exp(-x)) from e = exp(-|x|) <= 1, never overflowing: x / (1 + e) for x >= 0 (as
        // PyTorch computes it), x e / (1 + e) below.
        const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
        const __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), one, e);
        const __m512 silu = round_bf16(_mm512_div_ps(_mm512_mul_ps(x, num), _mm512_add_ps(one, e)));
        store_bf16(o + i, _mm512_mul_ps(silu, load_bf16(u + i)));
      }
    }
  });
  return out;
}

// How many threads `at::parallel_for` runs this extension's kernels on: torch's thread count where
// the extension was compiled with OpenMP, 1 where it was not (then every kernel here runs serially).
int64_t parallel_threads() {
  std::atomic<uint64_t> seen{0};
  at::parallel_for(0, 64, 1, [&](int64_t, int64_t) { seen |= uint64_t(1) << (at::get_thread_num() % 64); });
  return __builtin_popcountll(seen.load());
}

torch::Tensor decode_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor mask, double scale);
torch::Tensor prefill_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor mask, double scale);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attention", &decode_attention);
  m.def("prefill_attention", &prefill_attention);
  m.def("rms_norm", &rms_norm);
  m.def("add_rms_norm", &add_rms_norm);
  m.def("rope_store", &rope_store);
  m.def("silu_mul", &silu_mul);
  m.def("parallel_threads", &parallel_threads);
}
