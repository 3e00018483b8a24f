#!/usr/bin/python3
"""Convert a llama2.c checkpoint (legacy v0 format) into a Hugging Face LLaMA folder.

Writes OUT/config.json (LlamaForCausalLM), OUT/model.safetensors and, with --tokenizer, copies a
SentencePiece tokenizer.model into OUT. llama2.c's own tokenizer file (tok*.bin) is not a SentencePiece
model and cannot be used as one.

Legacy v0 layout: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
vocab_size means an unshared classifier), then f32 arrays in this order:
    token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim], wv [L, kv_dim, dim],
    wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden], w3 [L, hidden, dim],
    rms_final [dim], freq_cis_real [seq_len, head_size/2], freq_cis_imag [seq_len, head_size/2], wcls [vocab, dim]
(wcls only when unshared).

RoPE: llama2.c rotates adjacent pairs (2i, 2i+1) of each head; HF rotates (i, i + head_dim/2) (rotate_half).
q_proj and k_proj rows are permuted per head exactly as HF's convert_llama_weights_to_hf.py permute() does, so
the HF model computes the same function.

The safetensors helpers here (dtype encoding, header, streaming writer, reader) are also used by
make_synthetic_model.py and the tests.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

# --dtype value -> (safetensors dtype, bytes per element, config.json torch_dtype)
DTYPES = {
    "f32": ("F32", 4, "float32"),
    "f16": ("F16", 2, "float16"),
    "bf16": ("BF16", 2, "bfloat16"),
}
ST_ELEMENT_SIZE = {"F32": 4, "F16": 2, "BF16": 2}

LLAMA2C_V1_MAGIC = 0x616B3432  # "ak42": the newer llama2.c export formats (version 1 and 2)


class ConvertError(Exception):
    """Bad input: the message names the file or flag and what was expected."""


# ---------------------------------------------------------------------------------------------------------------
# dtype encoding

def f32_to_bf16_bits(x):
    """float32 array -> uint16 bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    # round to nearest even: add 0x7FFF plus the lowest kept bit, then truncate
    rounded = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded


def encode(x, st_dtype):
    """float32 array -> little-endian bytes of safetensors dtype st_dtype (F32, F16 or BF16)."""
    x = np.asarray(x, dtype=np.float32)
    if st_dtype == "F32":
        return np.ascontiguousarray(x, dtype="<f4").tobytes()
    if st_dtype == "F16":
        return np.ascontiguousarray(x.astype("<f2")).tobytes()
    if st_dtype == "BF16":
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    raise ConvertError(f"unsupported safetensors dtype {st_dtype!r}; expected F32, F16 or BF16")


def decode(raw, st_dtype, shape):
    """Little-endian safetensors bytes -> float32 array of `shape`."""
    if st_dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4")
    elif st_dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif st_dtype == "BF16":
        a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        raise ConvertError(f"unsupported safetensors dtype {st_dtype!r}; expected F32, F16 or BF16")
    return a.reshape(shape)


# ---------------------------------------------------------------------------------------------------------------
# safetensors writing and reading

