// llama.cpp (node-llama-cpp's prebuilt CPU build) on GGUF files: each one's metadata as llama.cpp's reader gives it
// (readGgufFileInfo), the ids its tokenizer gives each text, and per-chunk perplexities of the given token ids by
// llama.cpp's method (chunks of n_ctx tokens, the first replaced by BOS, the second half scored), computed from the
// next-token probabilities llama.cpp returns, with an F32 KV cache. Run by tests/test_llama_cpp.py.
//   node llama_cpp.mjs JOBS.json   JOBS: [{"model": path, "texts": [..], "ids": [..], "n_ctx": N, "chunks": K}, ...]
// Prints, for each job in turn, {"metadata": {...}, "tensors": N, "bos": id, "tokens": [[ids], ...],
// "chunk_ppl": [...]} as one JSON array on stdout.
import fs from "node:fs";
import {getLlama, readGgufFileInfo} from "node-llama-cpp";

// CPU only, the prebuilt binary only (never a build from source), one thread.
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", progressLogs: false});
const results = [];
for (const job of JSON.parse(fs.readFileSync(process.argv[2], "utf8"))) results.push(await run(job));
process.stdout.write(JSON.stringify(results) + "\n");

async function run(job) {
    const info = await readGgufFileInfo(job.model, {readTensorInfo: true, ignoreKeys: []});
    const meta = structuredClone(info.metadata);
    // The vocabulary's arrays are summarised: their lengths are what the test compares.
    for (const key of ["tokens", "scores", "token_type", "merges"])
        if (meta.tokenizer?.ggml?.[key]) meta.tokenizer.ggml[key] = {length: meta.tokenizer.ggml[key].length};

    const model = await llama.loadModel({modelPath: job.model});
    const tokens = (job.texts ?? []).map((t) => Array.from(model.tokenize(t, false)));

    const chunkPpl = [];
    if (job.ids && job.chunks > 0) {
        const n = job.n_ctx;
        // An F32 KV cache as plainllama's (llama.cpp's default is F16: a rounding of every key and value).
        const context = await model.createContext({
            contextSize: n, batchSize: n, threads: 1, sequences: 1,
            experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
        const seq = context.getSequence();
        for (let c = 0; c < job.chunks; ++c) {
            const chunk = job.ids.slice(c * n, (c + 1) * n);
            chunk[0] = model.tokens.bos;
            await seq.clearHistory();
            const first = n / 2;
            const out = await seq.controlledEvaluate(
                chunk.map((t, j) => (j >= first && j < n - 1 ? [t, {generateNext: {probabilities: true}}] : t)));
            let nll = 0;
            for (let j = first; j < n - 1; ++j) nll -= Math.log(out[j].next.probabilities.get(chunk[j + 1]) ?? 0);
            chunkPpl.push(Math.exp(nll / (n - 1 - first)));
        }
        await context.dispose();
    }
    const bos = model.tokens.bos;
    await model.dispose();
    return {metadata: meta, tensors: info.tensorInfo.length, bos, tokens, chunk_ppl: chunkPpl};
}
