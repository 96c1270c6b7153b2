"""Flint engine: model building, ONNX Runtime inference, prompts, post-processing and caching.

Nothing in this package imports pygls or lsprotocol; the language server sits on top of it.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
