// Next edits (issue 37, docs/protocol.md `flint/nextEdit`): after the user stops editing, ask the server
// for the edit that follows elsewhere (the other references of a renamed name, the other occurrences of a
// replaced literal) and show the first at its place: the old text struck through, the new text after it,
// a gutter mark. Tab jumps there, Tab again applies it (and the next one is asked for at once), Escape
// dismisses. Any edit drops what is shown; an edit is applied only to the document version it was made
// for. The inline suggestion at the cursor wins: Tab is ours only when none is visible.
// Other documents (the answer's `elsewhere`: a rename's references, a changed function's call sites, in
// other files, open or only on disk): when nothing is left here, the status bar names the file, Tab opens it
// at the edit (shown there) and Tab again applies it; the server then answers for that document, so its own
// next one follows. A jump target there, or anything in a file that was not open, is shown by asking the
// server in that document once it is open (the model's argument comes with the jump then).
// Jump targets (the answer's `jumps`: where a call needs the argument of a parameter added without a
// default): when no edit is offered, the first is marked at its place with the parameter's name; Tab moves
// the cursor there. When the server sends the model's argument (`newText`), it is shown there as ghost
// text, and Tab at the target writes it (Escape dismisses). Edits spanning lines are shown and applied whole.
// An answer that says `pending` (other documents still searched, or the model still writing the first jump
// target's argument) is asked for again, a little later each time for up to 4 s, while the document, the
// cursor and the editor stay as they were: what it finds is shown as any answer is when nothing is shown
// yet; what is shown stays as it is, except that a jump target shown alone gets its argument when it comes
// (and Tab to such a target asks there again, so an argument written later is shown at it).
import * as vscode from 'vscode';
import type * as proto from 'vscode-languageclient/node';
import { Server } from './server';
import { SCHEMES, Settings } from './settings';

export const NEXT_EDIT_METHOD = 'flint/nextEdit';
export const TAB_CMD = 'flint.nextEdit.tab';
export const DISMISS_CMD = 'flint.nextEdit.dismiss';
const CONTEXT_KEY = 'flint.nextEditPending';
// ask this long after the last keystroke (the server has computed it by then: it starts at 150 ms)
const PAUSE_MS = 200;
// while an answer is pending, ask again after 120 ms, each wait half as long again (at most 400 ms), until
// 4 s after the first such answer: the server has searched the workspace's files on disk and the model has
// written a jump target's argument by then (its budget: lsp_server/nextedit/fills.py FILL_BUDGET_S)
const AGAIN_MS = 120;
const AGAIN_MAX_MS = 400;
const AGAIN_FOR_MS = 4000;
const GUTTER_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><path d="M3 3l6 5-6 5z" fill="#3794ff"/>' +
  '<rect x="10" y="3" width="3" height="10" fill="#3794ff"/></svg>';

interface WireEdit {
  range: proto.Range;
  newText: string;
  oldText: string;
  source: string;
  confidence: number;
}

/** An edit in another document, or (with `note`, no text) a jump target there; `version` null: a file that
 * was not open (its text on disk). Those two are not applied from here: the document is opened at the
 * place and the server asked there. */
interface WireElsewhere {
  uri: string;
  version: number | null;
  range: proto.Range;
  newText?: string;
  oldText?: string;
  note?: string;
  source: string;
  confidence?: number;
}

/** A jump target: a place that needs an edit; `newText` (optional): the model's text for it. */
interface WireJump {
  range: proto.Range;
  source: string;
  note: string;
  newText?: string;
  confidence?: number;
}

interface WireResult {
  version: number;
  edits: WireEdit[];
  jumps?: WireJump[];
  readyMs?: number;
  stale?: boolean;
  elsewhere?: WireElsewhere[];
  pending?: boolean;
  completeMs?: number;
}

/** A pending answer's re-ask: since when, and its last wait. */
interface Again {
  t0: number;
  delay: number;
}

/** An edit in another document, offered from the status bar until Tab opens it. */
interface Away {
  uri: vscode.Uri;
  edit: WireElsewhere;
}

interface Pending {
  editor: vscode.TextEditor;
  version: number;
  range: vscode.Range;
  newText: string;
  source: string;
  jumped: boolean;
  /** a jump target: `note` says what goes there; with no `newText` Tab only moves the cursor */
  jump?: { note: string };
}

