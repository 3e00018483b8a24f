// The kernels' test hooks, for the tests and micro-benchmarks under tests/ and never for the engine (nothing under
// src/ outside src/kernels/ includes this header): they switch the kernel variant and the tuning that every later
// kernel call runs, so that one test process checks every variant and tuning this CPU can run against the others,
// and they give the tests their yardsticks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plainllama/io/dtype.h"
#include "plainllama/kernels/kernels.h"
#include "plainllama/kernels/quant.h"

namespace plainllama {

// The kernel variants this CPU runs (kernels.h: kernels_isa), best first.
std::vector<std::string> kernel_variants();
// Every kernel call from now on runs `name` (UsageError when unknown or not supported); not while kernels run.
void use_kernels(const std::string& name);

// cpuid's tuning alone (kernels.h: Tuning), whatever PLAINLLAMA_TUNING says.
Tuning cpu_tuning();
// Every kernel call from now on takes tuning t, on any CPU (the tunings differ in exact choices only, so the tests
// compare their bits); it wins over PLAINLLAMA_TUNING and cpuid. Not while kernels run.
void use_tuning(Tuning t);

// out = x W^T for a row-major W [N, K] of type wt, in double: the tests' yardstick.
void matmul_reference(float* out, const float* x, const void* W, DType wt, int64_t T, int64_t N, int64_t K);

// A packed copy of one row-major W [N, K] of type t (std::bad_alloc when out of memory).
class PackedWeight {
   public:
    PackedWeight(const void* W, DType t, int64_t N, int64_t K, QuantType q = QuantType::none)
        : store_((matrix_bytes(t, q, N, K) + 63) / 64 * 64), m_(store_.add(W, t, N, K, q)) {}
    const PackedMatrix& matrix() const { return m_; }

   private:
    PackedWeights store_;
    PackedMatrix m_;
};

}  // namespace plainllama
