"""The model: a packaged GGUF or Hugging Face directory built into an ONNX model directory (build, export,
hf_source, lm_head, manifest, presets, builder_shim), run with ONNX Runtime (runtime), and its KV cache
(kv_cache: the buffers and what their rows hold)."""
