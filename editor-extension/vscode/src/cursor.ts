// Cursor reports: tell the server where the cursor settled after a move that was not an edit (a file
// opened or focused, a click, a jump) with flint/didMoveCursor, so it starts that spot's work before the
// first keystroke there (docs/protocol.md). Typing moves the cursor too; the server ignores a spot its
// edits already told it about.
import * as vscode from 'vscode';
import { Server } from './server';
import { SCHEMES, Settings } from './settings';

// the cursor settled this long after a move: tell the server so it starts that spot
const CURSOR_SETTLE_MS = 100;

export class CursorReports implements vscode.Disposable {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private last = ''; // the spot last reported

  constructor(
    private readonly server: Server,
    private readonly settings: Settings,
  ) {}

  /** A new server: report where the user is as it starts, even the spot the last one was told. */
  restart(): void {
    this.last = '';
    this.moved(vscode.window.activeTextEditor);
  }

  /** The cursor moved in `ed` (or the active editor changed): report it once it settles. */
  moved(ed: vscode.TextEditor | undefined): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (!ed || !SCHEMES.includes(ed.document.uri.scheme)) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.report(ed);
    }, CURSOR_SETTLE_MS);
  }

  private report(ed: vscode.TextEditor): void {
    const client = this.server.running();
    const doc = ed.document;
    if (!client || vscode.window.activeTextEditor !== ed || !ed.selection.isEmpty || doc.isClosed) return;
    if (!this.settings.suggestsIn(doc)) return;
    const pos = ed.selection.active;
    const key = `${doc.uri.toString()}@${doc.version}:${pos.line}:${pos.character}`;
    if (key === this.last) return;
    this.last = key;
    void client.sendNotification('flint/didMoveCursor', {
      textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri), version: doc.version },
      position: client.code2ProtocolConverter.asPosition(pos),
    });
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}
