"""Decoding: the prompt layout and token healing (prompt), sampling and prompt-lookup drafts (sampling),
and the decode loop once the prompt is in the KV cache (decode)."""
