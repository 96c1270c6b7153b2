"""Repository context: the workspace (workspace), what its sources read (sources), outlines of definitions
(definitions), and the block that goes into the prompt (block)."""
