"""Repository context: the workspace (workspace), what its sources read (sources), and the block that
goes into the prompt (block)."""
