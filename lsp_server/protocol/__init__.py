"""The LSP side: JSON-RPC reading and answering (jsonrpc: FlintProtocol) and the pygls handlers
(handlers). Everything below it works in offsets and plain data."""
