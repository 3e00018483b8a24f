#!/usr/bin/python3
"""scripts/convert_llama2c.py: the shared stories260K HF folders are reproduced from the llama2.c checkpoint.

Run by ctest with PLAINLLAMA_SHARED_DIR (default: ../shared beside the project). Last line: "N passed, N failed".
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
SCRIPT = os.path.join(SOURCE_DIR, "scripts", "convert_llama2c.py")
MODELS = os.path.join(SHARED_DIR, "models")
CHECKPOINT = os.path.join(MODELS, "stories260K-llama2c", "stories260K.bin")
TOKENIZER = os.path.join(MODELS, "stories260K", "tokenizer.model")

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
import convert_llama2c  # noqa: E402


def read_st(path):
    """Independent safetensors reader: -> (metadata, [(name, dtype, shape, raw bytes)] in data order)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", None)
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return metadata, [(k, v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                      for k, v in items]


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def write_llama2c(path, dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared, rng, theta=10000.0):
    """A random legacy v0 llama2.c checkpoint; returns its arrays by llama2.c name."""
    hs = dim // heads
    kv_dim = kv_heads * hs
    a = {}
    f32 = np.float32
    a["token_embedding"] = rng.standard_normal((vocab, dim)).astype(f32)
    a["rms_att"] = rng.standard_normal((layers, dim)).astype(f32)
    a["wq"] = rng.standard_normal((layers, dim, dim)).astype(f32)
    a["wk"] = rng.standard_normal((layers, kv_dim, dim)).astype(f32)
    a["wv"] = rng.standard_normal((layers, kv_dim, dim)).astype(f32)
    a["wo"] = rng.standard_normal((layers, dim, dim)).astype(f32)
    a["rms_ffn"] = rng.standard_normal((layers, dim)).astype(f32)
    a["w1"] = rng.standard_normal((layers, hidden, dim)).astype(f32)
    a["w2"] = rng.standard_normal((layers, dim, hidden)).astype(f32)
    a["w3"] = rng.standard_normal((layers, hidden, dim)).astype(f32)
    a["rms_final"] = rng.standard_normal(dim).astype(f32)
    freqs = 1.0 / theta ** (np.arange(0, hs, 2) / hs)
    angles = np.outer(np.arange(seq_len), freqs)
    a["freq_cis_real"] = np.cos(angles).astype(f32)
    a["freq_cis_imag"] = np.sin(angles).astype(f32)
    if not shared:
        a["wcls"] = rng.standard_normal((vocab, dim)).astype(f32)
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq_len))
        for v in a.values():
            f.write(v.astype("<f4").tobytes())
    return a


