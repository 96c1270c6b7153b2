"""A capable tier over HTTP: the OpenAI-compatible client backend (client), its connection (connection) and
its wire format (wire)."""
