#!/usr/bin/python3
"""llama.cpp itself on the GGUF files `plainllama quantize -o NAME.gguf` writes: node-llama-cpp 3.21.1's prebuilt CPU
build of llama.cpp (tests/llama_cpp, installed by scripts/setup.sh; skipped without node or without it) reads each
file's metadata (readGgufFileInfo), tokenizes texts with the file's vocabulary and scores text by llama.cpp's
perplexity method; the same file through plainllama must give the same perplexity per chunk (to float rounding for
F32/F16 weights, to the activations' own quantization for the block formats) and the same token ids.

Files: tinystories3M (SentencePiece, untied) as none, q8_0, q6_k, q4_k_m, q5_k_m and q4_0; stories260K (tied
embeddings, head size 8) as none and q8_0; a random-weight Llama 3.2-shaped model (F16, Llama 3's byte-level BPE and
chat template, Llama 3.1's RoPE factors, tied) as q8_0.

Run by ctest with PLAINLLAMA_BINARY, PLAINLLAMA_SHARED_DIR and PLAINLLAMA_SOURCE_DIR. Last line: "N passed, N failed".
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
NODE_DIR = os.path.join(SOURCE_DIR, "tests", "llama_cpp")
TEXT = os.path.join(SHARED_DIR, "data", "tinystories_val.txt")
INSTALLED = shutil.which("node") and os.path.isdir(os.path.join(NODE_DIR, "node_modules", "node-llama-cpp"))

# llama.cpp's general.file_type of each --quant for F32 weights
FILE_TYPES = {"none": 0, "q8_0": 7, "q6_k": 18, "q4_k_m": 15, "q5_k_m": 17, "q4_0": 2}


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit status {r.returncode}\n{r.stderr}")
    return r.stdout


@unittest.skipUnless(INSTALLED, "node or tests/llama_cpp/node_modules is missing (scripts/setup.sh runs npm install)")
class LlamaCpp(unittest.TestCase):
    """Every file written, then one llama.cpp process over all of them (its start-up is most of its time)."""

    TS_TEXTS = ["Once upon a time, there was a little girl named Lily.", "\"No!\" said Tom.\nHe ran home."]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # The first 16 KB of the stories: more than the chunks scored, quick to tokenize.
        cls.text = os.path.join(cls.tmp.name, "text.txt")
        with open(TEXT, "rb") as f, open(cls.text, "wb") as out:
            out.write(f.read(16384).rsplit(b"\n", 1)[0])
        cls.cases = json.load(open(os.path.join(SHARED_DIR, "reference", "llama3_tokenizer", "cases.json")))
        l3 = os.path.join(cls.tmp.name, "llama3-tiny")
        run(["/usr/bin/python3", os.path.join(SOURCE_DIR, "scripts", "make_synthetic_model.py"), "--preset",
             "llama3.2-1b", "--hidden-size", "64", "--intermediate-size", "128", "--num-hidden-layers", "2",
             "--num-attention-heads", "4", "--num-key-value-heads", "2", "--dtype", "f16", l3])
        cls.l3_dir = l3
        # name -> (folder, --quant, texts, n_ctx, chunks)
        cls.jobs = {f"ts-{q}": (os.path.join(SHARED_DIR, "models", "tinystories3M"), q, cls.TS_TEXTS, 128, 6)
                    for q in FILE_TYPES}
        for q in ("none", "q8_0"):
            cls.jobs[f"s260-{q}"] = (os.path.join(SHARED_DIR, "models", "stories260K"), q, cls.TS_TEXTS[:1], 64, 4)
        cls.jobs["l3-q8_0"] = (l3, "q8_0", [c[0] for c in cls.cases], 32, 1)
        cls.files, specs = {}, []
        for name, (folder, q, texts, n_ctx, chunks) in cls.jobs.items():
            out = os.path.join(cls.tmp.name, name + ".gguf")
            run([BINARY, "quantize", "-m", folder, "-o", out, "--quant", q, "--quiet"])
            ids = json.loads(run([BINARY, "tokenize", "-m", out, "-f", cls.text, "--json"]))["ids"]
            cls.files[name] = out
            specs.append({"model": out, "texts": texts, "ids": ids[: n_ctx * chunks], "n_ctx": n_ctx,
                          "chunks": chunks})
        job = os.path.join(cls.tmp.name, "jobs.json")
        with open(job, "w") as f:
            json.dump(specs, f)
        r = subprocess.run(["node", os.path.join(NODE_DIR, "llama_cpp.mjs"), job], capture_output=True, text=True,
                           timeout=600, cwd=NODE_DIR)
        cls.node_error = None if r.returncode == 0 else f"node llama_cpp.mjs: exit status {r.returncode}\n{r.stderr}"
        cls.llama = dict(zip(cls.jobs, json.loads(r.stdout))) if r.returncode == 0 else {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def llama_cpp(self, name):
        self.assertIsNone(self.node_error)
        return self.llama[name]

    def ours(self, name):
        _, _, _, n_ctx, chunks = self.jobs[name]
        out = run([BINARY, "perplexity", "-m", self.files[name], "-f", self.text, "-c", str(n_ctx), "--chunks",
                   str(chunks), "--json", "-t", "1", "--quiet"])
        return json.loads(out)["chunk_ppl"]

    def our_ids(self, name, text):
        return json.loads(run([BINARY, "tokenize", "-m", self.files[name], "--no-bos", "--json", "-f", "-"],
                              input=text))["ids"]

    def check_perplexity(self, name, chunk_tol, mean_tol):
        theirs, ours = self.llama_cpp(name)["chunk_ppl"], self.ours(name)
        self.assertEqual(len(theirs), len(ours), name)
        for c, (a, b) in enumerate(zip(theirs, ours)):
            self.assertLess(abs(a / b - 1), chunk_tol, f"{name} chunk {c}: llama.cpp {a:.6f}, plainllama {b:.6f}")
        mean = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
        self.assertLess(abs(mean(theirs) / mean(ours) - 1), mean_tol,
                        f"{name}: llama.cpp {mean(theirs):.6f}, plainllama {mean(ours):.6f}")

    def check_metadata(self, name, config, file_type):
        m = self.llama_cpp(name)["metadata"]
        self.assertEqual(m["general"]["architecture"], "llama")
        self.assertEqual(m["general"]["file_type"], file_type)
        ll = m["llama"]
        self.assertEqual(ll["embedding_length"], config["hidden_size"])
        self.assertEqual(ll["feed_forward_length"], config["intermediate_size"])
        self.assertEqual(ll["block_count"], config["num_hidden_layers"])
        self.assertEqual(ll["attention"]["head_count"], config["num_attention_heads"])
        self.assertEqual(ll["attention"]["head_count_kv"], config["num_key_value_heads"])
        self.assertEqual(ll["context_length"], config["max_position_embeddings"])
        self.assertAlmostEqual(ll["attention"]["layer_norm_rms_epsilon"], config["rms_norm_eps"], delta=1e-12)
        self.assertEqual(m["tokenizer"]["ggml"]["tokens"]["length"], config["vocab_size"])

    def test_tinystories_in_every_format(self):
        config = json.load(open(os.path.join(SHARED_DIR, "models", "tinystories3M", "config.json")))
        self.assertEqual(self.llama_cpp("ts-none")["tokens"], [self.our_ids("ts-none", t) for t in self.TS_TEXTS])
        for scheme, file_type in FILE_TYPES.items():
            with self.subTest(scheme=scheme):
                name = "ts-" + scheme
                self.check_metadata(name, config, file_type)
                self.assertEqual(self.llama_cpp(name)["tensors"], 3 + 9 * config["num_hidden_layers"])
                self.assertEqual(self.llama_cpp(name)["tokens"], self.llama_cpp("ts-none")["tokens"])
                self.check_perplexity(name, *((1e-3, 3e-4) if scheme == "none" else (1e-2, 4e-3)))

    def test_stories_tied(self):
        config = json.load(open(os.path.join(SHARED_DIR, "models", "stories260K", "config.json")))
        self.assertEqual(self.llama_cpp("s260-none")["tokens"], [self.our_ids("s260-none", self.TS_TEXTS[0])])
        for scheme in ("none", "q8_0"):
            with self.subTest(scheme=scheme):
                name = "s260-" + scheme
                self.check_metadata(name, config, FILE_TYPES[scheme])
                # no output.weight: the embedding (float, or quantized with the output projection's q8_0) is it
                self.assertEqual(self.llama_cpp(name)["tensors"], 2 + 9 * 5)
                # Rows of two q8_0 blocks: llama.cpp's fp16 activation scales weigh more here (0.9% and 0.3% seen).
                self.check_perplexity(name, *((1e-3, 3e-4) if scheme == "none" else (2e-2, 1e-2)))

    def test_llama3_vocabulary_template_and_rope_factors(self):
        config = json.load(open(os.path.join(self.l3_dir, "config.json")))
        self.check_metadata("l3-q8_0", config, FILE_TYPES["q8_0"])
        j = self.llama_cpp("l3-q8_0")
        m = j["metadata"]
        self.assertEqual(m["tokenizer"]["ggml"]["model"], "gpt2")
        self.assertEqual(m["tokenizer"]["ggml"]["pre"], "llama-bpe")
        self.assertEqual(m["tokenizer"]["ggml"]["merges"]["length"], 280147)
        template = json.load(open(os.path.join(self.l3_dir, "tokenizer_config.json")))["chat_template"]
        self.assertEqual(m["tokenizer"]["chat_template"], template)
        self.assertEqual(j["bos"], 128000)
        self.assertEqual(j["tensors"], 2 + 9 * 2 + 1)  # no output.weight (tied), rope_freqs
        for (text, ids), got in zip(self.cases, j["tokens"]):
            self.assertEqual(got, ids, text)
        self.check_perplexity("l3-q8_0", 1e-3, 1e-3)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
