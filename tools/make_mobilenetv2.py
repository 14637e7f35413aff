"""Build MobileNetV2 1.0 (224x224x3, 1000 classes, softmax head) as an int8 TOSA graph,
weights synthetic.

The network (Sandler et al. 2018, width multiplier 1.0) is written as a flat NNEF graph: a
3x3/2 stem to 32 channels with ReLU6, 17 inverted-residual blocks (expansion 1x1 with
ReLU6, depthwise 3x3 with ReLU6 as NNEF ``conv`` with ``groups = 0``, linear 1x1
projection; a residual addition where stride is 1 and the channel count is kept), a 1x1
convolution to 1280 channels with ReLU6, global average pooling, a 1x1 convolution as the
classifier and the softmax.  Batch normalisation is taken as folded into the convolutions.
Seeded weights, the project's own calibration and quantization, no download
(tools/nnef_synth.py); the float softmax becomes the int8 softmax
(compiler/graph/quantize/softmax.py), so the graph ends at class probabilities.

``--width-div N`` divides every channel count by N (same topology and spatial sizes): the
reduced model the tests use.

Usage: ``python tools/make_mobilenetv2.py [--out build/mobilenetv2] [--width-div 1]``
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nnef_synth

SEED = 20240651
# (expansion t, output channels c, repeats n, first stride s): the paper's Table 2.
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1))
RESIDUAL_GAIN = 0.3   # projection of blocks with a residual addition (see nnef_synth)


def make_net(width_div: int = 1, size: int = 224) -> nnef_synth.NnefText:
    """The MobileNetV2 1.0 graph with every channel count divided by ``width_div``."""
    def ch(c):
        return max(1, c // width_div)

    net = nnef_synth.NnefText("MobileNetV2", size)
    x = net.relu6(net.conv("input", "conv1", ch(32), 3, 2))
    index = 0
    for t, c, n, s in BLOCKS:
        for i in range(n):
            index += 1
            name = f"block{index}"
            in_c = net.shape[x][0]
            st = s if i == 0 else 1
            residual = st == 1 and in_c == ch(c)
            y = x
            if t != 1:
                y = net.relu6(net.conv(y, f"{name}_expand", in_c * t, 1))
            y = net.relu6(net.conv(y, f"{name}_dw", net.shape[y][0], 3, st, groups=0))
            y = net.conv(y, f"{name}_project", ch(c), 1, gain=RESIDUAL_GAIN if residual else 1.0)
            x = net.add(y, x, f"{name}_add") if residual else y
    x = net.relu6(net.conv(x, "conv_last", ch(1280), 1))
    x = net.global_avg_pool(x, "pool")
    net.softmax(net.conv(x, "logits", 1000, 1))
    return net


def build(out: Path, width_div: int = 1, size: int = 224, calib: int = 4, test: int = 1,
          seed: int = SEED, report: bool = True, log=print) -> dict:
    return nnef_synth.build(make_net(width_div, size), "mobilenetv2", out, calib=calib,
                            test=test, seed=seed, report=report, log=log)


def main(argv=None) -> int:
    return nnef_synth.main("mobilenetv2", make_net, __doc__, SEED, argv)


if __name__ == "__main__":
    sys.exit(main())
