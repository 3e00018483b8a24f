#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets from the shared models (not committed: they derive from ../shared).

Usage: make_corpus.py SHARED_DIR OUT_DIR
Writes OUT_DIR/safetensors/* (each model.safetensors whole, header-only, cut in the data, shrunk to tiny shapes
with the real names and dtypes, unaligned, with __metadata__) and OUT_DIR/config/* (each config.json and variants
with the optional fields HF configs use).
"""
import json
import pathlib
import struct
import sys


def safetensors_bytes(tensors, pad=0, metadata=None):
    """tensors: list of (name, dtype, shape, data bytes); pad zero bytes before each tensor."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        data += b"\0" * pad
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def read_safetensors(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    out = []
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out.append((b, name, t["dtype"], t["shape"], blob[8 + n + b : 8 + n + e]))
    out.sort()
    return n, [(name, dtype, shape, raw) for _, name, dtype, shape, raw in out]


def shrink(tensors, dim):
    """Every dimension capped at `dim`, data cut to fit: the real names and dtypes in a tiny valid file."""
    out = []
    for name, dtype, shape, raw in tensors:
        s = [min(d, dim) for d in shape]
        n = 1
        for d in s:
            n *= d
        size = 4 if dtype == "F32" else 2
        out.append((name, dtype, s, raw[: n * size]))
    return out


def main():
    shared, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    st_dir, cfg_dir = out / "safetensors", out / "config"
    st_dir.mkdir(parents=True, exist_ok=True)
    cfg_dir.mkdir(parents=True, exist_ok=True)
    models = sorted(p for p in (shared / "models").iterdir() if (p / "config.json").exists())
    for m in models:
        name = m.name
        blob = (m / "model.safetensors").read_bytes()
        n, tensors = read_safetensors(blob)
        (st_dir / f"{name}-whole").write_bytes(blob)
        (st_dir / f"{name}-header-only").write_bytes(blob[: 8 + n])
        (st_dir / f"{name}-cut-in-data").write_bytes(blob[: 8 + n + 1000])
        (st_dir / f"{name}-cut-in-header").write_bytes(blob[: 8 + n // 2])
        (st_dir / f"{name}-shrunk-2").write_bytes(safetensors_bytes(shrink(tensors, 2)))
        (st_dir / f"{name}-shrunk-1-unaligned").write_bytes(safetensors_bytes(shrink(tensors, 1), pad=1))
        (st_dir / f"{name}-shrunk-3-metadata").write_bytes(
            safetensors_bytes(shrink(tensors[:4], 3), metadata={"format": "pt"}))
        (st_dir / f"{name}-empty-tensors").write_bytes(safetensors_bytes(shrink(tensors[:3], 0)))

        cfg = json.loads((m / "config.json").read_text())
        (cfg_dir / f"{name}").write_text((m / "config.json").read_text())
        variants = {
            "untied-head-dim": {**cfg, "tie_word_embeddings": False, "head_dim": 16},
            "eos-list-nulls": {**cfg, "eos_token_id": [2, 3], "bos_token_id": None, "rope_scaling": None},
            "no-optional": {k: cfg[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                                "num_attention_heads", "vocab_size", "rms_norm_eps")},
            "rope-linear": {**cfg, "rope_scaling": {"type": "linear", "factor": 2.0}},
            "rope-llama3": {**cfg, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 128}},
            "rope-parameters": {**{k: v for k, v in cfg.items() if k != "rope_theta"},
                                "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
            "biases-false": {**cfg, "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16"},
        }
        for v, c in variants.items():
            (cfg_dir / f"{name}-{v}").write_text(json.dumps(c, indent=2))


if __name__ == "__main__":
    main()
