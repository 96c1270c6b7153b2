"""Decoding, once the model is loaded: the tokenizer (tokenizer), the prompt layout and token healing (prompt),
the context block in tokens (layout), the fast paths (fast), sampling and prompt-lookup drafts (sampling,
drafts), and the decode loops once the prompt is in the KV cache: the greedy row (greedy) and the variant
batch (batch), with their LM-head picks (picks) and stop rules (stops). host: the engine as decoding sees
it."""
