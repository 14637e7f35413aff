"""What the frontends share: the layout-aware graph builder, handler registries, graph clean-ups,
pooling/convolution window helpers, the TOSA builder and TFLite's int8 softmax and fixed-point
arithmetic (the Circle lowering's, also appended by the quantizing frontends), quantization
grids of a float graph before quantization."""
