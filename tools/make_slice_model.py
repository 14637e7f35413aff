"""Build the foundation slice fixture: int8 CONV2D -> RESCALE -> CLAMP in TOSA 1.0 form.

Writes, into ``models/slice/`` (or the folder given):

* ``conv_rescale_clamp.tosa``: the graph, serialised by the official ``tosa_serializer``;
* ``input.npz``: a random input, keyed by the graph's input tensor name;
* ``expected.npz``: the official reference model's output, keyed by the output tensor name.

Everything is seeded and the .npz files carry fixed timestamps, so running the script
again reproduces the same bytes.  Needs tosa-tools (a test extra): this is a fixture
builder, not product code.

Usage: ``python tools/make_slice_model.py [OUT_DIR]``
"""
from __future__ import annotations

import io
import os
import sys
import zipfile
from pathlib import Path

import numpy as np

# The reference model attaches gdb to itself on a graph error unless told not to.
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")

import tosa_reference_model as trm  # noqa: E402
import tosa_serializer as ts  # noqa: E402

SEED = 20240611
TOSA_FILE = "conv_rescale_clamp.tosa"

IN_SHAPE = (1, 12, 11, 5)            # N, H, W, C
OUT_CHANNELS = 20
KERNEL = (3, 3)
PAD = [1, 1, 1, 1]                   # top, bottom, left, right
STRIDE = [1, 1]
DILATION = [1, 1]
INPUT_ZP = -3
WEIGHT_ZP = 0
OUTPUT_ZP = 5
CLAMP_MIN, CLAMP_MAX = -100, 110     # narrower than int8, so the clamp matters
OUT_SHAPE = (1, 12, 11, OUT_CHANNELS)  # 3x3, stride 1, pad 1 keeps H and W


def parameters(seed: int = SEED) -> dict[str, np.ndarray]:
    """The graph's constants and a test input, drawn from ``seed``.

    Multipliers are in [2^30, 2^31) and shifts in 38..40, so that scale = m / 2^shift maps
    the accumulators (about +-2*10^4) onto roughly the int8 range: some outputs saturate
    at the clamp bounds, most do not.
    """
    rng = np.random.default_rng(seed)
    return {
        # Trained int8 weights are roughly normal, using the full range only in the tails.
        "weights": np.clip(np.round(rng.normal(0, 32, (OUT_CHANNELS, *KERNEL, IN_SHAPE[3]))),
                           -127, 127).astype(np.int8),
        "bias": rng.integers(-3000, 3001, OUT_CHANNELS, dtype=np.int32),
        "multiplier": rng.integers(1 << 30, 1 << 31, OUT_CHANNELS, dtype=np.int64).astype(np.int32),
        "shift": rng.integers(38, 41, OUT_CHANNELS, dtype=np.int8),
        "input": rng.integers(-128, 128, IN_SHAPE, dtype=np.int8),
    }


def build(params: dict[str, np.ndarray]) -> bytes:
    """Serialise the slice graph (TOSA 1.0, non-draft) with the official serializer."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    block = ser.currRegion.currBasicBlock
    block.addTensor("input", list(IN_SHAPE), ts.DType.INT8)
    block.addInput("input")

    def const(name, dtype, values):
        values = np.asarray(values)
        ser.addConst(list(values.shape), dtype, values, name=name)
        return name

    conv_in = ["input",
               const("conv_weights", ts.DType.INT8, params["weights"]),
               const("conv_bias", ts.DType.INT32, params["bias"]),
               const("conv_input_zp", ts.DType.INT8, np.array([INPUT_ZP], np.int8)),
               const("conv_weight_zp", ts.DType.INT8, np.array([WEIGHT_ZP], np.int8))]
    block.addTensor("conv_acc", list(OUT_SHAPE), ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.Conv2dAttribute(PAD, STRIDE, DILATION, False, ts.DType.INT32)
    ser.addOperator(ts.Op.CONV2D, conv_in, ["conv_acc"], attr)

    rescale_in = ["conv_acc",
                  const("rescale_multiplier", ts.DType.INT32, params["multiplier"]),
                  const("rescale_shift", ts.DType.INT8, params["shift"]),
                  const("rescale_input_zp", ts.DType.INT32, np.array([0], np.int32)),
                  const("rescale_output_zp", ts.DType.INT8, np.array([OUTPUT_ZP], np.int8))]
    block.addTensor("rescaled", list(OUT_SHAPE), ts.DType.INT8)
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(True, ts.RoundingMode.SINGLE_ROUND, True, False, False)
    ser.addOperator(ts.Op.RESCALE, rescale_in, ["rescaled"], attr)

    block.addTensor("output", list(OUT_SHAPE), ts.DType.INT8)
    block.addOutput("output")
    attr = ts.TosaSerializerAttribute()
    # CLAMP bounds are stored as little-endian bytes of the input type, padded to 8 bytes.
    attr.ClampAttribute(list(np.int8(CLAMP_MIN).tobytes()) + [0] * 7,
                        list(np.int8(CLAMP_MAX).tobytes()) + [0] * 7,
                        ts.NanPropagationMode.PROPAGATE)
    ser.addOperator(ts.Op.CLAMP, ["rescaled"], ["output"], attr)
    return bytes(ser.serialize())


def reference_output(tosa: bytes, x: np.ndarray) -> np.ndarray:
    """Run the official reference model; the graph must be valid."""
    outputs, status = trm.run(tosa, [x])
    if status != trm.GraphStatus.TOSA_VALID:
        raise RuntimeError(f"reference model returned {status}")
    return np.asarray(outputs[0])


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` with fixed zip timestamps, so the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, array in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(array), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)),
                        buf.getvalue())


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "models" / "slice"
    out_dir.mkdir(parents=True, exist_ok=True)
    params = parameters()
    tosa = build(params)
    expected = reference_output(tosa, params["input"])
    (out_dir / TOSA_FILE).write_bytes(tosa)
    save_npz(out_dir / "input.npz", {"input": params["input"]})
    save_npz(out_dir / "expected.npz", {"output": expected})
    at_min = int(np.sum(expected == CLAMP_MIN))
    at_max = int(np.sum(expected == CLAMP_MAX))
    print(f"wrote {out_dir}: {len(tosa)} bytes of TOSA, output {expected.shape} {expected.dtype}, "
          f"{at_min} at clamp min, {at_max} at clamp max of {expected.size}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
