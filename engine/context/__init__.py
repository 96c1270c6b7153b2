"""Repository context: the workspace (workspace), what its sources read (sources), outlines of definitions
(definitions), the block that goes into the prompt (block), and the definitions jedi resolves for the names
near the cursor (resolved: which to ask and their stubs; jedi_source: asking jedi)."""
