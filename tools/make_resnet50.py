"""Build ResNet-50 v1.5 (224x224x3, 1000 classes) as an int8 TOSA graph, weights synthetic.

The network (He et al. 2016, with the v1.5 change: a bottleneck's stride is on its 3x3
convolution, not its first 1x1) is written as a flat NNEF graph: a 7x7/2 stem with ReLU and a
3x3/2 max pool, 16 bottleneck blocks in 4 stages (3, 4, 6, 3 blocks; widths 64, 128, 256,
512, expansion 4; a 1x1 projection on the first block of each stage), global average pooling,
a 1x1 convolution as the fully connected layer and the softmax.  Batch normalisation is
taken as folded into the convolutions.  Seeded weights, the project's own calibration and
quantization, no download (tools/nnef_synth.py); the float softmax becomes the int8
softmax (compiler/graph/quantize/softmax.py), so the graph ends at class probabilities.

``--width-div N`` divides every channel count by N (same topology and spatial sizes): the
reduced model the tests use.

Usage: ``python tools/make_resnet50.py [--out build/resnet50] [--width-div 1] [--calib 4]``
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nnef_synth

SEED = 20240650
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))   # width, blocks, stride
EXPANSION = 4
RESIDUAL_GAIN = 0.2   # last convolution of each residual branch (see nnef_synth)


def make_net(width_div: int = 1, size: int = 224) -> nnef_synth.NnefText:
    """The ResNet-50 v1.5 graph with every channel count divided by ``width_div``."""
    def ch(c):
        return max(1, c // width_div)

    net = nnef_synth.NnefText("ResNet50", size)
    x = net.relu(net.conv("input", "conv1", ch(64), 7, 2))
    x = net.max_pool(x, "pool1")
    for s, (width, blocks, stride) in enumerate(STAGES, start=2):
        for b in range(blocks):
            name = f"res{s}{chr(ord('a') + b)}"
            st = stride if b == 0 else 1
            y = net.relu(net.conv(x, f"{name}_branch2a", ch(width), 1))
            y = net.relu(net.conv(y, f"{name}_branch2b", ch(width), 3, st))
            y = net.conv(y, f"{name}_branch2c", ch(width * EXPANSION), 1, gain=RESIDUAL_GAIN)
            short = net.conv(x, f"{name}_branch1", ch(width * EXPANSION), 1, st) if b == 0 else x
            x = net.relu(net.add(y, short, name))
    x = net.global_avg_pool(x, "pool5")
    net.softmax(net.conv(x, "fc1000", 1000, 1))
    return net


def build(out: Path, width_div: int = 1, size: int = 224, calib: int = 4, test: int = 1,
          seed: int = SEED, report: bool = True, log=print) -> dict:
    return nnef_synth.build(make_net(width_div, size), "resnet50", out, calib=calib, test=test,
                            seed=seed, report=report, log=log)


def main(argv=None) -> int:
    return nnef_synth.main("resnet50", make_net, __doc__, SEED, argv)


if __name__ == "__main__":
    sys.exit(main())
