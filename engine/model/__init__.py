"""The model: a packaged GGUF or Hugging Face directory built into an ONNX model directory (build,
hf_source, lm_head, manifest, presets, builder_shim) and run with ONNX Runtime (runtime)."""
