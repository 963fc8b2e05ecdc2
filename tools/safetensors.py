#!/usr/bin/env python3
"""Reads and writes safetensors files with numpy alone: ctpipe's checkpoints, or any other.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
little-endian bytes end to end. The JSON maps each tensor's name to its dtype, shape and
[begin, end) in that buffer, and "__metadata__" to a map of strings.

    import safetensors as st                       # (this file; put tools/ on sys.path)
    tensors, metadata = st.load("run.safetensors")  # {"layers.0.weight": ndarray, ...}, {"ctpipe.step": "10", ...}
    st.save("out.safetensors", tensors, metadata)

From the command line, `python3 tools/safetensors.py FILE` lists a file's tensors and metadata.
A ctpipe checkpoint names its tensors "layers.<K>.<name>" (layer K of the model) and
"optimizer.layers.<K>.<name>.<state>"; docs/optimizers.md says what each holds. PyTorch's
`torch.from_numpy(tensors[name])` turns one into a tensor of a module's parameter.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
    "U8": np.uint8, "BOOL": np.bool_,
}
NAMES = {np.dtype(v).newbyteorder("<"): k for k, v in DTYPES.items()}


def load(path):
    """Returns ({name: ndarray}, {name: str}) from the safetensors file at `path`."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: its header length ({n}) does not fit in the file ({len(raw)} bytes)")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {e['dtype']} is not one this reader knows")
        begin, end = e["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name}: data_offsets [{begin}, {end}] outside the file")
        dt = np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(e["shape"]).copy()
    return tensors, metadata


def save(path, tensors, metadata=None):
    """Writes {name: ndarray} (and {name: str}) to `path` as safetensors, in the order given."""
    header, chunks, at = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        b = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        chunks.append(b)
        at += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in chunks:
            f.write(b)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: safetensors.py FILE", file=sys.stderr)
        sys.exit(2)
    try:
        t, m = load(sys.argv[1])
    except (OSError, ValueError, KeyError) as e:
        print(f"safetensors.py: {e}", file=sys.stderr)
        sys.exit(2)
    for name, a in t.items():
        print(f"{name} {a.dtype} {list(a.shape)}")
    for k, v in sorted(m.items()):
        print(f"{k} = {v}")
