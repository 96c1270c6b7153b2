// Flint: Pick Variant: a QuickPick of every ranked variant from flint/variants, each with its own latency
// and source, that inserts the chosen one and reports it (flint/didAccept). The server answers with item 1
// as soon as it is ready and sends flint/refresh when the other variants are there: the list asks again.
// While alternatives are on their way the list stays busy; when the model has no other suggestion (its
// variants agreed) the server's note says so and the list shows it instead of waiting silently.
import * as vscode from 'vscode';
import { LanguageClient } from 'vscode-languageclient/node';
import { fmtMs, pickerStatus, Stats, variantLabel, VariantItem } from './util';
import { Server } from './server';

/** The flint/variants response. */
interface VariantsResult {
  id: string;
  version: number;
  items: VariantItem[];
  complete?: boolean; // nothing more is coming for this answer (older servers: absent)
  note?: string; // why the list holds fewer items than asked: alternatives coming, or the model agrees
}

type Row = vscode.QuickPickItem & { variant: VariantItem };

export class VariantPicker {
  constructor(
    private readonly server: Server,
    private readonly stats: Stats,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  async pick(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const client = this.server.running();
    if (!editor) return;
    if (!client) {
      void vscode.window.showWarningMessage('Flint: the server is not running.');
      return;
    }
    const pos = editor.selection.active;
    const list = new VariantList(client, editor.document, pos, this.log);
    const chosen = await list.choose(this.server);
    if (!chosen) return;
    const [res, picked] = chosen;
    await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    const range = picked.range ? client.protocol2CodeConverter.asRange(picked.range) : new vscode.Range(pos, pos);
    const ok = await editor.edit((eb) => eb.replace(range, picked.insertText));
    if (!ok) return;
    // Leave the cursor after the inserted text.
    const doc = editor.document;
    const end = doc.positionAt(doc.offsetAt(range.start) + picked.insertText.length);
    editor.selection = new vscode.Selection(end, end);
    this.stats.picked++;
    client.sendNotification('flint/didAccept', { id: res.id, index: picked.index });
  }
}

/** One open Pick Variant list: asks, shows the answer, asks again on flint/refresh. */
class VariantList {
  private readonly qp = vscode.window.createQuickPick<Row>();
  private readonly cts = new vscode.CancellationTokenSource();
  private res: VariantsResult | null = null; // the answer shown (the first, or a longer one after flint/refresh)
  private readonly t0: number;

  constructor(
    private readonly client: LanguageClient,
    private readonly doc: vscode.TextDocument,
    private readonly pos: vscode.Position,
    private readonly log: vscode.LogOutputChannel,
  ) {
    const qp = this.qp;
    qp.title = 'Flint: Pick Variant';
    qp.placeholder = 'Asking Flint for variants…';
    qp.matchOnDetail = true;
    qp.busy = true;
    qp.show();
    qp.onDidHide(() => this.cts.cancel());
    this.t0 = performance.now();
  }

  /** The answer and the variant the user chose, or undefined when none was. */
  async choose(server: Server): Promise<[VariantsResult, VariantItem] | undefined> {
    const qp = this.qp;
    const refresh = server.onRefresh((uri, version) => this.refreshed(uri, version));
    qp.onDidHide(() => refresh.dispose());
    try {
      this.show(await this.ask());
    } catch (err) {
      refresh.dispose();
      qp.hide();
      if (!this.cts.token.isCancellationRequested) void vscode.window.showWarningMessage(`Flint: ${String(err)}`);
      return undefined;
    }
    if (this.cts.token.isCancellationRequested) return undefined;
    const picked = await new Promise<VariantItem | undefined>((resolve) => {
      qp.onDidAccept(() => resolve(qp.selectedItems[0]?.variant));
      qp.onDidHide(() => resolve(undefined));
    });
    refresh.dispose();
    qp.hide();
    qp.dispose();
    return picked && this.res ? [this.res, picked] : undefined;
  }

  private ask(): Promise<VariantsResult | null> {
    return this.client.sendRequest<VariantsResult | null>(
      'flint/variants',
      { textDocument: { uri: this.doc.uri.toString() }, position: this.client.code2ProtocolConverter.asPosition(this.pos) },
      this.cts.token,
    );
  }

  /** flint/refresh: for this document (at this version), the other variants are ready. */
  private refreshed(uri: string, version?: number): void {
    if (uri !== this.doc.uri.toString() || (version !== undefined && version !== this.doc.version)) return;
    if (this.cts.token.isCancellationRequested) return;
    this.ask().then(
      (r) => {
        if (!this.cts.token.isCancellationRequested) this.show(r);
      },
      (err) => this.log.debug(`pick variant: asking again: ${String(err)}`),
    );
  }

  private show(r: VariantsResult | null): void {
    const qp = this.qp;
    qp.busy = false;
    if (!r || !r.items?.length) {
      if (!this.res) {
        qp.placeholder = 'Flint has no suggestion here';
        qp.items = [];
      }
      return;
    }
    const status = pickerStatus(r);
    if (this.res && r.items.length <= this.res.items.length) {
      // nothing new (or an older, shorter answer); the server may have said the list is final
      if (r.items.length === this.res.items.length && r.complete) {
        qp.busy = false;
        qp.placeholder = status;
      } else {
        qp.busy = this.res.complete === false;
      }
      return;
    }
    this.res = r;
    const n = r.items.length;
    qp.title = `Flint: ${n} variant${n > 1 ? 's' : ''} (${fmtMs(performance.now() - this.t0)} round trip)`;
    qp.placeholder = status;
    qp.busy = r.complete === false;
    const active = qp.activeItems[0]?.variant.insertText;
    qp.items = r.items.map((v) => ({ ...variantLabel(v), variant: v }));
    const keep = qp.items.find((it) => it.variant.insertText === active);
    if (keep) qp.activeItems = [keep];
  }
}
