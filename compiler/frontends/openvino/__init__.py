"""OpenVINO IR (.xml + .bin) -> TOSA (``load.py`` ``load_openvino``)."""
