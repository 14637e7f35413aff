"""What the frontends share: the layout-aware graph builder, handler registries, graph clean-ups,
pooling/convolution window helpers."""
