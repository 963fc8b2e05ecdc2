#!/usr/bin/env python3
"""A ctpipe checkpoint read by numpy alone (tools/safetensors.py), and one written back.

Usage: checkpoint_numpy.py IN OUT. Reads IN, which tests/model/checkpoint.cpp wrote: checks its
tensors' names, dtypes and shapes against the model the test saved, and its metadata. Writes OUT:
the same tensors in reverse order, with every parameter ("layers.*") doubled, the optimizer's state
as it was, and the metadata's "ctpipe.data" set to "from numpy", with new checksums; the test loads
OUT back into ctpipe, which checks them. Also checks that numpy refuses a copy of IN with one byte
of a tensor flipped, and one without checksums unless asked. Exit 0 when all holds; a one-line
error and exit 1 when not.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import safetensors as st  # noqa: E402

# What the test's model (test::tied: dense 2 -> 2 twice, a third sharing layer 0's weights) and
# its optimizer (AdamW) save: layer 2 keeps only its bias, its weights are layer 0's.
EXPECTED = {}
for k, names in ((0, ("weight", "bias")), (1, ("weight", "bias")), (2, ("bias",))):
    for n in names:
        shape = [2, 2] if n == "weight" else [2]
        EXPECTED[f"layers.{k}.{n}"] = shape
        for s in ("exp_avg", "exp_avg_sq"):
            EXPECTED[f"optimizer.layers.{k}.{n}.{s}"] = shape


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tensors, meta = st.load(src)
    if set(tensors) != set(EXPECTED):
        raise SystemExit(f"checkpoint_numpy.py: tensors {sorted(tensors)} are not {sorted(EXPECTED)}")
    for name, shape in EXPECTED.items():
        a = tensors[name]
        if a.dtype.name != "float32" or list(a.shape) != shape:
            raise SystemExit(f"checkpoint_numpy.py: {name} is {a.dtype} {list(a.shape)}, not float32 {shape}")
    if meta.get("ctpipe.step") != "7" or meta.get("ctpipe.data") != "epoch 1" or meta.get("ctpipe.updates") != "2":
        raise SystemExit(f"checkpoint_numpy.py: unexpected metadata {meta}")
    if not (tensors["optimizer.layers.1.bias.exp_avg_sq"] > 0).all():
        raise SystemExit("checkpoint_numpy.py: Adam's second moment should be positive after two updates")
    out = {}
    for name in reversed(list(tensors)):
        out[name] = tensors[name] * 2 if name.startswith("layers.") else tensors[name]
    meta["ctpipe.data"] = "from numpy"
    st.save(dst, out, meta)
    # The checksums ctpipe wrote hold here, and a flipped byte breaks them.
    with open(src, "rb") as f:
        raw = bytearray(f.read())
    raw[-1] ^= 1
    with open(dst + ".damaged", "wb") as f:
        f.write(raw)
    try:
        st.load(dst + ".damaged")
        raise SystemExit("checkpoint_numpy.py: a flipped byte was not refused")
    except ValueError as e:
        if "is damaged" not in str(e):
            raise SystemExit(f"checkpoint_numpy.py: a flipped byte gave {e}")
    os.remove(dst + ".damaged")


if __name__ == "__main__":
    main()
