#!/usr/bin/python3
"""scripts/make_synthetic_model.py: header, offsets, values and parameter counts of random-weight models, and
`plainllama inspect` loading them.

Run by ctest with PLAINLLAMA_BINARY and PLAINLLAMA_SHARED_DIR. Last line: "N passed, N failed".
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import unittest_summary

import numpy as np

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
SCRIPT = os.path.join(SOURCE_DIR, "scripts", "make_synthetic_model.py")
LLAMA2_TOKENIZER = os.path.join(SHARED_DIR, "tokenizers", "llama2", "tokenizer.model")

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
import make_synthetic_model  # noqa: E402
from convert_llama2c import llama_tensor_specs  # noqa: E402

# hidden 64, 2 layers, 4 heads of 16, 2 KV heads, FFN 172, vocab 32000 (the preset's)
TINY = ["--hidden-size", "64", "--num-hidden-layers", "2", "--num-attention-heads", "4",
        "--num-key-value-heads", "2", "--intermediate-size", "172", "--max-position-embeddings", "256"]
ELEMENT = {"F32": (4, "<f4"), "F16": (2, "<f2"), "BF16": (2, "<u2")}


def expected_tensors(h, ffn, layers, kv, vocab, tied):
    """{name: shape} of a LLaMA checkpoint, written out here independently of the scripts."""
    t = {"model.embed_tokens.weight": [vocab, h], "model.norm.weight": [h]}
    for i in range(layers):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                  p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [kv, h],
                  p + "self_attn.v_proj.weight": [kv, h], p + "self_attn.o_proj.weight": [h, h],
                  p + "mlp.gate_proj.weight": [ffn, h], p + "mlp.up_proj.weight": [ffn, h],
                  p + "mlp.down_proj.weight": [h, ffn]})
    if not tied:
        t["lm_head.weight"] = [vocab, h]
    return t


def load(path):
    """Reads a safetensors file back, checking its layout: -> (metadata, {name: (dtype, shape, f32 array)})."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, f"header length {n} not a multiple of 8"
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", None)
    out = {}
    pos = 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = e["data_offsets"]
        size, np_dtype = ELEMENT[e["dtype"]]
        assert begin == pos, f"{name}: begins at {begin}, previous tensor ended at {pos}"
        assert end - begin == size * int(np.prod(e["shape"])), f"{name}: {end - begin} bytes for shape {e['shape']}"
        raw = np.frombuffer(blob[8 + n + begin:8 + n + end], dtype=np_dtype)
        if e["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = (e["dtype"], e["shape"], raw.astype(np.float32).reshape(e["shape"]))
        pos = end
    assert 8 + n + pos == len(blob), f"data ends at {8 + n + pos}, file has {len(blob)} bytes"
    return metadata, out


def make(out, *args):
    return subprocess.run([sys.executable, SCRIPT, out, *args], capture_output=True, text=True)


def binary():
    b = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
    return b if os.path.isfile(b) else None


class TinyModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dirs = {}
        for dtype in ["f32", "f16", "bf16"]:
            d = os.path.join(cls.tmp.name, dtype)
            r = make(d, *TINY, "--dtype", dtype, "--seed", "3")
            if r.returncode != 0:
                raise RuntimeError(f"make_synthetic_model.py --dtype {dtype} failed: {r.stderr}")
            cls.dirs[dtype] = d

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_config(self):
        for dtype, torch_dtype in [("f32", "float32"), ("f16", "float16"), ("bf16", "bfloat16")]:
            with open(os.path.join(self.dirs[dtype], "config.json")) as f:
                cfg = json.load(f)
            self.assertEqual(cfg["architectures"], ["LlamaForCausalLM"])
            self.assertEqual((cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"],
                              cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"],
                              cfg["max_position_embeddings"], cfg["rms_norm_eps"], cfg["rope_theta"],
                              cfg["tie_word_embeddings"], cfg["torch_dtype"]),
                             (64, 172, 2, 4, 2, 32000, 256, 1e-5, 10000.0, False, torch_dtype))

    def test_header_offsets_and_sizes(self):
        want = expected_tensors(64, 172, 2, 32, 32000, tied=False)
        for dtype, st in [("f32", "F32"), ("f16", "F16"), ("bf16", "BF16")]:
            meta, t = load(os.path.join(self.dirs[dtype], "model.safetensors"))
            self.assertEqual(meta, {"format": "pt"})
            self.assertEqual({k: v[1] for k, v in t.items()}, want)
            self.assertEqual({v[0] for v in t.values()}, {st})

    def test_values(self):
        _, t = load(os.path.join(self.dirs["f32"], "model.safetensors"))
        for name, (_, shape, a) in t.items():
            if len(shape) == 1:
                np.testing.assert_array_equal(a, np.ones(shape, np.float32), err_msg=name)
        emb = t["model.embed_tokens.weight"][2]  # 2,048,000 samples of N(0, 0.02)
        self.assertAlmostEqual(float(emb.std()), 0.02, delta=0.0002)
        self.assertAlmostEqual(float(emb.mean()), 0.0, delta=0.0002)
        self.assertFalse(np.array_equal(t["lm_head.weight"][2], emb), "lm_head must not repeat the embeddings")

    def test_dtypes_hold_the_same_weights(self):
        _, f32 = load(os.path.join(self.dirs["f32"], "model.safetensors"))
        _, f16 = load(os.path.join(self.dirs["f16"], "model.safetensors"))
        _, bf16 = load(os.path.join(self.dirs["bf16"], "model.safetensors"))
        for name, (_, _, a) in f32.items():
            np.testing.assert_array_equal(f16[name][2], a.astype(np.float16).astype(np.float32), err_msg=name)
            # bf16 keeps 8 significant bits: rounding error at most half an ulp, 2^-8 relative
            np.testing.assert_array_less(np.abs(bf16[name][2] - a), np.abs(a) * 2.0**-8 + 1e-30, err_msg=name)

    def test_tokenizer_copied(self):
        if not os.path.isfile(LLAMA2_TOKENIZER):
            self.fail(f"{LLAMA2_TOKENIZER} is missing")
        with open(os.path.join(self.dirs["f32"], "tokenizer.model"), "rb") as a, open(LLAMA2_TOKENIZER, "rb") as b:
            self.assertTrue(a.read() == b.read())

    def test_inspect_loads_each_dtype(self):
        b = binary()
        if b is None:
            self.skipTest("no plainllama binary (set PLAINLLAMA_BINARY)")
        h, ffn, L, v, kv = 64, 172, 2, 32000, 32
        n_params = 2 * v * h + h + L * (2 * h + 2 * h * h + 2 * kv * h + 3 * ffn * h)
        for dtype, size in [("f32", 4), ("f16", 2), ("bf16", 2)]:
            r = subprocess.run([b, "inspect", "-m", self.dirs[dtype], "--json"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, f"{dtype}: {r.stderr}")
            j = json.loads(r.stdout)
            self.assertEqual(j["n_params"], n_params, dtype)
            self.assertEqual(j["n_bytes"], n_params * size, dtype)
            self.assertEqual(j["n_tensors"], 3 + 9 * L, dtype)
            self.assertEqual(j["config"]["head_dim"], 16)
            self.assertEqual(j["config"]["gqa_group"], 2)


class Options(unittest.TestCase):
    def test_same_seed_same_file_different_seed_different_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, seed in [("a", "5"), ("b", "5"), ("c", "6")]:
                r = make(os.path.join(tmp, name), *TINY, "--vocab-size", "100", "--seed", seed, "--no-tokenizer")
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(os.path.join(tmp, name, "model.safetensors"), "rb") as f:
                    paths.append(f.read())
            self.assertTrue(paths[0] == paths[1])
            self.assertFalse(paths[0] == paths[2])
            self.assertFalse(os.path.exists(os.path.join(tmp, "a", "tokenizer.model")))

    def test_chunked_generation_matches_one_piece(self):
        # Row chunks (as the 7B shape needs) continue the same random stream: the file does not change.
        with tempfile.TemporaryDirectory() as tmp:
            args = dict(preset="small", overrides={"hidden_size": 64, "num_hidden_layers": 1, "vocab_size": 300,
                                                   "intermediate_size": 96, "num_attention_heads": 4,
                                                   "num_key_value_heads": 4},
                        dtype="bf16", seed=9, tokenizer=None)
            saved = make_synthetic_model.CHUNK_ELEMENTS
            try:
                make_synthetic_model.CHUNK_ELEMENTS = 1000  # 15 rows of 64 per chunk
                make_synthetic_model.make_model(os.path.join(tmp, "chunked"), **args)
            finally:
                make_synthetic_model.CHUNK_ELEMENTS = saved
            make_synthetic_model.make_model(os.path.join(tmp, "whole"), **args)
            with open(os.path.join(tmp, "chunked", "model.safetensors"), "rb") as a, \
                    open(os.path.join(tmp, "whole", "model.safetensors"), "rb") as b:
                self.assertTrue(a.read() == b.read())

    def test_tied_embeddings(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = make(tmp, *TINY, "--vocab-size", "100", "--tie-word-embeddings", "--no-tokenizer")
            self.assertEqual(r.returncode, 0, r.stderr)
            _, t = load(os.path.join(tmp, "model.safetensors"))
            self.assertEqual({k: v[1] for k, v in t.items()}, expected_tensors(64, 172, 2, 32, 100, tied=True))
            with open(os.path.join(tmp, "config.json")) as f:
                self.assertTrue(json.load(f)["tie_word_embeddings"])

    def test_bad_shape_rejected(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = make(tmp, "--hidden-size", "64", "--num-attention-heads", "4", "--num-key-value-heads", "3")
            self.assertEqual(r.returncode, 1)
            self.assertIn("--num-key-value-heads 3", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "model.safetensors")))

    def test_preset_parameter_counts(self):
        # Published counts: TinyLlama-1.1B 1,100,048,384; Llama-2-7b 6,738,415,616.
        for preset, n in [("tinyllama-1.1b", 1_100_048_384), ("llama2-7b", 6_738_415_616)]:
            s = make_synthetic_model.resolve_shape(preset, {})
            specs = llama_tensor_specs(s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"],
                                       s["num_attention_heads"], s["num_key_value_heads"], s["vocab_size"],
                                       s["tie_word_embeddings"], "BF16")
            self.assertEqual(sum(int(np.prod(shape)) for _, _, shape in specs), n, preset)
            self.assertEqual(make_synthetic_model.n_params(s), n, preset)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
