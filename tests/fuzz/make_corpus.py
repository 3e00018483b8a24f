#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets from the shared models (not committed: they derive from ../shared).

Usage: make_corpus.py SHARED_DIR OUT_DIR
Writes OUT_DIR/safetensors/* (each model.safetensors whole, header-only, cut in the data, shrunk to tiny shapes
with the real names and dtypes, unaligned, with __metadata__), OUT_DIR/config/* (each config.json and variants
with the optional fields HF configs use) and OUT_DIR/gguf/* (each of models/gguf/*.gguf shrunk: its keys with
arrays cut to a few elements, its tensors with their names and types at one block; as parts of a split set; cut).
"""
import json
import pathlib
import struct
import sys

# GGUF value types: struct format of each scalar (8 string, 9 array).
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}
# ggml tensor types of the shared files: (elements per block, bytes per block)
GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 6: (32, 22), 8: (32, 34), 12: (256, 144), 13: (256, 176),
               14: (256, 210), 30: (1, 2)}


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


def read_gguf(blob):
    """(version, [(key, type, raw value bytes)], [(name, ne, type, data)]) of a valid GGUF file."""
    pos = 4
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, blob, pos)
        pos += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]
    def skip_value(t):
        nonlocal pos
        if t == 8:
            n = take("Q")
            pos += n
        elif t == 9:
            et, n = take("IQ")
            for _ in range(n):
                skip_value(et)
        else:
            pos += struct.calcsize("<" + GGUF_SCALARS[t])
    version, n_tensors, n_kv = take("IQQ")
    kvs = []
    for _ in range(n_kv):
        key = blob[pos + 8 : pos + 8 + take("Q")].decode()
        pos += len(key.encode())
        t = take("I")
        start = pos
        skip_value(t)
        kvs.append((key, t, blob[start:pos]))
    infos = []
    for _ in range(n_tensors):
        n = take("Q")
        name = blob[pos : pos + n].decode()
        pos += n
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        t, off = take("IQ")
        infos.append((name, ne, t, off))
    data = (pos + 31) // 32 * 32
    tensors = []
    for name, ne, t, off in infos:
        block, nbytes = GGML_BLOCKS[t]
        n = 1
        for d in ne:
            n *= d
        tensors.append((name, ne, t, blob[data + off : data + off + n // block * nbytes]))
    return version, kvs, tensors


def shrink_value(t, raw, keep):
    """An array value cut to its first `keep` elements; a scalar as it is."""
    if t != 9:
        return raw
    et, n = struct.unpack_from("<IQ", raw)
    pos = 12
    for _ in range(min(n, keep)):
        if et == 8:
            pos += 8 + struct.unpack_from("<Q", raw, pos)[0]
        else:
            pos += struct.calcsize("<" + GGUF_SCALARS[et])
    return struct.pack("<IQ", et, min(n, keep)) + raw[12:pos]


def gguf_bytes(version, kvs, tensors):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, raw in kvs:
        k = key.encode()
        out += struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + raw
    data, offsets = b"", []
    for name, ne, t, raw in tensors:
        offsets.append(len(data))
        data += raw + b"\0" * ((32 - len(raw) % 32) % 32)
    for (name, ne, t, raw), off in zip(tensors, offsets):
        k = name.encode()
        out += struct.pack("<Q", len(k)) + k + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", t, off)
    out += b"\0" * ((32 - len(out) % 32) % 32)
    return out + data


def gguf_seeds(shared, out):
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((shared / "models" / "gguf").glob("*.gguf")):
        version, kvs, tensors = read_gguf(path.read_bytes())
        small_kvs = [(k, t, shrink_value(t, raw, 16)) for k, t, raw in kvs]
        small = []
        for name, ne, t, raw in tensors:  # one block per row, at most two rows
            block, nbytes = GGML_BLOCKS[t]
            shape = [block] + [min(d, 2) for d in ne[1:]]
            rows = 1
            for d in shape[1:]:
                rows *= d
            small.append((name, shape, t, raw[: rows * nbytes]))
        stem = path.stem
        blob = gguf_bytes(version, small_kvs, small)
        (out / f"{stem}-shrunk").write_bytes(blob)
        (out / f"{stem}-cut").write_bytes(blob[: len(blob) * 2 // 3])
        (out / f"{stem}-no-tensors").write_bytes(gguf_bytes(version, small_kvs, []))
        (out / f"{stem}-v2").write_bytes(gguf_bytes(2, small_kvs, small[:3]))
        split = [("split.no", 2, struct.pack("<H", 0)), ("split.count", 2, struct.pack("<H", 1)),
                 ("split.tensors.count", 5, struct.pack("<i", len(small)))]
        (out / f"{stem}-split").write_bytes(gguf_bytes(version, small_kvs + split, small))
        freqs = [("rope_freqs.weight", [4], 0, struct.pack("<4f", 1.0, 2.0, 4.0, 8.0))]
        (out / f"{stem}-rope-freqs").write_bytes(gguf_bytes(version, small_kvs, small[:2] + freqs))


def main():
    shared, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    st_dir, cfg_dir = out / "safetensors", out / "config"
    gguf_seeds(shared, out / "gguf")
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