def safetensors_header(specs, metadata=None):
    """specs: [(name, st_dtype, shape)] in file order -> (header bytes incl. the 8-byte length, data size).

    Tensors are packed back to back in the given order; the JSON is compact and padded with spaces so the data
    region starts at a multiple of 8 bytes."""
    header = {}
    offset = 0
    for name, st_dtype, shape in specs:
        nbytes = ST_ELEMENT_SIZE[st_dtype]
        for d in shape:
            nbytes *= int(d)
        header[name] = {"dtype": st_dtype, "shape": [int(d) for d in shape], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, offset


class SafetensorsWriter:
    """Streams tensors into a safetensors file whose header is known up front.

    Usage: with SafetensorsWriter(path, specs) as w: w.write(name, chunk) ... — chunks of one tensor are
    written in order (row chunks are fine); each tensor's byte count is checked against its header entry."""

    def __init__(self, path, specs, metadata=None):
        self.path = path
        self.specs = list(specs)
        header, self.data_size = safetensors_header(self.specs, metadata)
        self.sizes = []
        for _, st_dtype, shape in self.specs:
            n = ST_ELEMENT_SIZE[st_dtype]
            for d in shape:
                n *= int(d)
            self.sizes.append(n)
        self.index = 0      # which tensor is being written
        self.written = 0    # bytes of that tensor written so far
        self.file = open(path, "wb")
        self.file.write(header)

    def write(self, name, chunk):
        """Appends float32 `chunk` (a whole tensor or its next rows) to tensor `name`, encoded to its dtype."""
        if self.index >= len(self.specs) or self.specs[self.index][0] != name:
            expected = self.specs[self.index][0] if self.index < len(self.specs) else "nothing"
            raise ConvertError(f"{self.path}: writing tensor '{name}' out of order; expected {expected}")
        raw = encode(chunk, self.specs[self.index][1])
        self.file.write(raw)
        self.written += len(raw)
        size = self.sizes[self.index]
        if self.written > size:
            raise ConvertError(f"{self.path}: tensor '{name}' got {self.written} bytes; expected {size}")
        if self.written == size:
            self.index += 1
            self.written = 0

    def close(self):
        self.file.close()
        if self.index != len(self.specs):
            missing = self.specs[self.index][0]
            raise ConvertError(f"{self.path}: incomplete, tensor '{missing}' and later ones not fully written")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.file.close()
        return False


def read_safetensors_header(path):
    """-> (header dict without __metadata__, metadata or None, data region offset in the file)."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise ConvertError(f"{path}: shorter than the 8-byte safetensors header length")
        (n,) = struct.unpack("<Q", prefix)
        size = os.path.getsize(path)
        if n > size - 8:
            raise ConvertError(f"{path}: header length {n} exceeds the file size {size}")
        header = json.loads(f.read(n))
    metadata = header.pop("__metadata__", None)
    return header, metadata, 8 + n


def read_safetensors(path):
    """-> {name: (st_dtype, shape, raw bytes)} in file order (by data offset)."""
    header, _, data_start = read_safetensors_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            begin, end = e["data_offsets"]
            f.seek(data_start + begin)
            out[name] = (e["dtype"], list(e["shape"]), f.read(end - begin))
    return out


def write_config(path, config):
    with open(path, "w") as f:
        f.write(json.dumps(config, indent=2) + "\n")


def llama_config(hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
                 vocab_size, max_position_embeddings, rms_norm_eps, rope_theta, tie_word_embeddings, torch_dtype):
    """config.json for LlamaForCausalLM, fields in the order of the shared stories260K folder."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads,
        "num_key_value_heads": num_key_value_heads,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "rms_norm_eps": rms_norm_eps,
        "rope_theta": rope_theta,
        "hidden_act": "silu",
        "tie_word_embeddings": tie_word_embeddings,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": torch_dtype,
    }


def llama_tensor_specs(hidden, intermediate, layers, heads, kv_heads, vocab, tied, st_dtype, head_dim=None):
    """[(name, st_dtype, shape)] of a LLaMA checkpoint in file order: embeddings, final norm, per layer the norms,
    attention and MLP projections, then lm_head when untied."""
    head_dim = head_dim or hidden // heads
    specs = [("model.embed_tokens.weight", st_dtype, [vocab, hidden]),
             ("model.norm.weight", st_dtype, [hidden])]
    for i in range(layers):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", st_dtype, [hidden]),
            (p + "post_attention_layernorm.weight", st_dtype, [hidden]),
            (p + "self_attn.q_proj.weight", st_dtype, [heads * head_dim, hidden]),
            (p + "self_attn.k_proj.weight", st_dtype, [kv_heads * head_dim, hidden]),
            (p + "self_attn.v_proj.weight", st_dtype, [kv_heads * head_dim, hidden]),
            (p + "self_attn.o_proj.weight", st_dtype, [hidden, heads * head_dim]),
            (p + "mlp.gate_proj.weight", st_dtype, [intermediate, hidden]),
            (p + "mlp.down_proj.weight", st_dtype, [hidden, intermediate]),
            (p + "mlp.up_proj.weight", st_dtype, [intermediate, hidden]),
        ]
    if not tied:
        specs.append(("lm_head.weight", st_dtype, [vocab, hidden]))
    return specs


# ---------------------------------------------------------------------------------------------------------------
# llama2.c