export class NextEdits implements vscode.Disposable {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private again: ReturnType<typeof setTimeout> | undefined; // the one re-ask while an answer is pending
  private pending: Pending | undefined;
  private away: Away | undefined;
  private readonly status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 99);
  private asked = 0; // the latest ask: an older answer is dropped
  private applying = false;
  private readonly removed = vscode.window.createTextEditorDecorationType({
    textDecoration: 'line-through',
    backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
    gutterIconPath: vscode.Uri.parse(`data:image/svg+xml;base64,${Buffer.from(GUTTER_SVG).toString('base64')}`),
    gutterIconSize: 'contain',
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.modifiedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Center,
  });
  // a jump target: the parameter's name dimmed, or the model's argument as ghost text, at its place
  private readonly target = vscode.window.createTextEditorDecorationType({
    gutterIconPath: vscode.Uri.parse(`data:image/svg+xml;base64,${Buffer.from(GUTTER_SVG).toString('base64')}`),
    gutterIconSize: 'contain',
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.modifiedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Center,
  });
  private readonly subs: vscode.Disposable[];

  constructor(
    private readonly server: Server,
    private readonly settings: Settings,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.subs = [
      vscode.commands.registerCommand(TAB_CMD, () => this.tab()),
      vscode.commands.registerCommand(DISMISS_CMD, () => this.clear()),
      vscode.workspace.onDidChangeTextDocument((e) => this.changed(e)),
      // (a jump to another document makes that editor the pending edit's: it stays)
      vscode.window.onDidChangeActiveTextEditor((e) => { if (!e || e !== this.pending?.editor) this.clear(); }),
    ];
  }

  /** An edit anywhere: what is shown is gone; in the active editor, ask again once the user pauses. */
  private changed(e: vscode.TextDocumentChangeEvent): void {
    if (e.contentChanges.length === 0) return;
    const ed = vscode.window.activeTextEditor;
    if (this.pending?.editor.document === e.document || ed?.document === e.document) this.clear();
    if (!ed || ed.document !== e.document || !SCHEMES.includes(e.document.uri.scheme)) return;
    const delay = this.applying ? 0 : PAUSE_MS;
    this.applying = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.ask(ed);
    }, delay);
  }

  /** Ask for `ed`'s next edit and show it; false when the request failed (the document not open yet).
   * `again`: a re-ask of a pending answer (what is shown then stays as it is). */
  private async ask(ed: vscode.TextEditor, again?: Again): Promise<boolean> {
    const client = this.server.running();
    const doc = ed.document;
    if (!client || doc.isClosed || !this.settings.suggestsIn(doc)) return true; // (enabled, not snoozed, wanted)
    const seq = ++this.asked;
    const version = doc.version;
    const cursor = ed.selection.active;
    let res: WireResult | null;
    try {
      res = await client.sendRequest<WireResult | null>(NEXT_EDIT_METHOD, {
        textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri), version },
        position: client.code2ProtocolConverter.asPosition(cursor),
      });
    } catch (err) {
      this.log.warn(`${NEXT_EDIT_METHOD} failed: ${String(err)}`);
      return false;
    }
    if (seq !== this.asked || !res || res.stale || doc.version !== version || res.version !== version) return true;
    if (vscode.window.activeTextEditor !== ed) return true;
    if (res.pending && res.completeMs === undefined) this.askAgain(ed, version, cursor, again);
    if (again && (this.pending || this.away)) {
      // something is shown: it stays, except that a jump target shown alone gets the model's argument
      // once it is written; a newer first edit in the same other file is what Tab opens
      const p = this.pending;
      const j = res.edits.length === 0 ? res.jumps?.[0] : undefined;
      if (p?.jump && !p.newText && j?.newText && p.editor === ed && p.version === version &&
          client.protocol2CodeConverter.asRange(j.range).start.isEqual(p.range.start)) {
        this.show({ ...p, newText: j.newText });
        this.log.info(`next edit: the argument for ${p.jump.note}: ${JSON.stringify(j.newText)} (p ${j.confidence ?? '?'})`);
        return true;
      }
      const other = res.elsewhere?.[0];
      if (!this.pending && other && this.away?.uri.toString() === client.protocol2CodeConverter.asUri(other.uri).toString()) {
        this.away = { uri: this.away.uri, edit: other };
      }
      return true;
    }
    const first = res.edits[0];
    const jump = res.jumps?.[0];
    if (!first && jump) {
      const at = client.protocol2CodeConverter.asRange(jump.range);
      this.show({ editor: ed, version, range: new vscode.Range(at.start, at.start), newText: jump.newText ?? '',
        source: jump.source, jumped: false, jump: { note: jump.note } });
      this.log.info(`next edit: jump target (${jump.source}) line ${at.start.line + 1} for ${jump.note}` +
        (jump.newText ? ` with ${JSON.stringify(jump.newText)} (p ${jump.confidence ?? '?'})` : ''));
      return true;
    }
    if (!first) {
      const other = res.elsewhere?.[0];
      if (other) this.offerAway({ uri: client.protocol2CodeConverter.asUri(other.uri), edit: other });
      return true;
    }
    const range = client.protocol2CodeConverter.asRange(first.range);
    if (doc.getText(range) !== first.oldText) return true; // not the text it was made for: never guess
    this.show({ editor: ed, version, range, newText: first.newText, source: first.source, jumped: false });
    this.log.info(`next edit (${first.source}, ready ${res.readyMs ?? '?'} ms after the edit): ` +
      `line ${range.start.line + 1} ${JSON.stringify(first.oldText)} -> ${JSON.stringify(first.newText)}`);
    return true;
  }

  /** Ask `ed` again a little later (`AGAIN_*`), once, while its text, its cursor and the ask are the
   * pending answer's: an edit, a move, Escape or a newer ask ends it. */
  private askAgain(ed: vscode.TextEditor, version: number, cursor: vscode.Position, last?: Again): void {
    const t0 = last?.t0 ?? Date.now();
    const delay = last ? Math.min(Math.round(last.delay * 1.5), AGAIN_MAX_MS) : AGAIN_MS;
    if (Date.now() + delay - t0 > AGAIN_FOR_MS) return;
    this.stopAgain();
    const seq = this.asked;
    this.again = setTimeout(() => {
      this.again = undefined;
      if (seq !== this.asked || ed.document.isClosed || ed.document.version !== version ||
          vscode.window.activeTextEditor !== ed || !ed.selection.active.isEqual(cursor)) return;
      void this.ask(ed, { t0, delay });
    }, delay);
  }

  private stopAgain(): void {
    if (this.again) clearTimeout(this.again);
    this.again = undefined;
  }

  private show(p: Pending): void {
    this.pending = p;
    if (p.jump) {
      const hover = new vscode.MarkdownString(`**Flint next edit** (${p.source}): ${p.jump.note} goes here; ` +
        (p.newText ? 'Tab to jump, Tab again to write it, Escape to dismiss' : 'Tab to jump there, Escape to dismiss'));
      p.editor.setDecorations(this.target, [{
        range: p.range,
        hoverMessage: hover,
        renderOptions: {
          after: p.newText
            ? { contentText: p.newText, color: new vscode.ThemeColor('editorGhostText.foreground'), fontStyle: 'italic' }
            : { contentText: `‸${p.jump.note}`, color: new vscode.ThemeColor('editorCodeLens.foreground'),
                fontStyle: 'italic', margin: '0 0 0 1px' },
        },
      }]);
      void vscode.commands.executeCommand('setContext', CONTEXT_KEY, true);
      return;
    }
    const hover = new vscode.MarkdownString(`**Flint next edit** (${p.source}): Tab to jump, Tab again to apply, Escape to dismiss`);
    p.editor.setDecorations(this.removed, [{
      range: p.range,
      hoverMessage: hover,
      renderOptions: {
        after: {
          contentText: p.newText,
          color: new vscode.ThemeColor('editor.foreground'),
          backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
          margin: '0 0 0 2px',
        },
      },
    }]);
    void vscode.commands.executeCommand('setContext', CONTEXT_KEY, true);
  }

  /** Nothing left here, something in another document: the status bar says where, Tab goes there. */
  private offerAway(a: Away): void {
    this.away = a;
    const name = a.uri.path.split('/').pop() ?? a.uri.toString();
    this.status.text = `$(arrow-right) Next edit: ${name} (Tab)`;
    this.status.tooltip = `${a.edit.source}: line ${a.edit.range.start.line + 1} ` + (a.edit.note !== undefined
      ? `${a.edit.note} goes here` : `${JSON.stringify(a.edit.oldText)} -> ${JSON.stringify(a.edit.newText)}`) +
      '; Tab to open it, Escape to dismiss';
    this.status.command = TAB_CMD;
    this.status.show();
    void vscode.commands.executeCommand('setContext', CONTEXT_KEY, true);
    this.log.info(`next edit elsewhere (${a.edit.source}): ${a.uri.toString()} line ${a.edit.range.start.line + 1}`);
  }

  /** Tab with an edit in another document: open it there, at the edit, shown (Tab again applies it). */
  private async jumpAway(a: Away): Promise<void> {
    this.clear();
    const client = this.server.running();
    if (!client) return;
    let doc: vscode.TextDocument;
    try {
      doc = await vscode.workspace.openTextDocument(a.uri);
    } catch (err) {
      this.log.warn(`next edit: cannot open ${a.uri.toString()}: ${String(err)}`);
      return;
    }
    const range = client.protocol2CodeConverter.asRange(a.edit.range);
    if (a.edit.note !== undefined || a.edit.version === null) {
      // a jump target, or a file that was not open: open it at the place and ask the server there (it
      // matches the opened text against what it found, and writes the argument at a jump target)
      const at = new vscode.Range(range.start, range.start);
      const ed = await vscode.window.showTextDocument(doc, { preview: false, selection: at });
      if (!ed.selection.isEqual(at)) ed.selection = new vscode.Selection(range.start, range.start);
      ed.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      for (let i = 0; i < 5 && !(await this.ask(ed)); i++) {
        await new Promise((r) => setTimeout(r, 200)); // (its didOpen may not have reached the server yet)
      }
      return;
    }
    // not the text it was made for (changed since): never guess
    if (doc.version !== a.edit.version || doc.getText(range) !== a.edit.oldText) return;
    // The cursor goes in with the open: set afterwards, the editor's restored view state (the cursor where
    // the user left this file) can land after it and win.
    const at = new vscode.Range(range.start, range.start);
    const ed = await vscode.window.showTextDocument(doc, { preview: false, selection: at });
    if (ed.document.version !== a.edit.version) return;
    if (!ed.selection.isEqual(at)) ed.selection = new vscode.Selection(range.start, range.start);
    ed.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.show({ editor: ed, version: a.edit.version, range, newText: a.edit.newText ?? '', source: a.edit.source,
      jumped: true });
  }

  /** Tab: jump to the pending edit; at it, apply it (then ask for the next at once). */
  private async tab(): Promise<void> {
    const p = this.pending;
    if (!p) {
      if (this.away) await this.jumpAway(this.away);
      return;
    }
    const ed = p.editor;
    if (ed.document.version !== p.version || ed.document.isClosed) {
      this.clear();
      return;
    }
    const at = ed.selection.active;
    if (!p.jumped && !(at.line === p.range.start.line && p.range.start.character <= at.character &&
        (at.character <= p.range.end.character || p.range.end.line > at.line))) {
      p.jumped = true;
      ed.selection = new vscode.Selection(p.range.start, p.range.start);
      ed.revealRange(p.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      if (p.jump && !p.newText) {
        // no argument yet: ask at the target (the model's, once written, is shown there; else the user writes)
        this.clear();
        void this.ask(ed);
      }
      return;
    }
    this.clear();
    if (p.jump && !p.newText) return;
    this.applying = true;
    const ok = await ed.edit((b) => b.replace(p.range, p.newText));
    if (!ok) {
      this.applying = false;
      return;
    }
    const end = ed.document.positionAt(ed.document.offsetAt(p.range.start) + p.newText.length);
    ed.selection = new vscode.Selection(end, end);
  }

  clear(): void {
    if (this.pending) {
      this.pending.editor.setDecorations(this.removed, []);
      this.pending.editor.setDecorations(this.target, []);
    }
    this.pending = undefined;
    this.away = undefined;
    this.status.hide();
    this.stopAgain();
    this.asked++; // an answer on its way is not shown
    void vscode.commands.executeCommand('setContext', CONTEXT_KEY, false);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.clear();
    this.removed.dispose();
    this.target.dispose();
    this.status.dispose();
    vscode.Disposable.from(...this.subs).dispose();
  }
}
