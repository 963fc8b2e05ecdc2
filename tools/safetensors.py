#!/usr/bin/env python3
"""Reads and writes safetensors files with numpy alone: ctpipe's checkpoints, or any other.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
little-endian bytes end to end. The JSON maps each tensor's name to its dtype, shape and
[begin, end) in that buffer, and "__metadata__" to a map of strings.

    import safetensors as st                       # (this file; put tools/ on sys.path)
    tensors, metadata = st.load("run.safetensors")  # {"layers.0.weight": ndarray, ...}, {"ctpipe.step": "10", ...}
    st.save("out.safetensors", tensors, metadata)

Checksums: ctpipe writes in the metadata the CRC-32 (zlib's) of each tensor's bytes,
"ctpipe.crc32.<name>", and of the file's first 8 + N bytes with that value's own 8 hex digits read
as "00000000", "ctpipe.header_crc32"; each is 8 lowercase hex digits. `save` writes them (dropping
stale ones from the metadata it is given), and `load` checks them: a file without them raises
ValueError unless `checksums="optional"` (a file that has them is checked all the same).

From the command line, `python3 tools/safetensors.py FILE` lists a file's tensors and metadata
(after checking its checksums; `--optional` accepts a file without them).
A ctpipe checkpoint names its tensors "layers.<K>.<name>" (layer K of the model) and
"optimizer.layers.<K>.<name>.<state>"; docs/optimizers.md says what each holds. PyTorch's
`torch.from_numpy(tensors[name])` turns one into a tensor of a module's parameter.
"""
import json
import re
import struct
import sys
import zlib

import numpy as np

DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
    "U8": np.uint8, "BOOL": np.bool_,
}
NAMES = {np.dtype(v).newbyteorder("<"): k for k, v in DTYPES.items()}


HEADER_KEY = "ctpipe.header_crc32"
TENSOR_KEY = "ctpipe.crc32."
_HEADER_SUM = re.compile(rb'"ctpipe\.header_crc32"[ \t\r\n]*:[ \t\r\n]*"([0-9a-f]{8})"')


def _header_sum(length_and_header, digits_at):
    """The CRC-32 of the file's first 8 + N bytes, the header checksum's digits read as 0s."""
    blanked = length_and_header[:digits_at] + b"00000000" + length_and_header[digits_at + 8:]
    return zlib.crc32(blanked) & 0xFFFFFFFF


def load(path, checksums="required"):
    """Returns ({name: ndarray}, {name: str}) from the safetensors file at `path`, its checksums
    checked (checksums="optional": a file without them loads unchecked)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: its header length ({n}) does not fit in the file ({len(raw)} bytes)")
    found = list(_HEADER_SUM.finditer(raw[8:8 + n]))
    checked = len(found) == 1
    if checked:
        stored = int(found[0].group(1), 16)
        if _header_sum(raw[:8 + n], 8 + found[0].start(1)) != stored:
            raise ValueError(f"{path}: its header is damaged (its checksum does not hold)")
    elif HEADER_KEY.encode() in raw[8:8 + n]:
        raise ValueError(f"{path}: its header is damaged ({HEADER_KEY} is not one value of 8 hex digits)")
    elif checksums != "optional":
        raise ValueError(f"{path}: it has no checksums ({HEADER_KEY}); load it with checksums=\"optional\"")
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
        want = metadata.get(TENSOR_KEY + name)
        if want is not None or (checked and checksums != "optional"):
            if want is None or not re.fullmatch("[0-9a-f]{8}", want):
                raise ValueError(f"{path}: tensor {name} has no checksum ({TENSOR_KEY}{name})")
            if zlib.crc32(data[begin:end]) & 0xFFFFFFFF != int(want, 16):
                raise ValueError(f"{path}: tensor {name} is damaged (its checksum does not hold)")
        dt = np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(e["shape"]).copy()
    return tensors, metadata


def save(path, tensors, metadata=None):
    """Writes {name: ndarray} (and {name: str}) to `path` as safetensors, in the order given, with
    ctpipe's checksums."""
    header, chunks, at = {}, [], 0
    meta = {str(k): str(v) for k, v in (metadata or {}).items()
            if not (str(k).startswith(TENSOR_KEY) or str(k) == HEADER_KEY)}
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        b = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        meta[TENSOR_KEY + name] = f"{zlib.crc32(b) & 0xFFFFFFFF:08x}"
        chunks.append(b)
        at += len(b)
    meta[HEADER_KEY] = "00000000"
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    head = struct.pack("<Q", len(text)) + text
    digits = 8 + _HEADER_SUM.search(text).start(1)
    head = head[:digits] + f"{_header_sum(head, digits):08x}".encode() + head[digits + 8:]
    with open(path, "wb") as f:
        f.write(head)
        for b in chunks:
            f.write(b)


if __name__ == "__main__":
    args = sys.argv[1:]
    mode = "required"
    if args and args[0] == "--optional":
        mode, args = "optional", args[1:]
    if len(args) != 1:
        print("usage: safetensors.py [--optional] FILE", file=sys.stderr)
        sys.exit(2)
    try:
        t, m = load(args[0], mode)
    except (OSError, ValueError, KeyError) as e:
        print(f"safetensors.py: {e}", file=sys.stderr)
        sys.exit(2)
    for name, a in t.items():
        print(f"{name} {a.dtype} {list(a.shape)}")
    for k, v in sorted(m.items()):
        print(f"{k} = {v}")
