"""Next edits in the server (issue 37): after an edit, the change that follows somewhere else, computed in
idle time and answered on ``flint/nextEdit`` (docs/protocol.md, docs/next_edits.md). Its own package, not
part of lsp_server/completion/: it shares neither the model worker, the store nor the planner with the
completions at the cursor (exact next edits need no model), only the documents and their edit history.
No LSP types here either: lsp_server/protocol/handlers.py adapts."""
