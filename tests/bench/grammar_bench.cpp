// Constrained decoding's per-step costs on Llama 3's vocabulary (128,256 ids): the mask of allowed tokens at a few
// states of a JSON Schema's grammar (the prefix-tree walk with the state's byte transitions known, and from a new
// constraint that must compute them), the mask kept for a state seen before, the prefix tree's construction, and
// greedy sampling with and without a mask. One thread. Whole decode steps with and without a grammar:
// `plainllama bench --json-schema FILE` (docs/structured-output.md).
// Run: plainllama_microbench --benchmark_filter=grammar
#include <benchmark/benchmark.h>

#include <random>

#include "plainllama/run/grammar_constraint.h"
#include "plainllama/run/json_schema.h"
#include "plainllama/run/sampler.h"
#include "plainllama/tokenizer/bpe_tokenizer.h"

namespace plainllama {
namespace {

const std::filesystem::path kShared = PLAINLLAMA_SHARED_DIR;
constexpr int32_t kVocab = 128256;

const BpeTokenizer& llama3() {
    static const BpeTokenizer tok(kShared / "tokenizers/llama3.1/tokenizer.json",
                                  kShared / "tokenizers/llama3.1/tokenizer_config.json");
    return tok;
}
const std::shared_ptr<const TokenTrie>& trie() {
    static const auto t = std::make_shared<const TokenTrie>(llama3(), kVocab);
    return t;
}
const std::shared_ptr<const Grammar>& grammar() {
    static const auto g = json_schema_grammar(R"({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"type": "string"}}, "score": {"type": "number"}},
        "required": ["name", "age", "tags", "score"], "additionalProperties": false})");
    return g;
}
// The text before each state benchmarked (argument 0, 1, 2, 3).
const char* kPrefix[] = {"", R"({"name": "Ada L)", R"({"name": "Ada", "age": 1)",
                         R"({"name": "Ada", "age": 36, "tags": [)"};
const char* kStateName[] = {"start", "in a string", "in a number", "before an array item"};

void BM_grammar_mask_walk(benchmark::State& state) {
    GrammarConstraint c(grammar(), trie(), {llama3().eos_id()});
    c.accept_text(kPrefix[state.range(0)]);
    TokenMask m;
    c.compute_mask(m);  // the state's transitions, once
    for (auto _ : state) {
        c.compute_mask(m);
        benchmark::DoNotOptimize(m.bits.data());
    }
    state.SetLabel(kStateName[state.range(0)]);
    state.counters["allowed"] = m.count();
}
BENCHMARK(BM_grammar_mask_walk)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

void BM_grammar_mask_new_constraint(benchmark::State& state) {
    TokenMask m;
    for (auto _ : state) {
        state.PauseTiming();
        auto c = std::make_unique<GrammarConstraint>(grammar(), trie(), std::vector<int32_t>{llama3().eos_id()});
        c->accept_text(kPrefix[state.range(0)]);
        state.ResumeTiming();
        c->compute_mask(m);
        benchmark::DoNotOptimize(m.bits.data());
        state.PauseTiming();
        c.reset();
        state.ResumeTiming();
    }
    state.SetLabel(kStateName[state.range(0)]);
}
BENCHMARK(BM_grammar_mask_new_constraint)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

void BM_grammar_mask_kept(benchmark::State& state) {
    GrammarConstraint c(grammar(), trie(), {llama3().eos_id()});
    c.accept_text(kPrefix[1]);
    c.allowed();
    for (auto _ : state) benchmark::DoNotOptimize(c.allowed().bits.data());
}
BENCHMARK(BM_grammar_mask_kept)->Unit(benchmark::kMicrosecond);

void BM_grammar_trie_build(benchmark::State& state) {
    for (auto _ : state) {
        TokenTrie t(llama3(), kVocab);
        benchmark::DoNotOptimize(t.nodes().data());
        state.counters["nodes"] = double(t.nodes().size());
    }
}
BENCHMARK(BM_grammar_trie_build)->Unit(benchmark::kMillisecond);

// Greedy sampling over 128k logits: alone, and with the mask of the state in a string (most tokens allowed).
void BM_grammar_sample_greedy(benchmark::State& state) {
    std::vector<float> logits(kVocab);
    std::mt19937 rng(1);
    std::normal_distribution<float> n(0, 2);
    for (float& x : logits) x = n(rng);
    GrammarConstraint c(grammar(), trie(), {llama3().eos_id()});
    c.accept_text(kPrefix[1]);
    const TokenMask& m = c.allowed();
    SamplerParams p;
    p.temp = 0;
    Sampler s(p);
    const std::vector<int32_t> history;
    for (auto _ : state)
        benchmark::DoNotOptimize(s.sample(logits.data(), kVocab, history, state.range(0) ? &m : nullptr));
    state.SetLabel(state.range(0) ? "with the mask" : "without a mask");
}
BENCHMARK(BM_grammar_sample_greedy)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace plainllama
