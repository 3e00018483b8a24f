// Packing weight matrices into panels (see PackedMatrix in kernels.h) and the store that holds them.

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "isa/isa.h"
#include "plainllama/kernels/kernels.h"

namespace plainllama {
namespace {

using isa::n_panels;
int64_t stored_k(DType t, int64_t K) { return isa::stored_k(t == DType::BF16, K); }

// BF16 whose rows are not 32-bit aligned (odd K, or a tensor at an address = 2 mod 4): the pairs are
// assembled one value at a time.
void pack_bf16_by_value(uint16_t* dst, const uint16_t* W, int64_t N, int64_t K) {
    const int64_t Ks = stored_k(DType::BF16, K);
    for (int64_t p = 0; p < n_panels(N); ++p)
        for (int64_t j = 0; j < kPanel; ++j)
            for (int64_t k = 0; k < Ks; ++k) {
                const int64_t r = p * kPanel + j;
                dst[p * kPanel * Ks + isa::panel_index(true, k, j)] = r < N && k < K ? W[r * K + k] : 0;
            }
}

}  // namespace

size_t packed_bytes(DType t, int64_t N, int64_t K) {
    return size_t(n_panels(N) * kPanel * stored_k(t, K)) * dtype_size(t);
}

void pack_matrix(void* dst, const void* W, DType t, int64_t N, int64_t K) {
    if (t == DType::BF16 && (K % 2 || reinterpret_cast<uintptr_t>(W) % 4))
        return pack_bf16_by_value(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(W), N, K);
    // Per panel, a transpose of 32-bit words (F32 values, or BF16 pairs (k, k+1)) or of 16-bit F16 values.
    const isa::Kernels& ks = isa::active();
    const int64_t panels = n_panels(N);
#pragma omp parallel for schedule(static) if (N * K >= kParallelWork)
    for (int64_t p = 0; p < panels; ++p) {
        const int64_t n0 = p * kPanel, nr = std::min(kPanel, N - n0);
        if (t == DType::F16) {
            ks.pack_block16(static_cast<uint16_t*>(dst) + n0 * K, static_cast<const uint16_t*>(W), K, n0, nr, 0, K);
        } else {
            const int64_t Kw = t == DType::BF16 ? K / 2 : K;
            ks.pack_block32(static_cast<uint32_t*>(dst) + n0 * Kw, static_cast<const uint32_t*>(W), Kw, n0, nr, 0, Kw);
        }
    }
}

void quantize_rows(uint8_t* dst, const void* W, DType t, int64_t N, int64_t K, QuantType q) {
    const size_t row = quant_row_bytes(q, K), es = dtype_size(t);
    isa::active();  // chosen here, where a bad PLAINLLAMA_KERNELS or PLAINLLAMA_TUNING throws, not in the region
#pragma omp parallel if (N * K >= kParallelWork)
    {
        std::vector<float> x(static_cast<size_t>(K));  // [K] one row in f32
#pragma omp for schedule(dynamic, 16)
        for (int64_t r = 0; r < N; ++r) {
            convert_to_f32(x.data(), static_cast<const uint8_t*>(W) + size_t(r * K) * es, t, K);
            quantize_row(q, x.data(), dst + size_t(r) * row, K);
        }
    }
}

PackedWeights::PackedWeights(size_t capacity) : data_(map_zeroed_pages(capacity)), capacity_(capacity) {
    if (!data_) throw std::bad_alloc();
}

size_t matrix_bytes(DType t, QuantType q, int64_t N, int64_t K) {
    return q == QuantType::none ? packed_bytes(t, N, K) : quant_matrix_bytes(q, N, K);
}

PackedMatrix PackedWeights::add_quantized(const uint8_t* rows, QuantType q, int64_t N, int64_t K) {
    const size_t n = quant_matrix_bytes(q, N, K), padded = (n + 63) / 64 * 64;
    if (padded > capacity_ - used_) throw std::length_error("PackedWeights: capacity exceeded");
    uint8_t* dst = data_.get() + used_;
    used_ += padded;
    const int64_t nb = K / quant_block(q);
    if (tiled(q, N)) {
#pragma omp parallel for schedule(static) if (N * K >= kParallelWork)
        for (int64_t g = 0; g < N / 16; ++g)
            interleave(q, dst + size_t(g * nb) * tile_bytes(q), rows + size_t(16 * g) * quant_row_bytes(q, K), nb,
                       g * nb);
    } else {
        std::memcpy(dst, rows, n);
    }
    return PackedMatrix{dst, DType::U8, N, K, q};
}

PackedMatrix PackedWeights::add(const void* W, DType t, int64_t N, int64_t K, QuantType q) {
    static_assert(kPanel * 2 % 64 == 0, "a packed matrix must keep the next one 64-byte aligned");
    const size_t n = matrix_bytes(t, q, N, K), padded = (n + 63) / 64 * 64;  // the next stays aligned
    if (padded > capacity_ - used_) throw std::length_error("PackedWeights: capacity exceeded");
    uint8_t* dst = data_.get() + used_;
    used_ += padded;
    if (q == QuantType::none) {
        pack_matrix(dst, W, t, N, K);
        return PackedMatrix{dst, t, N, K};
    }
    const size_t row = quant_row_bytes(q, K), es = dtype_size(t);
    const bool rows16 = tiled(q, N);
    const int64_t per = rows16 ? 16 : 1, nb = K / quant_block(q);  // rows per unit of work
    isa::active();  // chosen here, where a bad PLAINLLAMA_KERNELS or PLAINLLAMA_TUNING throws, not in the region
#pragma omp parallel if (N * K >= kParallelWork)
    {
        std::vector<float> x(static_cast<size_t>(K));                // [K] one row in f32
        std::vector<uint8_t> blocks(rows16 ? size_t(16) * row : 0);  // [16][row] a group's rows, before interleaving
        // dynamic: a thread that touches a new huge page of the store waits while the kernel zeroes it, and the others
        // take its rows meanwhile (faster than static)
#pragma omp for schedule(dynamic)
        for (int64_t u = 0; u < N / per; ++u) {
            for (int64_t i = 0; i < per; ++i) {
                const int64_t r = u * per + i;
                convert_to_f32(x.data(), static_cast<const uint8_t*>(W) + size_t(r * K) * es, t, K);
                quantize_row(q, x.data(), rows16 ? blocks.data() + size_t(i) * row : dst + size_t(r) * row, K);
            }
            if (rows16) interleave(q, dst + size_t(u * nb) * tile_bytes(q), blocks.data(), nb, u * nb);
        }
    }
    return PackedMatrix{dst, t, N, K, q};
}

}  // namespace plainllama
