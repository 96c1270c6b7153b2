"""The model: a packaged GGUF built into an ONNX model directory from the file's own blocks (build, gguf_build,
gguf_source, gguf_blocks, qwen2_graph, lm_head, manifest, presets) or a Hugging Face directory through the export
path (export, hf_source, builder_shim), run with ONNX Runtime (runtime), and its KV cache (kv_cache: the buffers
and what their rows hold)."""
