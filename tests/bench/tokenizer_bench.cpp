// Tokenizer throughput on wikitext-2's test set (1.29 MB): Llama 3's tokenizer.json (byte-level BPE, Oniguruma
// pre-tokenizer) and Llama 2's SentencePiece model, one thread. bytes_per_second = text bytes per second.
// Run: plainllama_microbench --benchmark_filter=tokenize
#include <benchmark/benchmark.h>

#include "plainllama/io/file.h"
#include "plainllama/tokenizer/bpe_tokenizer.h"
#include "plainllama/tokenizer/sentencepiece_tokenizer.h"

namespace plainllama {
namespace {

const std::filesystem::path kShared = PLAINLLAMA_SHARED_DIR;

template <class Tok>
void run(benchmark::State& state, const Tok& tok) {
    const std::string text = read_file(kShared / "data/wiki.test.raw");
    size_t n = 0;
    for (auto _ : state) {
        const std::vector<int32_t> ids = tok.encode(text, true);
        n = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
    state.counters["tokens"] = double(n);
}

void BM_tokenize_llama3(benchmark::State& state) {
    const BpeTokenizer tok(kShared / "tokenizers/llama3.1/tokenizer.json",
                           kShared / "tokenizers/llama3.1/tokenizer_config.json");
    run(state, tok);
}
BENCHMARK(BM_tokenize_llama3)->Unit(benchmark::kMillisecond);

void BM_tokenize_llama2_sentencepiece(benchmark::State& state) {
    const SentencePieceTokenizer tok(kShared / "tokenizers/llama2/tokenizer.model");
    run(state, tok);
}
BENCHMARK(BM_tokenize_llama2_sentencepiece)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace plainllama
