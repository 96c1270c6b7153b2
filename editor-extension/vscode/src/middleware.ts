// What vscode-languageclient does on Flint's behalf, adjusted: documents Flint is off in never reach
// the server, the generic completion providers stay off (completions.ts asks for inline completions
// itself), and the server's workspace/configuration request is answered with the settings it gets.
import type { Middleware } from 'vscode-languageclient/node';
import { Settings } from './settings';

export function middleware(settings: Settings): Middleware {
  return {
    // Disabled languages and excluded files: their text never reaches the server.
    didOpen: (doc, next) => (settings.wanted(doc) ? next(doc) : Promise.resolve()),
    didChange: (e, next) => (settings.wanted(e.document) ? next(e) : Promise.resolve()),
    didSave: (doc, next) => (settings.wanted(doc) ? next(doc) : Promise.resolve()),
    didClose: (doc, next) => (settings.wanted(doc) ? next(doc) : Promise.resolve()),
    // Flint's own provider (completions.ts) issues textDocument/inlineCompletion so it can track ids,
    // variants and latency; the generic one from vscode-languageclient is switched off here.
    provideInlineCompletionItems: () => null,
    // textDocument/completion is Flint's fallback for editors without inline completion: VS Code has it.
    provideCompletionItem: () => null,
    workspace: {
      configuration: (params, token, next) => {
        if (params.items.some((i) => i.section === 'flint')) {
          return params.items.map((i) => (i.section === 'flint' ? settings.forServer() : null));
        }
        return next(params, token);
      },
    },
  };
}
