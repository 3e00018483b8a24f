// The entry points of avx512_quant.cpp (the AVX-512 kernels for quantized weights), which avx512.cpp's tables point
// at; see Kernels in isa.h for what each computes. Compiled for x86-64-v4 and called only through those tables, on a
// CPU that runs them. Plain functions, defined once (strong symbols): nothing the linker could share (isa.h).
#pragma once
#include <cstdint>

#include "isa.h"

namespace plainllama::isa::avx512 {

void quantize_row(QuantType t, const float* x, uint8_t* y, int64_t K);
void dequantize(QuantType t, const uint8_t* src, float* y, int64_t n);
void quantize_q8x32(BlockQ8x32* y, const float* x, int64_t K);
void quantize_q8x256(BlockQ8x256* y, const float* x, int64_t K);
void matvec_q8_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1);
void matvec_q4_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1);
void matvec_q6_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1);
void matvec_q4_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1);
void matvec_q5_0(float* out, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t r0, int64_t r1);
void matvec_q5_k(float* out, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t r0, int64_t r1);
// Without VNNI (the avx512 table): vpmaddubsw + vpmaddwd.
void matvec_q8_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1);
void matvec_q4_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1);
void matvec_q6_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1);
void matvec_q4_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1);
void matvec_q5_0_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1);
void matvec_q5_k_x16(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx, int n,
                     int64_t g0, int64_t g1);
// With AVX512_VNNI's vpdpbusd (the avx512_bf16 table: dispatch.cpp requires VNNI for it).
void matvec_q8_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1);
void matvec_q4_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1);
void matvec_q6_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1);
void matvec_q4_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1);
void matvec_q5_0_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x32* x, int64_t ldx, int n,
                          int64_t g0, int64_t g1);
void matvec_q5_k_x16_vnni(float* out, int64_t ldo, const uint8_t* W, int64_t K, const BlockQ8x256* x, int64_t ldx,
                          int n, int64_t g0, int64_t g1);

}  // namespace plainllama::isa::avx512
