"""A capable tier over HTTP: the OpenAI-compatible client backend (client) and its wire format (wire)."""
