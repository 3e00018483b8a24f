#!/usr/bin/python3
"""Write a Hugging Face LLaMA folder with random weights for a shape preset (for loading and speed tests).

Weights are N(0, 0.02) from numpy's default_rng(seed), norm weights are 1. The safetensors header is written
first (all shapes are known), then each tensor is generated and written in row chunks, so even the llama2-7b
shape needs only a few hundred MB of memory. The preset's tokenizer is copied in: the Llama 2 tokenizer.model, or
for llama3.2-1b the Llama 3.1 tokenizer.json and tokenizer_config.json, with a generation_config.json listing its
end-of-turn ids (--tokenizer FILE_OR_FOLDER to choose another; --no-tokenizer to skip).

Examples:
    scripts/make_synthetic_model.py --preset tinyllama-1.1b --dtype bf16 models/tinyllama-synthetic
    scripts/make_synthetic_model.py --preset llama3.2-1b --dtype bf16 models/llama3.2-1b-synthetic
    scripts/make_synthetic_model.py --preset small --hidden-size 64 --num-hidden-layers 2 /tmp/tiny
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_llama2c import (DTYPES, ConvertError, SafetensorsWriter, llama_config,  # noqa: E402
                             llama_tensor_specs, write_config)

PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOKENIZER = os.path.join(PROJECT_DIR, "..", "shared", "tokenizers", "llama2", "tokenizer.model")
LLAMA3_TOKENIZER = os.path.join(PROJECT_DIR, "..", "shared", "tokenizers", "llama3.1")
TOKENIZER_FILES = ["tokenizer.model", "tokenizer.json", "tokenizer_config.json"]

# config.json fields of each preset
PRESETS = {
    "tinyllama-1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                           num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5,
                           rope_theta=10000.0, tie_word_embeddings=False),
    "llama2-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
                      rope_theta=10000.0, tie_word_embeddings=False),
    "small": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                  num_key_value_heads=12, vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5,
                  rope_theta=10000.0, tie_word_embeddings=False),
    # meta-llama/Llama-3.2-1B: head_dim 64, tied embeddings, llama3 RoPE scaling
    "llama3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                        rope_theta=500000.0, tie_word_embeddings=True),
}
# config.json fields a preset adds to llama_config's, and its tokenizer
PRESET_EXTRAS = {
    "llama3.2-1b": dict(rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                        bos_token_id=128000, eos_token_id=[128001, 128008, 128009]),
}
PRESET_TOKENIZERS = {"llama3.2-1b": LLAMA3_TOKENIZER}
INT_FIELDS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "vocab_size", "max_position_embeddings"]
CHUNK_ELEMENTS = 1 << 24  # at most 16M values (64 MiB of f32) generated at once
INIT_STD = 0.02


def resolve_shape(preset, overrides):
    """Preset fields with the non-None overrides applied, validated."""
    if preset not in PRESETS:
        raise ConvertError(f"--preset {preset}: expected one of {', '.join(PRESETS)}")
    shape = dict(PRESETS[preset])
    for k, v in overrides.items():
        if v is not None:
            shape[k] = v
    for k in INT_FIELDS:
        if shape[k] <= 0:
            raise ConvertError(f"--{k.replace('_', '-')} {shape[k]}: expected a positive value")
    h, nh, nkv = shape["hidden_size"], shape["num_attention_heads"], shape["num_key_value_heads"]
    if h % nh or (h // nh) % 2:
        raise ConvertError(f"--hidden-size {h} / --num-attention-heads {nh}: expected an even head size dividing "
                           "the hidden size")
    if nh % nkv:
        raise ConvertError(f"--num-key-value-heads {nkv}: expected a divisor of --num-attention-heads {nh}")
    if shape["rms_norm_eps"] <= 0 or shape["rope_theta"] <= 0:
        raise ConvertError("--rms-norm-eps and --rope-theta: expected positive values")
    return shape


def n_params(shape):
    """Parameter count of a LLaMA model of this shape (what `plainllama inspect` reports)."""
    h, ffn, L, v = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"], shape["vocab_size"]
    hd = h // shape["num_attention_heads"]
    q, kv = shape["num_attention_heads"] * hd, shape["num_key_value_heads"] * hd
    per_layer = 2 * h + q * h + 2 * kv * h + h * q + 3 * ffn * h
    return v * h + h + L * per_layer + (0 if shape["tie_word_embeddings"] else v * h)


def make_model(out_dir, preset="small", overrides=None, dtype="f32", seed=0, tokenizer="preset", log=None):
    """Writes out_dir/{config.json, model.safetensors} and the tokenizer's files; returns the config dict.
    tokenizer: a tokenizer.model file, a folder of tokenizer files, "preset" (the preset's) or None (none)."""
    if dtype not in DTYPES:
        raise ConvertError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    if tokenizer == "preset":
        tokenizer = PRESET_TOKENIZERS.get(preset, DEFAULT_TOKENIZER)
    if tokenizer is not None and not os.path.exists(tokenizer):
        raise ConvertError(f"--tokenizer {tokenizer}: no such file or folder (pass --tokenizer PATH or --no-tokenizer)")
    tokenizer_files = []  # (source, name in out_dir)
    if tokenizer is not None and os.path.isdir(tokenizer):
        tokenizer_files = [(os.path.join(tokenizer, n), n) for n in TOKENIZER_FILES
                           if os.path.isfile(os.path.join(tokenizer, n))]
        if not any(n in ("tokenizer.model", "tokenizer.json") for _, n in tokenizer_files):
            raise ConvertError(f"--tokenizer {tokenizer}: the folder has no tokenizer.model or tokenizer.json")
    elif tokenizer is not None:
        tokenizer_files = [(tokenizer, "tokenizer.model")]
    s = resolve_shape(preset, overrides or {})
    st_dtype, elem_size, torch_dtype = DTYPES[dtype]
    config = llama_config(s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"], s["num_attention_heads"],
                          s["num_key_value_heads"], s["vocab_size"], s["max_position_embeddings"], s["rms_norm_eps"],
                          s["rope_theta"], s["tie_word_embeddings"], torch_dtype)
    config.update(PRESET_EXTRAS.get(preset, {}))
    specs = llama_tensor_specs(s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"],
                               s["num_attention_heads"], s["num_key_value_heads"], s["vocab_size"],
                               s["tie_word_embeddings"], st_dtype)
    os.makedirs(out_dir, exist_ok=True)
    write_config(os.path.join(out_dir, "config.json"), config)

    rng = np.random.default_rng(seed)
    total = sum(int(np.prod(shape)) for _, _, shape in specs)
    done = 0
    start = time.monotonic()
    path = os.path.join(out_dir, "model.safetensors")
    if log:
        log(f"make_synthetic_model: {out_dir}: {len(specs)} tensors, {total:,} parameters, "
            f"{total * elem_size / 2**30:.2f} GiB of {st_dtype}")
    with SafetensorsWriter(path, specs, metadata={"format": "pt"}) as w:
        for i, (name, _, shape) in enumerate(specs):
            if len(shape) == 1:  # norm weights
                w.write(name, np.ones(shape, dtype=np.float32))
            else:
                rows, cols = shape
                step = max(1, CHUNK_ELEMENTS // cols)
                for r in range(0, rows, step):
                    n = min(step, rows - r)
                    chunk = rng.standard_normal((n, cols), dtype=np.float32)  # [n, cols]
                    chunk *= np.float32(INIT_STD)
                    w.write(name, chunk)
            done += int(np.prod(shape))
            if log:
                log(f"[{i + 1}/{len(specs)}] {name} {shape} ({100.0 * done / total:.1f}%, "
                    f"{time.monotonic() - start:.1f}s)")
    for src, name in tokenizer_files:
        shutil.copyfile(src, os.path.join(out_dir, name))
    if "eos_token_id" in PRESET_EXTRAS.get(preset, {}):  # as the hub's folders ship it
        with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, f, indent=2)
    return config


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="presets:\n" + "\n".join(
                                     f"  {k}: hidden {v['hidden_size']}, {v['num_hidden_layers']} layers, "
                                     f"{v['num_attention_heads']} heads, {v['num_key_value_heads']} KV heads, "
                                     f"FFN {v['intermediate_size']}, vocab {v['vocab_size']}, "
                                     f"ctx {v['max_position_embeddings']}" for k, v in PRESETS.items()))
    ap.add_argument("out_dir", help="output folder (created if missing)")
    ap.add_argument("--preset", choices=list(PRESETS), default="small", help="shape preset (default small)")
    for k in INT_FIELDS:
        ap.add_argument("--" + k.replace("_", "-"), type=int, help=f"override the preset's {k}")
    ap.add_argument("--rms-norm-eps", type=float, help="override the preset's rms_norm_eps")
    ap.add_argument("--rope-theta", type=float, help="override the preset's rope_theta")
    tie = ap.add_mutually_exclusive_group()
    tie.add_argument("--tie-word-embeddings", dest="tie_word_embeddings", action="store_true", default=None,
                     help="no lm_head.weight: the output projection is embed_tokens")
    tie.add_argument("--untie-word-embeddings", dest="tie_word_embeddings", action="store_false",
                     help="write lm_head.weight (the presets' default)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32", help="weight dtype (default f32)")
    ap.add_argument("--seed", type=int, default=0, help="numpy default_rng seed (default 0)")
    tok = ap.add_mutually_exclusive_group()
    tok.add_argument("--tokenizer", default="preset",
                     help="a tokenizer.model, or a folder with tokenizer.json / tokenizer_config.json, to copy in "
                          "(default: the preset's, ../shared/tokenizers/llama2/ or llama3.1/)")
    tok.add_argument("--no-tokenizer", action="store_true", help="do not copy a tokenizer")
    args = ap.parse_args(argv)
    overrides = {k: getattr(args, k) for k in INT_FIELDS + ["rms_norm_eps", "rope_theta", "tie_word_embeddings"]}
    try:
        make_model(args.out_dir, args.preset, overrides, args.dtype, args.seed,
                   None if args.no_tokenizer else args.tokenizer, log=lambda m: print(m, file=sys.stderr))
    except (ConvertError, OSError) as e:
        print(f"make_synthetic_model: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