def rope_interleaved(x, pos, theta=10000.0):
    """llama2.c RoPE on one head [hd]: rotates pairs (2i, 2i+1) by pos * theta^(-2i/hd)."""
    hd = x.shape[0]
    out = x.copy()
    for i in range(hd // 2):
        a = pos * theta ** (-2.0 * i / hd)
        c, s = np.cos(a), np.sin(a)
        out[2 * i] = x[2 * i] * c - x[2 * i + 1] * s
        out[2 * i + 1] = x[2 * i] * s + x[2 * i + 1] * c
    return out


def rope_half(x, pos, theta=10000.0):
    """HF RoPE on one head [hd]: x * cos + rotate_half(x) * sin, pairs (i, i + hd/2)."""
    hd = x.shape[0]
    inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.concatenate([pos * inv, pos * inv])
    rot = np.concatenate([-x[hd // 2:], x[:hd // 2]])
    return x * np.cos(ang) + rot * np.sin(ang)


class SharedFolders(unittest.TestCase):
    """Converting stories260K.bin gives the shared HF folders, byte for byte."""

    def convert_and_compare(self, dtype, folder):
        ref_dir = os.path.join(MODELS, folder)
        with tempfile.TemporaryDirectory() as out:
            r = run_script(CHECKPOINT, out, "--dtype", dtype, "--tokenizer", TOKENIZER)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "config.json")) as f:
                got_cfg = json.load(f)
            with open(os.path.join(ref_dir, "config.json")) as f:
                ref_cfg = json.load(f)
            self.assertEqual(got_cfg, ref_cfg)
            self.assertEqual(list(got_cfg), list(ref_cfg), "config.json field order")
            got_meta, got = read_st(os.path.join(out, "model.safetensors"))
            ref_meta, ref = read_st(os.path.join(ref_dir, "model.safetensors"))
            self.assertEqual(got_meta, ref_meta)
            self.assertEqual([t[0] for t in got], [t[0] for t in ref], "tensor names and order")
            for g, e in zip(got, ref):
                self.assertEqual(g[1:3], e[1:3], f"{g[0]}: dtype and shape")
                self.assertTrue(g[3] == e[3], f"{g[0]}: bytes differ")
            for name in ["model.safetensors", "config.json", "tokenizer.model"]:
                with open(os.path.join(out, name), "rb") as a, open(os.path.join(ref_dir, name), "rb") as b:
                    self.assertTrue(a.read() == b.read(), f"{name} is not byte-identical to {folder}/{name}")

    def test_f32_reproduces_stories260K(self):
        self.convert_and_compare("f32", "stories260K")

    def test_bf16_reproduces_stories260K_bf16(self):
        self.convert_and_compare("bf16", "stories260K-bf16")

    def test_f16_reproduces_stories260K_f16(self):
        self.convert_and_compare("f16", "stories260K-f16")

    def test_q_proj_is_permuted_wq(self):
        # Independent of the converter: read wq of layer 0 straight from the llama2.c file.
        dim, heads, hs = 64, 8, 8
        embed, rms = 512 * dim, 5 * dim
        wq0 = np.fromfile(CHECKPOINT, dtype="<f4", count=dim * dim, offset=28 + 4 * (embed + rms)).reshape(dim, dim)
        _, ref = read_st(os.path.join(MODELS, "stories260K", "model.safetensors"))
        q0 = dict((t[0], t) for t in ref)["model.layers.0.self_attn.q_proj.weight"]
        q0 = np.frombuffer(q0[3], dtype="<f4").reshape(dim, dim)
        self.assertFalse(np.array_equal(q0, wq0), "the shared q_proj should not equal the interleaved wq")
        for h in range(heads):
            for i in range(hs // 2):  # HF row i takes llama2.c row 2i, HF row i + hs/2 takes row 2i + 1
                np.testing.assert_array_equal(q0[h * hs + i], wq0[h * hs + 2 * i])
                np.testing.assert_array_equal(q0[h * hs + hs // 2 + i], wq0[h * hs + 2 * i + 1])


class Permutation(unittest.TestCase):
    def test_permute_rope_row_order(self):
        w = np.arange(16, dtype=np.float32).reshape(8, 2)  # 2 heads of 4 rows, row r = [2r, 2r + 1]
        got = convert_llama2c.permute_rope(w, 2)
        np.testing.assert_array_equal(got[:, 0] / 2, [0, 2, 1, 3, 4, 6, 5, 7])

    def test_attention_scores_preserved(self):
        # q.k after interleaved RoPE on llama2.c weights == q.k after rotate_half RoPE on the permuted weights.
        rng = np.random.default_rng(1)
        dim, hd, heads = 16, 8, 2
        wq = rng.standard_normal((dim, dim))
        wk = rng.standard_normal((dim, dim))
        x1, x2 = rng.standard_normal(dim), rng.standard_normal(dim)
        pq, pk = convert_llama2c.permute_rope(wq, heads), convert_llama2c.permute_rope(wk, heads)
        for h in range(heads):
            rows = slice(h * hd, (h + 1) * hd)
            ref = rope_interleaved((wq @ x1)[rows], 5) @ rope_interleaved((wk @ x2)[rows], 2)
            got = rope_half((pq @ x1)[rows], 5) @ rope_half((pk @ x2)[rows], 2)
            self.assertAlmostEqual(got, ref, places=9)


class Encoding(unittest.TestCase):
    def test_bf16_round_to_nearest_even(self):
        cases = {  # f32 bits -> bf16 bits
            0x3F800000: 0x3F80,  # 1.0
            0x3F808000: 0x3F80,  # halfway, even stays
            0x3F818000: 0x3F82,  # halfway, odd rounds up
            0x3F808001: 0x3F81,  # above halfway
            0x3F807FFF: 0x3F80,  # below halfway
            0xBF818000: 0xBF82,  # negative halfway
            0x80000000: 0x8000,  # -0
            0x7F800000: 0x7F80,  # inf
            0x7F7FFFFF: 0x7F80,  # largest finite rounds to inf
            0x00000001: 0x0000,  # smallest subnormal
        }
        src = np.array(list(cases), dtype=np.uint32).view(np.float32)
        got = convert_llama2c.f32_to_bf16_bits(src)
        self.assertEqual([hex(v) for v in got], [hex(v) for v in cases.values()])
        nan = convert_llama2c.f32_to_bf16_bits(np.array([0x7F800001, 0xFFC00000], dtype=np.uint32).view(np.float32))
        for v in nan:
            self.assertEqual(int(v) & 0x7F80, 0x7F80)
            self.assertNotEqual(int(v) & 0x007F, 0, "NaN must stay NaN")


class Checkpoints(unittest.TestCase):
    def test_unshared_classifier_and_gqa(self):
        rng = np.random.default_rng(7)
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "m.bin")
            a = write_llama2c(ckpt, dim=32, hidden=48, layers=2, heads=4, kv_heads=2, vocab=40, seq_len=16,
                              shared=False, rng=rng)
            out = os.path.join(tmp, "hf")
            r = run_script(ckpt, out, "--rms-norm-eps", "1e-6")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("no tokenizer.model", r.stderr)
            with open(os.path.join(out, "config.json")) as f:
                cfg = json.load(f)
            self.assertEqual((cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"],
                              cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"],
                              cfg["max_position_embeddings"], cfg["rms_norm_eps"], cfg["tie_word_embeddings"]),
                             (32, 48, 2, 4, 2, 40, 16, 1e-6, False))
            _, ts = read_st(os.path.join(out, "model.safetensors"))
            t = {name: np.frombuffer(raw, dtype="<f4").reshape(shape) for name, _, shape, raw in ts}
            self.assertEqual(len(t), 3 + 9 * 2)
            np.testing.assert_array_equal(t["lm_head.weight"], a["wcls"])
            np.testing.assert_array_equal(t["model.embed_tokens.weight"], a["token_embedding"])
            np.testing.assert_array_equal(t["model.norm.weight"], a["rms_final"])
            for i in range(2):
                p = f"model.layers.{i}."
                np.testing.assert_array_equal(t[p + "input_layernorm.weight"], a["rms_att"][i])
                np.testing.assert_array_equal(t[p + "post_attention_layernorm.weight"], a["rms_ffn"][i])
                np.testing.assert_array_equal(t[p + "self_attn.v_proj.weight"], a["wv"][i])
                np.testing.assert_array_equal(t[p + "self_attn.o_proj.weight"], a["wo"][i])
                np.testing.assert_array_equal(t[p + "mlp.gate_proj.weight"], a["w1"][i])
                np.testing.assert_array_equal(t[p + "mlp.down_proj.weight"], a["w2"][i])
                np.testing.assert_array_equal(t[p + "mlp.up_proj.weight"], a["w3"][i])
                hd = 8
                for h in range(2):  # k_proj: per KV head, row i <- 2i, row i + hd/2 <- 2i + 1
                    k, wk = t[p + "self_attn.k_proj.weight"], a["wk"][i]
                    np.testing.assert_array_equal(k[h * hd:h * hd + hd // 2], wk[h * hd:(h + 1) * hd:2])
                    np.testing.assert_array_equal(k[h * hd + hd // 2:(h + 1) * hd], wk[h * hd + 1:(h + 1) * hd:2])
            binary = os.environ.get("PLAINLLAMA_BINARY")
            if binary:  # the engine accepts the untied folder
                r = subprocess.run([binary, "inspect", "-m", out, "--json"], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout)["n_params"], sum(v.size for v in t.values()))

    def test_truncated_file_rejected(self):
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "m.bin")
            with open(CHECKPOINT, "rb") as f:
                data = f.read()
            with open(ckpt, "wb") as f:
                f.write(data[:-4])
            r = run_script(ckpt, os.path.join(tmp, "out"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("1056536 bytes; expected 1056540", r.stderr)

    def test_version1_format_rejected(self):
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "m.bin")
            with open(ckpt, "wb") as f:
                f.write(struct.pack("<Ii", 0x616B3432, 1) + bytes(248))
            r = run_script(ckpt, os.path.join(tmp, "out"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("version 1", r.stderr)

    def test_wrong_rope_theta_rejected(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_script(CHECKPOINT, os.path.join(tmp, "out"), "--rope-theta", "500000")
            self.assertEqual(r.returncode, 1)
            self.assertIn("rope_theta 500000", r.stderr)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
