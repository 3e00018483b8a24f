// Logits of a context evaluated two ways, for the tests that hold decode and prefill to the same bits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "plainllama/model/model.h"

namespace plainllama::test {

// Logits [ids.size(), vocab] of one batched eval.
inline std::vector<float> prefill_logits(Context& ctx, const std::vector<int32_t>& ids) {
    const float* p = ctx.eval(ids, true);
    return std::vector<float>(p, p + ids.size() * size_t(ctx.model().config().vocab_size));
}

// Logits [ids.size() - from, vocab] of one eval per token, from token `from` on.
inline std::vector<float> decode_one_by_one(Context& ctx, const std::vector<int32_t>& ids, size_t from) {
    const size_t V = size_t(ctx.model().config().vocab_size);
    std::vector<float> out;
    for (size_t i = from; i < ids.size(); ++i) {
        const float* p = ctx.eval(&ids[i], 1);
        out.insert(out.end(), p, p + V);
    }
    return out;
}

// The largest |a[i] - b[i]|; the sizes must agree.
template <typename A, typename B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

}  // namespace plainllama::test
