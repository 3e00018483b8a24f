// Attention in tiles of keys with an online softmax (attention.h has the summation order), over the active ISA table's
// register tiles: S = Q K^T on the key panels as they are stored (f16 read straight where the table can, otherwise a
// tile's panels widened exactly into f32 first), P V on the value rows (widened likewise). A bf16 cache on a table
// with BF16 dot products takes them instead (attention_bf16_products): Q and P rounded to BF16 pairs (k, k + 1 in one
// word), each key panel and each block of value columns paired likewise, multiplied by vdpbf16ps.
#include "plainllama/kernels/attention.h"

#include <algorithm>
#include <cmath>

#include "isa/isa.h"
#include "plainllama/io/dtype.h"
#include "plainllama/sys/team.h"

namespace plainllama {

namespace {
using isa::BF16;
using isa::F16;
using isa::Kernels;
using isa::kMRMax;
using isa::kNR;

constexpr int64_t kTokenChunk = 32;  // query tokens per work item
static_assert(kKeyTile % kPanel == 0, "a key tile is whole panels");
// Work below this many QK multiply-adds stays on the calling thread. Decode's attention reads K and V rows that the
// weights streamed since the last token have pushed out of every cache, so it goes to the threads early.
constexpr int64_t kParallelAttention = kParallelWork / 16;
// Decode splits each KV head's tiles into about this many items per thread: few, since an item's first tile is read
// before its prefetch can start.
constexpr int64_t kItemsPerThread = 2;
// P V runs over this many keys at a time (one fma chain continued): the next tile's values are prefetched a run apart.
constexpr int64_t kPvRun = 64;

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
int64_t n_tiles(int64_t keys) { return (keys + kKeyTile - 1) / kKeyTile; }

// One thread's buffers for `rows` query rows (token t0 + r / nq, query head h0 + r % nq).
struct Work {
    float* Q;                // [rows, hd]
    float* S;                // [rows, kKeyTile] scores, then e^(s - m)
    float* O;                // [rows, hd] the tiles folded so far
    float* Ot;               // [rows, hd] this tile's P V
    float *m, *l, *mt, *lt;  // [rows] the fold's and this tile's max and sum
    int64_t* n;              // [rows] keys of this tile each row sees
    float* Kf;               // [kKeyTile, hd] a tile's key panels widened to f32
    float* Vf;               // [kKeyTile, hd] a tile's values widened to f32
    float* d;                // [kPanel] a q8_0 panel block's scales
    uint32_t* Qp;            // [rows, hd / 2] BF16 pairs of Q (products in pairs)
    uint32_t* Pp;            // [rows, kKeyTile / 2] BF16 pairs of this tile's e^(s - m)
    // The next tile's keys and values, on their way into the caches a step at a time while this tile computes: a key
    // panel's worth per panel of scores, a run's worth per run of P V.
    struct Ahead {
        const uint8_t* p = nullptr;
        size_t left = 0;
        void step(size_t bytes) {
            const size_t n = std::min(bytes, left);
            for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
            p += n, left -= n;
        }
    };
    Ahead keys, values;
};
int64_t work_floats(int64_t rows, int64_t hd) {
    return round16(rows * hd) * 4 + round16(rows * kKeyTile) + 6 * round16(rows) + 2 * round16(kKeyTile * hd) + 32 +
           round16(rows * hd / 2) + round16(rows * kKeyTile / 2);
}
Work work_at(float* p, int64_t rows, int64_t hd) {
    Work w;
    auto take = [&](int64_t n) {
        float* r = p;
        p += round16(n);
        return r;
    };
    w.Q = take(rows * hd), w.S = take(rows * kKeyTile), w.O = take(rows * hd), w.Ot = take(rows * hd);
    w.m = take(rows), w.l = take(rows), w.mt = take(rows), w.lt = take(rows);
    w.n = reinterpret_cast<int64_t*>(take(2 * rows));
    w.Kf = take(kKeyTile * hd), w.Vf = take(kKeyTile * hd), w.d = take(32);
    w.Qp = reinterpret_cast<uint32_t*>(take(rows * hd / 2));
    w.Pp = reinterpret_cast<uint32_t*>(take(rows * kKeyTile / 2));
    return w;
}

// Whether the products run in BF16 pairs (attention_bf16_products): then, for more than kPairsDirectRows rows, Kf
// holds a key panel as pairs of dimensions [hd / 2][kPanel] and Vf a block of kNR value columns as pairs of keys
// [ceil(nk / 2)][kNR]; fewer rows pair them as they read them (the same words).
bool in_pairs(const Kernels& ks, const KvView& c) {
    return c.type == CacheType::bf16 && ks.pairs_bf16_rows != nullptr && c.head_dim % kNR == 0;
}
constexpr int64_t kPairsDirectRows = 48;

size_t key_bytes(const KvView& c, int64_t nk) { return size_t((nk + kPanel - 1) / kPanel) * kv_panel_bytes(c); }
size_t value_bytes(const KvView& c, int64_t nk) { return size_t(nk) * kv_row_bytes(c.type, c.head_dim); }

// n stored values of a 16-bit cache (f16 or bf16) widened exactly to f32.
void widen16(const Kernels& ks, CacheType t, float* dst, const uint8_t* src, int64_t n) {
    if (t == CacheType::f16)
        ks.widen_f16(dst, reinterpret_cast<const F16*>(src), n);
    else
        ks.widen_bf16(dst, reinterpret_cast<const BF16*>(src), n);
}

// Keys [a, a + nk) and their values of head g on their way into the caches, at once (an item's first tile).
void prefetch_tile(const KvView& c, int64_t g, int64_t a, int64_t nk) {
    Work::Ahead k{kv_key_panel(c, g, a), key_bytes(c, nk)}, v{kv_value_row(c, g, a), value_bytes(c, nk)};
    k.step(k.left), v.step(v.left);
}

// out[r, :] (+)= x[r] W for rows r < rows, in register tiles of up to kMRMax rows: tiles[mr](out + r ldo, ldo,
// x + r ldx, ldx, W...) with any of the table's tile kinds (MicroTile, DotTile, DotRowsTile) and their W arguments.
template <class Tile, class X, class... W>
void rows_tiles(const Tile* tiles, int64_t rows, float* out, int64_t ldo, const X* x, int64_t ldx, W... w) {
    for (int64_t r = 0; r < rows; r += kMRMax) {
        const int mr = int(std::min<int64_t>(kMRMax, rows - r));
        tiles[mr](out + r * ldo, ldo, x + r * ldx, ldx, w...);
    }
}

// w.S[r, :nk] = Q[r] . key a + j, for the nk keys of the tile starting at a (a multiple of kKeyTile).
void scores(const Kernels& ks, const KvView& c, int64_t g, int64_t a, int64_t nk, int64_t rows, Work& w) {
    const int64_t hd = c.head_dim, np = (nk + kPanel - 1) / kPanel;
    const uint8_t* P = kv_key_panel(c, g, a);
    const size_t pb = kv_panel_bytes(c);
    auto panels = [&](const auto* tiles, const auto* K) {  // K: the np panels [hd][kPanel], one after another
        for (int64_t p = 0; p < np; ++p) {
            w.keys.step(pb);
            rows_tiles(tiles, rows, w.S + p * kPanel, kKeyTile, w.Q, hd, K + p * hd * kPanel, kNR, hd,
                       std::min<int64_t>(kPanel, nk - p * kPanel), false);
        }
    };
    if (c.type == CacheType::f32) return panels(ks.tile_f32, reinterpret_cast<const float*>(P));
    if (in_pairs(ks, c)) {  // each panel [hd][kPanel] as pairs of dimensions [hd / 2][kPanel], then its scores
        const int64_t hp = hd / 2;
        uint32_t* Kp = reinterpret_cast<uint32_t*>(w.Kf);  // one panel paired
        for (int64_t p = 0; p < np; ++p) {
            w.keys.step(pb);
            const BF16* panel = reinterpret_cast<const BF16*>(P + p * pb);
            const int64_t nr = std::min<int64_t>(kPanel, nk - p * kPanel);
            if (rows <= kPairsDirectRows) {
                rows_tiles(ks.tile_bf16_dot_rows, rows, w.S + p * kPanel, kKeyTile, w.Qp, hp, panel, kPanel, hp, nr,
                           false);
            } else {
                ks.pairs_bf16_rows(Kp, panel, kPanel, hd);
                rows_tiles(ks.tile_bf16_dot, rows, w.S + p * kPanel, kKeyTile, w.Qp, hp, Kp, hp, nr, false);
            }
        }
        return;
    }
    if (c.type == CacheType::f16 && rows <= ks.f16_direct_rows)
        return panels(ks.tile_f16, reinterpret_cast<const F16*>(P));
    // widened exactly into f32 panels [np][hd][kPanel], then the f32 tiles: the same sums
    if (c.type == CacheType::f16 || c.type == CacheType::bf16) {
        widen16(ks, c.type, w.Kf, P, np * kPanel * hd);
    } else {
        for (int64_t p = 0; p < np; ++p)
            for (int64_t b = 0; b < hd / kKvQ8Block; ++b) {
                const uint8_t* blk = P + p * pb + size_t(b) * kKvQ8PanelBlock;
                ks.widen_f16(w.d, reinterpret_cast<const F16*>(blk), kPanel);
                ks.scale_i8_rows(w.Kf + (p * hd + b * kKvQ8Block) * kPanel,
                                 reinterpret_cast<const int8_t*>(blk + 2 * kPanel), w.d, kKvQ8Block);
            }
    }
    panels(ks.tile_f32, static_cast<const float*>(w.Kf));
}

// tile_state's P V in BF16 pairs over V [nk, hd] (bf16): each row's p_j as pairs of keys, each block of kNR value
// columns as pairs of keys (made as they are read for few rows, else paired first: the same words), then the same
// runs as the f32 form over the pairs every row sees, each row's own further pairs, and a row's last key alone when it
// sees an odd number (its product with a 0 partner would read a later key's value): p v exactly in f32 (8-bit
// significands), added with one rounding.
void pv_pairs(const Kernels& ks, const BF16* V, int64_t nk, int64_t rows, size_t run_bytes, Work& w, int64_t hd) {
    constexpr int64_t kp = kKeyTile / 2, kRunPairs = kPvRun / 2;
    const int64_t shared = w.n[0] / 2;
    const bool direct = rows <= kPairsDirectRows;
    for (int64_t r = 0; r < rows; ++r)
        if (w.n[r] > 0) ks.round_bf16_pairs(w.Pp + r * kp, w.S + r * kKeyTile, w.n[r]);
    uint32_t* B = reinterpret_cast<uint32_t*>(w.Vf);  // [ceil(nk / 2)][kNR]: one block of columns paired
    for (int64_t n0 = 0; n0 < hd; n0 += kNR) {
        if (!direct) ks.pairs_bf16_rows(B, V + n0, hd, nk);
        // out rows (+)= x rows . pairs j0 .. j0 + pc - 1 of this block of columns
        auto dot = [&](float* out, const uint32_t* x, int64_t n, int64_t j0, int64_t pc, bool acc) {
            if (direct)
                rows_tiles(ks.tile_bf16_dot_rows, n, out, hd, x, kp, V + 2 * j0 * hd + n0, hd, pc, kNR, acc);
            else
                rows_tiles(ks.tile_bf16_dot, n, out, hd, x, kp, B + j0 * kNR, pc, kNR, acc);
        };
        for (int64_t j = 0; j < shared; j += kRunPairs) {
            w.values.step(run_bytes);
            dot(w.Ot + n0, w.Pp + j, rows, j, std::min(kRunPairs, shared - j), j > 0);
        }
        if (shared == 0)
            for (int64_t r = 0; r < rows; ++r) std::fill_n(w.Ot + r * hd + n0, kNR, 0.0f);
        for (int64_t r = 0; r < rows; ++r) {
            float* o = w.Ot + r * hd + n0;
            if (w.n[r] / 2 > shared) dot(o, w.Pp + r * kp + shared, 1, shared, w.n[r] / 2 - shared, true);
            if (w.n[r] % 2) {
                const int64_t k = w.n[r] - 1;
                const float p = bf16_to_f32(uint16_t(w.Pp[r * kp + k / 2]));  // key k's, the pair's low half
                const BF16* v = V + k * hd + n0;
                for (int64_t i = 0; i < kNR; ++i) o[i] += p * bf16_to_f32(v[i].bits);
            }
        }
    }
}

// This tile's partial softmax state for every row: w.n[r] keys seen (0: none), w.mt, w.lt, w.Ot (attention.h). Rows
// r < rows are query heads of tokens at positions p0 + r / nq; the tile starts at key a and nk keys are the last
// row's.
void tile_state(const Kernels& ks, const KvView& c, int64_t g, int64_t a, int64_t nk, int64_t rows, int64_t nq,
                int64_t p0, float scale, Work& w) {
    const int64_t hd = c.head_dim;
    scores(ks, c, g, a, nk, rows, w);
    for (int64_t r = 0; r < rows; ++r) {
        w.n[r] = std::clamp<int64_t>(p0 + r / nq + 1 - a, 0, nk);
        if (w.n[r] > 0) w.lt[r] = ks.exp_shifted(w.S + r * kKeyTile, w.n[r], scale, &w.mt[r]);
    }
    // O = P V over the keys every row sees (the first token's), then each row's own further keys continue the same
    // fma chain: a later token's V is never read for an earlier one, and each row's sum is the one decoding it alone
    // computes over the tile. f16 values are read straight by the table's f16 tiles where they can (whole blocks of
    // kNR dimensions, few rows), else widened first, as f16 keys: the same sums either way.
    const int64_t shared = w.n[0];
    const size_t run_bytes = size_t(kPvRun) * kv_row_bytes(c.type, hd) * size_t(kNR) / size_t(hd);
    auto pv = [&](const auto* tiles, const auto* V) {  // V [nk, hd]
        for (int64_t n0 = 0; n0 < hd; n0 += kNR) {
            const int64_t nr = std::min(kNR, hd - n0);
            for (int64_t j = 0; j < shared; j += kPvRun) {
                w.values.step(run_bytes);
                rows_tiles(tiles, rows, w.Ot + n0, hd, w.S + j, kKeyTile, V + j * hd + n0, hd,
                           std::min(kPvRun, shared - j), nr, j > 0);
            }
            if (shared == 0)
                for (int64_t r = 0; r < rows; ++r) std::fill_n(w.Ot + r * hd + n0, nr, 0.0f);
            for (int64_t r = 0; r < rows; ++r)
                if (w.n[r] > shared)
                    tiles[1](w.Ot + r * hd + n0, 0, w.S + r * kKeyTile + shared, 0, V + shared * hd + n0, hd,
                             w.n[r] - shared, nr, true);
        }
    };
    const uint8_t* V = kv_value_row(c, g, a);
    if (in_pairs(ks, c)) return pv_pairs(ks, reinterpret_cast<const BF16*>(V), nk, rows, run_bytes, w, hd);
    if (c.type == CacheType::f32) return pv(ks.tile_f32, reinterpret_cast<const float*>(V));
    if (c.type == CacheType::f16 && hd % kNR == 0 && rows <= ks.f16_direct_rows)
        return pv(ks.tile_f16, reinterpret_cast<const F16*>(V));
    if (c.type == CacheType::f16 || c.type == CacheType::bf16)
        widen16(ks, c.type, w.Vf, V, nk * hd);
    else
        ks.dequantize(QuantType::q8_0, V, w.Vf, nk * hd);
    pv(ks.tile_f32, static_cast<const float*>(w.Vf));
}

// The fold (attention.h): state (O, m, l) with tile state (Ot, mt, lt); the first tile is taken as it is.
void fold(float* O, float* m, float* l, const float* Ot, float mt, float lt, int64_t hd, bool first) {
    if (first) {
        std::copy_n(Ot, hd, O);
        *m = mt, *l = lt;
        return;
    }
    const float M = std::max(*m, mt), x = std::exp(*m - M), y = std::exp(mt - M);
    *l = *l * x + lt * y;
    for (int64_t i = 0; i < hd; ++i) O[i] = O[i] * x + Ot[i] * y;
    *m = M;
}

}  // namespace

bool attention_bf16_products(CacheType type, int64_t head_dim) {
    return in_pairs(isa::active(), KvView{type, nullptr, nullptr, 1, head_dim, 0});
}

int64_t attention_scratch(int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t ctx, int64_t head_dim,
                          int64_t threads) {
    const int64_t rows = std::min(T, kTokenChunk) * (n_heads / n_kv_heads);
    return threads * work_floats(rows, head_dim) + n_heads * n_tiles(ctx) * (head_dim + 2);
}

void attention(float* out, const float* q, const KvView& kv, int64_t T, int64_t pos0, int64_t n_heads, float* scratch) {
    const Kernels& ks = isa::active();
    const int64_t n_kv = kv.n_kv_heads, group = n_heads / n_kv, hd = kv.head_dim;
    const float scale = 1.0f / std::sqrt(float(hd));
    const int64_t rows_max = std::min(T, kTokenChunk) * group, per_thread = work_floats(rows_max, hd);
    const int64_t threads = thread_count();
    float* states = scratch + threads * per_thread;  // [n_heads, tiles, hd + 2]: decode's split tiles
    const int64_t chunks = (T + kTokenChunk - 1) / kTokenChunk, last_tiles = n_tiles(pos0 + T);
    const bool parallel = use_threads(n_heads * T * (pos0 + T) * hd >= kParallelAttention);

    // Rows of query heads h0 .. h0 + nq - 1 of tokens t0 .. t1 - 1, over tiles [i0, i1): folded into out, or (split
    // decode) each tile's state kept in `states`.
    auto rows_item = [&](Work w, int64_t g, int64_t h0, int64_t nq, int64_t t0, int64_t t1, int64_t i0, int64_t i1,
                         bool keep) {
        const int64_t rows = (t1 - t0) * nq, p0 = pos0 + t0, p_last = pos0 + t1 - 1;
        for (int64_t t = t0; t < t1; ++t) std::copy_n(q + (t * n_heads + h0) * hd, nq * hd, w.Q + (t - t0) * nq * hd);
        if (in_pairs(ks, kv))
            for (int64_t r = 0; r < rows; ++r) ks.round_bf16_pairs(w.Qp + r * hd / 2, w.Q + r * hd, hd);
        auto keys = [&](int64_t i) { return std::min(kKeyTile, p_last + 1 - i * kKeyTile); };
        prefetch_tile(kv, g, i0 * kKeyTile, keys(i0));
        for (int64_t i = i0; i < i1; ++i) {
            w.keys = w.values = {};
            if (const int64_t a = (i + 1) * kKeyTile; i + 1 < i1) {
                w.keys = {kv_key_panel(kv, g, a), key_bytes(kv, keys(i + 1))};
                w.values = {kv_value_row(kv, g, a), value_bytes(kv, keys(i + 1))};
            }
            tile_state(ks, kv, g, i * kKeyTile, keys(i), rows, nq, p0, scale, w);
            for (int64_t r = 0; r < rows; ++r) {
                if (w.n[r] == 0) continue;  // a later tile than this row's last
                if (keep) {
                    float* s = states + ((h0 + r) * last_tiles + i) * (hd + 2);
                    std::copy_n(w.Ot + r * hd, hd, s);
                    s[hd] = w.mt[r], s[hd + 1] = w.lt[r];
                } else {
                    fold(w.O + r * hd, &w.m[r], &w.l[r], w.Ot + r * hd, w.mt[r], w.lt[r], hd, i == 0);
                }
            }
        }
        if (keep) return;
        for (int64_t r = 0; r < rows; ++r) {
            float* o = out + ((t0 + r / nq) * n_heads + h0 + r % nq) * hd;
            for (int64_t e = 0; e < hd; ++e) o[e] = w.O[r * hd + e] / w.l[r];
        }
    };

    // Decode wants about kItemsPerThread items per thread: this many spans of each KV head's tiles. With one (as many
    // heads as items), decode is the prompt's case below with one token, each head's tiles folded in order by its item.
    const int64_t spans_wanted = std::max<int64_t>(1, (kItemsPerThread * threads + n_kv - 1) / n_kv);
    if (T == 1 && parallel && last_tiles > 1 && spans_wanted > 1) {
        // Flash-decoding: each KV head's tiles in spans over the threads, each tile's state kept; then the states
        // fold in tile order here, the same fold as a prompt's.
        const int64_t span = (last_tiles + spans_wanted - 1) / spans_wanted, spans = (last_tiles + span - 1) / span;
        team_for_each(int(threads), n_kv * spans, [&](int64_t it, int slot) {
            const int64_t g = it % n_kv, s = it / n_kv;
            const Work w = work_at(scratch + slot * per_thread, group, hd);
            rows_item(w, g, g * group, group, 0, 1, s * span, std::min(last_tiles, (s + 1) * span), true);
        });
        for (int64_t h = 0; h < n_heads; ++h) {
            const Work w = work_at(scratch, group, hd);
            float m = 0, l = 0;
            for (int64_t i = 0; i < last_tiles; ++i) {
                const float* s = states + (h * last_tiles + i) * (hd + 2);
                fold(w.O, &m, &l, s, s[hd], s[hd + 1], hd, i == 0);
            }
            for (int64_t e = 0; e < hd; ++e) out[h * hd + e] = w.O[e] / l;
        }
        return;
    }

    // Work items: (chunk of tokens, KV head, part of its query heads), the last chunks (most keys) first. The group's
    // query heads are split only when there are fewer (chunk, KV head) pairs than threads; each row is computed alike
    // either way.
    const int64_t pairs = n_kv * chunks;
    const int64_t want = (threads + pairs - 1) / pairs, per_part = pairs >= threads ? group : (group + want - 1) / want;
    const int64_t parts = (group + per_part - 1) / per_part, items = pairs * parts;
    auto item = [&](int64_t it, int slot) {
        const int64_t c = chunks - 1 - it / (n_kv * parts), g = it / parts % n_kv, part = it % parts;
        const int64_t h0 = g * group + part * per_part, nq = std::min(per_part, group - part * per_part);
        const int64_t t0 = c * kTokenChunk, t1 = std::min(T, t0 + kTokenChunk);
        const Work w = work_at(scratch + slot * per_thread, (t1 - t0) * nq, hd);
        rows_item(w, g, h0, nq, t0, t1, 0, n_tiles(pos0 + t1), false);
    };
    if (!parallel) {
        for (int64_t it = 0; it < items; ++it) item(it, 0);
        return;
    }
    team_for_each(int(threads), items, item);
}

}  // namespace plainllama