def permute_rope(w, n_heads):
    """Per-head row permutation from interleaved RoPE pairs (2i, 2i+1) to rotate_half pairs (i, i + hd/2).

    Same as HF's permute(): w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)."""
    dim1, dim2 = w.shape
    return w.reshape(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(0, 2, 1, 3).reshape(dim1, dim2)


def read_llama2c(path):
    """-> (params dict, {llama2.c array name: float32 array (memory-mapped)}), validating the file size."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(28)
    if len(head) < 28:
        raise ConvertError(f"{path}: {size} bytes, shorter than the 28-byte llama2.c header")
    if struct.unpack("<I", head[:4])[0] == LLAMA2C_V1_MAGIC:
        version = struct.unpack("<i", head[4:8])[0]
        raise ConvertError(f"{path}: llama2.c export format version {version}; only the legacy v0 format "
                           "(export.py --version 0) is supported")
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", head)
    shared = vocab > 0
    vocab = abs(vocab)
    for name, v in [("dim", dim), ("hidden_dim", hidden), ("n_layers", layers), ("n_heads", heads),
                    ("n_kv_heads", kv_heads), ("vocab_size", vocab), ("seq_len", seq_len)]:
        if v <= 0:
            raise ConvertError(f"{path}: header field {name} = {v}; expected a positive value")
    if dim % heads or heads % kv_heads or (dim // heads) % 2:
        raise ConvertError(f"{path}: dim {dim}, n_heads {heads}, n_kv_heads {kv_heads}; expected dim divisible by "
                           "n_heads, n_heads by n_kv_heads and an even head size")
    head_size = dim // heads
    kv_dim = kv_heads * head_size
    shapes = [
        ("token_embedding", [vocab, dim]),
        ("rms_att", [layers, dim]),
        ("wq", [layers, dim, dim]),
        ("wk", [layers, kv_dim, dim]),
        ("wv", [layers, kv_dim, dim]),
        ("wo", [layers, dim, dim]),
        ("rms_ffn", [layers, dim]),
        ("w1", [layers, hidden, dim]),
        ("w2", [layers, dim, hidden]),
        ("w3", [layers, hidden, dim]),
        ("rms_final", [dim]),
        ("freq_cis_real", [seq_len, head_size // 2]),
        ("freq_cis_imag", [seq_len, head_size // 2]),
    ]
    if not shared:
        shapes.append(("wcls", [vocab, dim]))
    expected = 28 + 4 * sum(int(np.prod(s)) for _, s in shapes)
    if size != expected:
        raise ConvertError(f"{path}: {size} bytes; expected {expected} for a legacy v0 checkpoint with dim {dim}, "
                           f"hidden_dim {hidden}, n_layers {layers}, n_heads {heads}, n_kv_heads {kv_heads}, "
                           f"vocab_size {vocab} ({'shared' if shared else 'unshared'} classifier), seq_len {seq_len}")
    arrays = {}
    offset = 28
    for name, shape in shapes:
        arrays[name] = np.memmap(path, dtype="<f4", mode="r", offset=offset, shape=tuple(shape))
        offset += 4 * int(np.prod(shape))
    params = {"dim": dim, "hidden_dim": hidden, "n_layers": layers, "n_heads": heads, "n_kv_heads": kv_heads,
              "vocab_size": vocab, "seq_len": seq_len, "shared_classifier": shared}
    return params, arrays


def check_rope_theta(path, arrays, head_size, theta):
    """llama2.c stores its RoPE table; it must match rope_theta, which the HF config carries instead."""
    real = np.asarray(arrays["freq_cis_real"], dtype=np.float64)
    imag = np.asarray(arrays["freq_cis_imag"], dtype=np.float64)
    freqs = theta ** (-np.arange(0, head_size, 2, dtype=np.float64) / head_size)  # [head_size/2]
    angles = np.outer(np.arange(real.shape[0], dtype=np.float64), freqs)         # [seq_len, head_size/2]
    err = max(np.abs(real - np.cos(angles)).max(), np.abs(imag - np.sin(angles)).max())
    # f32 tables of angles up to seq_len radians: a few ulps of those angles
    if err > 1e-3:
        raise ConvertError(f"{path}: the stored RoPE table differs from rope_theta {theta} by {err:.3g}; "
                           "pass the checkpoint's --rope-theta")


def convert(checkpoint, out_dir, dtype="f32", tokenizer=None, rms_norm_eps=1e-5, rope_theta=10000.0, log=None):
    """Writes out_dir/{config.json, model.safetensors[, tokenizer.model]} from a llama2.c v0 checkpoint."""
    if dtype not in DTYPES:
        raise ConvertError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    if tokenizer is not None and not os.path.isfile(tokenizer):
        raise ConvertError(f"--tokenizer {tokenizer}: no such file")
    st_dtype, _, torch_dtype = DTYPES[dtype]
    p, a = read_llama2c(checkpoint)
    dim, layers, heads, kv_heads = p["dim"], p["n_layers"], p["n_heads"], p["n_kv_heads"]
    check_rope_theta(checkpoint, a, dim // heads, rope_theta)
    tied = p["shared_classifier"]

    os.makedirs(out_dir, exist_ok=True)
    config = llama_config(dim, p["hidden_dim"], layers, heads, kv_heads, p["vocab_size"], p["seq_len"],
                          rms_norm_eps, rope_theta, tied, torch_dtype)
    write_config(os.path.join(out_dir, "config.json"), config)

    specs = llama_tensor_specs(dim, p["hidden_dim"], layers, heads, kv_heads, p["vocab_size"], tied, st_dtype)
    sources = {"model.embed_tokens.weight": lambda: a["token_embedding"],
               "model.norm.weight": lambda: a["rms_final"]}
    if not tied:
        sources["lm_head.weight"] = lambda: a["wcls"]
    for i in range(layers):
        q = f"model.layers.{i}."
        sources.update({
            q + "input_layernorm.weight": lambda i=i: a["rms_att"][i],
            q + "post_attention_layernorm.weight": lambda i=i: a["rms_ffn"][i],
            q + "self_attn.q_proj.weight": lambda i=i: permute_rope(np.asarray(a["wq"][i]), heads),
            q + "self_attn.k_proj.weight": lambda i=i: permute_rope(np.asarray(a["wk"][i]), kv_heads),
            q + "self_attn.v_proj.weight": lambda i=i: a["wv"][i],
            q + "self_attn.o_proj.weight": lambda i=i: a["wo"][i],
            q + "mlp.gate_proj.weight": lambda i=i: a["w1"][i],
            q + "mlp.down_proj.weight": lambda i=i: a["w2"][i],
            q + "mlp.up_proj.weight": lambda i=i: a["w3"][i],
        })
    path = os.path.join(out_dir, "model.safetensors")
    with SafetensorsWriter(path, specs, metadata={"format": "pt"}) as w:
        for name, _, _ in specs:
            w.write(name, sources[name]())
            if log:
                log(f"wrote {name}")
    if tokenizer is not None:
        shutil.copyfile(tokenizer, os.path.join(out_dir, "tokenizer.model"))
    return config


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="llama2.c checkpoint (.bin, legacy v0 format)")
    ap.add_argument("out_dir", help="output folder (created if missing)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32", help="weight dtype (default f32)")
    ap.add_argument("--tokenizer", help="SentencePiece tokenizer.model to copy in (llama2.c's tok*.bin is not one)")
    ap.add_argument("--rms-norm-eps", type=float, default=1e-5, help="rms_norm_eps for config.json (default 1e-5)")
    ap.add_argument("--rope-theta", type=float, default=10000.0,
                    help="rope_theta; checked against the checkpoint's RoPE table (default 10000)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each tensor written")
    args = ap.parse_args(argv)
    log = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
    try:
        config = convert(args.checkpoint, args.out_dir, args.dtype, args.tokenizer, args.rms_norm_eps,
                         args.rope_theta, log)
    except (ConvertError, OSError) as e:
        print(f"convert_llama2c: error: {e}", file=sys.stderr)
        return 1
    print(f"convert_llama2c: wrote {args.out_dir} (hidden {config['hidden_size']}, {config['num_hidden_layers']} "
          f"layers, vocab {config['vocab_size']}, {args.dtype})", file=sys.stderr)
    if args.tokenizer is None:
        print(f"convert_llama2c: note: no --tokenizer given; {args.out_dir} has no tokenizer.model", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
