// Inline completions: Flint's own provider asks textDocument/inlineCompletion (so it can keep the
// completion id, the variants and the latency), and reports what the user did with a suggestion:
// flint/didShow (shown, or cycled to), flint/didAccept (Tab), flint/didPartiallyAccept (a word or a line).
import * as vscode from 'vscode';
import { InlineCompletionRequest, LanguageClient } from 'vscode-languageclient/node';
import type * as proto from 'vscode-languageclient/node';
import { encodedLength, Stats } from './util';
import { Server } from './server';
import { Settings } from './settings';
import { StatusBar } from './status';

/** The command an accepted item runs (registered in extension.ts): reports flint/didAccept. */
export const ACCEPTED_CMD = 'flint._accepted';

/** A completion item's command argument, as the server wrote it. */
export interface ItemRef {
  id?: string;
  index?: number;
}

/** What the provider last handed to VS Code: used for cycling and partial-accept reports. */
interface Shown {
  uri: string;
  id: string | null;
  count: number;
  index: number;
  acceptedLength: number;
}

export class InlineCompletions {
  private shown: Shown | undefined;

  constructor(
    private readonly server: Server,
    private readonly settings: Settings,
    private readonly status: StatusBar,
    private readonly stats: Stats,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  async provide(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | null> {
    const client = this.server.running();
    if (!client || !this.settings.suggestsIn(document)) return null;
    const params = client.code2ProtocolConverter.asInlineCompletionParams(document, position, context);
    const t0 = performance.now();
    this.stats.requests++;
    let result: proto.InlineCompletionList | proto.InlineCompletionItem[] | null;
    try {
      result = await client.sendRequest(InlineCompletionRequest.type, params, token);
    } catch (err) {
      if (!token.isCancellationRequested) {
        this.stats.errors++;
        this.log.warn(`inlineCompletion failed: ${String(err)}`);
      }
      return null;
    }
    if (token.isCancellationRequested) return null;
    const raw = !result ? [] : Array.isArray(result) ? result : result.items;
    if (!raw.length) {
      this.stats.empty++;
      return null;
    }
    const rtt = performance.now() - t0;
    this.stats.addRtt(rtt);
    this.stats.suggestions++;
    const items = raw.map((it, i) => toItem(client, it, i));
    const first = (raw[0].command?.arguments?.[0] ?? {}) as ItemRef;
    this.shown = { uri: document.uri.toString(), id: first.id ?? null, count: items.length, index: 0, acceptedLength: 0 };
    this.status.roundTrip(rtt);
    if (first.id) client.sendNotification('flint/didShow', { id: first.id, index: 0 });
    return items;
  }

  /** Tab took a suggestion (ACCEPTED_CMD). */
  accepted(arg: ItemRef | undefined): void {
    this.stats.accepted++;
    if (arg?.id) this.server.notify('flint/didAccept', { id: arg.id, index: arg.index ?? 0 });
    this.shown = undefined;
  }

  /** Flint: Next / Previous Variant. */
  async cycle(delta: number): Promise<void> {
    await vscode.commands.executeCommand(
      delta > 0 ? 'editor.action.inlineSuggest.showNext' : 'editor.action.inlineSuggest.showPrevious',
    );
    const s = this.shown;
    if (s && s.count > 0) {
      s.index = (s.index + delta + s.count) % s.count;
      s.acceptedLength = 0;
      if (s.id) this.server.notify('flint/didShow', { id: s.id, index: s.index });
    }
  }

  /** Flint: Accept Next Word / Line of Suggestion. */
  async partialAccept(kind: 'word' | 'line'): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const s = this.shown;
    if (!editor) return;
    const doc = editor.document;
    const inserted = await insertedBy(
      doc,
      kind === 'word' ? 'editor.action.inlineSuggest.acceptNextWord' : 'editor.action.inlineSuggest.acceptNextLine',
    );
    if (!inserted || !s || !s.id || s.uri !== doc.uri.toString()) return;
    s.acceptedLength += encodedLength(inserted, this.server.positionEncoding);
    this.stats.partialAccepts++;
    this.server.notify('flint/didPartiallyAccept', {
      id: s.id,
      index: s.index,
      acceptedLength: s.acceptedLength,
    });
  }
}

/** One server item as VS Code's, its command reporting the acceptance with the server's id. */
function toItem(client: LanguageClient, it: proto.InlineCompletionItem, i: number): vscode.InlineCompletionItem {
  const arg = (it.command?.arguments?.[0] ?? {}) as ItemRef;
  const insert = typeof it.insertText === 'string' ? it.insertText : new vscode.SnippetString(it.insertText.value);
  const range = it.range ? client.protocol2CodeConverter.asRange(it.range) : undefined;
  const item = new vscode.InlineCompletionItem(insert, range, {
    title: 'Flint: accepted',
    command: ACCEPTED_CMD,
    arguments: [{ id: arg.id, index: arg.index ?? i }],
  });
  if (it.filterText) item.filterText = it.filterText;
  return item;
}

/** The text `command` inserts into `doc`. */
async function insertedBy(doc: vscode.TextDocument, command: string): Promise<string> {
  let inserted = '';
  const sub = vscode.workspace.onDidChangeTextDocument((e) => {
    if (e.document === doc) for (const c of e.contentChanges) inserted += c.text;
  });
  try {
    await vscode.commands.executeCommand(command);
    await new Promise((r) => setTimeout(r, 30)); // the document change event follows the command
  } finally {
    sub.dispose();
  }
  return inserted;
}
