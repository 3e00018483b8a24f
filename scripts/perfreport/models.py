"""The models a run makes: F16 and BF16 copies of a safetensors folder, and each format's (folder, --quant)."""
import json
import os
import shutil
import struct

from .common import QUANT_FORMATS, Fail


def convert_safetensors(src, dst, dtype):
    """A copy of model folder src in dst with every F32/F16/BF16 tensor stored as dtype (f16 or bf16; BF16 rounded to
    nearest even); other files copied."""
    import numpy as np
    os.makedirs(dst, exist_ok=True)
    names = os.listdir(src)
    if not any(n.endswith(".safetensors") for n in names):
        raise Fail(f"{src}: no .safetensors file to convert to {dtype}")
    for name in names:
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            continue
        if not name.endswith(".safetensors"):
            shutil.copy(path, os.path.join(dst, name))
            continue
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            base = 8 + n
            out_header, parts, offset = {}, [], 0
            for key, t in header.items():
                if key == "__metadata__":
                    out_header[key] = t
                    continue
                b, e = t["data_offsets"]
                f.seek(base + b)
                raw = f.read(e - b)
                if t["dtype"] == "F32":
                    x = np.frombuffer(raw, dtype="<f4")
                elif t["dtype"] == "F16":
                    x = np.frombuffer(raw, dtype="<f2").astype(np.float32)
                elif t["dtype"] == "BF16":
                    x = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
                else:
                    x = None
                if x is None:
                    data, dt = raw, t["dtype"]
                elif dtype == "f16":
                    data, dt = x.astype("<f2").tobytes(), "F16"
                else:
                    u = x.view(np.uint32)
                    data, dt = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes(), "BF16"
                out_header[key] = {"dtype": dt, "shape": t["shape"], "data_offsets": [offset, offset + len(data)]}
                parts.append(data)
                offset += len(data)
        h = json.dumps(out_header).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(dst, name), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for p in parts:
                f.write(p)


def folder_dtype(model):
    """The dtype of a folder's first weight matrix ("F32", "F16", "BF16", ...), or None."""
    for name in sorted(os.listdir(model)):
        if name.endswith(".safetensors"):
            with open(os.path.join(model, name), "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            for k, t in header.items():
                if k != "__metadata__" and len(t["shape"]) == 2:
                    return t["dtype"]
    return None


def format_variant(model, fmt, tmp):
    """(folder, --quant) running model in format fmt: a converted copy for f16/bf16 (the folder itself when it is
    already stored so), the folder with --quant for the quantized ones."""
    if fmt in QUANT_FORMATS:
        return model, fmt
    if folder_dtype(model) == fmt.upper():
        return model, "none"
    dst = os.path.join(tmp, os.path.basename(os.path.normpath(model)) + "-" + fmt)
    if not os.path.isdir(dst):
        convert_safetensors(model, dst, fmt)
    return dst, "none"
