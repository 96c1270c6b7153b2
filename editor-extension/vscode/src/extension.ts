// Flint for VS Code: runs `flint serve` (LSP over stdio) and shows its inline completions.
import * as vscode from 'vscode';
import {
  InlineCompletionRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';
import type * as proto from 'vscode-languageclient/node';
import {
  encodedLength,
  fmtMs,
  readSettings,
  resolvePython,
  RESTART_KEYS,
  serverArgs,
  ServerState,
  Stats,
  statusView,
  variantLabel,
  VariantItem,
} from './util';

const ACCEPTED_CMD = 'flint._accepted';

interface FlintStatus {
  state: 'loading' | 'ready' | 'busy' | 'error';
  model?: string;
  lastLatencyMs?: number | null;
  source?: string | null;
  message?: string;
}

interface VariantsResult {
  id: string;
  version: number;
  items: VariantItem[];
}

/** What the provider last handed to VS Code: used for cycling and partial-accept reports. */
interface Shown {
  uri: string;
  id: string | null;
  count: number;
  index: number;
  acceptedLength: number;
}

class Flint implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly log: vscode.LogOutputChannel;
  private readonly status: vscode.StatusBarItem;
  private readonly stats = new Stats();
  private readonly disposables: vscode.Disposable[] = [];
  private state: ServerState = 'starting';
  private model = '';
  private message = '';
  private latencyMs: number | null = null;
  private latencySource: string | null = null;
  private shown: Shown | undefined;
  private positionEncoding = 'utf-16';
  private starting: Promise<void> | undefined;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.log = vscode.window.createOutputChannel('Flint', { log: true });
    this.status = vscode.window.createStatusBarItem('flint.status', vscode.StatusBarAlignment.Right, 100);
    this.status.name = 'Flint';
    this.status.command = 'flint.showStats';
    this.status.show();
    this.render();

    const reg = (id: string, fn: (...args: any[]) => unknown) =>
      this.disposables.push(vscode.commands.registerCommand(id, fn));
    reg('flint.pickVariant', () => this.pickVariant());
    reg('flint.nextVariant', () => this.cycle(+1));
    reg('flint.previousVariant', () => this.cycle(-1));
    reg('flint.acceptWord', () => this.partialAccept('word'));
    reg('flint.acceptLine', () => this.partialAccept('line'));
    reg('flint.toggle', () => this.toggle());
    reg('flint.showStats', () => this.showStats());
    reg('flint.restart', () => this.restart('restart command'));
    reg('flint.showLog', () => this.log.show());
    reg(ACCEPTED_CMD, (arg: { id?: string; index?: number } | undefined) => this.accepted(arg));

    this.disposables.push(
      vscode.languages.registerInlineCompletionItemProvider(
        [{ scheme: 'file' }, { scheme: 'untitled' }, { scheme: 'vscode-remote' }],
        { provideInlineCompletionItems: (d, p, c, t) => this.provide(d, p, c, t) },
      ),
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfig(e)),
      vscode.workspace.onDidChangeWorkspaceFolders(() => {
        if (!this.cfg().get<string>('pythonPath')) void this.restart('workspace folders changed');
      }),
    );
  }

  private cfg(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('flint');
  }

  private settings() {
    const c = this.cfg();
    return readSettings({ get: <T>(k: string, d: T) => c.get<T>(k, d) });
  }

  // ---------------------------------------------------------------- server lifecycle

  start(): Promise<void> {
    this.starting = this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const folders = (vscode.workspace.workspaceFolders ?? [])
      .filter((f) => f.uri.scheme === 'file')
      .map((f) => f.uri.fsPath);
    const py = resolvePython(this.cfg().get<string>('pythonPath', ''), folders);
    const args = serverArgs(this.cfg().get<string[]>('serverArgs', []));
    const settings = this.settings();
    this.model = settings.model;
    this.log.info(`starting: ${py.python} ${args.join(' ')} (interpreter from ${py.reason})`);
    this.log.info(`initializationOptions: ${JSON.stringify(settings)}`);

    const serverOptions: ServerOptions = {
      command: py.python,
      args,
      options: { cwd: folders[0], env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }, { scheme: 'vscode-remote' }],
      initializationOptions: settings,
      outputChannel: this.log,
      traceOutputChannel: this.log,
      middleware: {
        // Flint's own provider (below) issues textDocument/inlineCompletion so it can track ids, variants
        // and latency; the generic one from vscode-languageclient is switched off here.
        provideInlineCompletionItems: () => null,
        // textDocument/completion is Flint's fallback for editors without inline completion: VS Code has it.
        provideCompletionItem: () => null,
        workspace: {
          configuration: (params, token, next) => {
            if (params.items.some((i) => i.section === 'flint')) {
              return params.items.map((i) => (i.section === 'flint' ? this.settings() : null));
            }
            return next(params, token);
          },
        },
      },
    };
    const client = new LanguageClient('flint', 'Flint', serverOptions, clientOptions);
    this.client = client;
    this.setState('starting', 'starting the server');
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Stopped) this.setState('stopped', 'server stopped');
      else if (e.newState === State.Starting) this.setState('starting', 'starting the server');
      this.updateContext();
    });
    try {
      await client.start();
    } catch (err) {
      this.setState('error', `could not start ${py.python}: ${String(err)}`);
      this.log.error(`start failed: ${String(err)}`);
      const choice = await vscode.window.showErrorMessage(
        `Flint: the server did not start with ${py.python} (${py.reason}). Is Flint installed in that interpreter?`,
        'Open Settings',
        'Show Log',
      );
      if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'flint.pythonPath');
      if (choice === 'Show Log') this.log.show();
      return;
    }
    if (this.client !== client) return;
    this.positionEncoding = (client.initializeResult?.capabilities.positionEncoding as string) ?? 'utf-16';
    client.onNotification('flint/status', (s: FlintStatus) => this.onStatus(s));
    // routing `race`: a capable answer replaced the suggestion on screen; asking again shows it
    client.onNotification('flint/refresh', (p: { textDocument: { uri: string; version?: number } }) => {
      const ed = vscode.window.activeTextEditor;
      if (!ed || this.client !== client) return;
      const uri = client.protocol2CodeConverter.asUri(p.textDocument.uri).toString();
      if (ed.document.uri.toString() !== uri) return;
      if (p.textDocument.version !== undefined && ed.document.version !== p.textDocument.version) return;
      void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
    });
    // Flint reports `loading` right after `initialized`; a server that never sends flint/status is
    // taken as ready after a moment.
    setTimeout(() => {
      if (this.client === client && this.state === 'starting' && client.state === State.Running) {
        this.setState(this.settings().enable ? 'ready' : 'disabled', 'server running');
      }
    }, 3000);
    this.updateContext();
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    if (c) {
      try {
        await c.stop(3000);
      } catch (err) {
        this.log.warn(`stop: ${String(err)}`);
      }
    }
    this.updateContext();
  }

  async restart(why: string): Promise<void> {
    this.log.info(`restarting (${why})`);
    if (this.starting) await this.starting.catch(() => undefined);
    await this.stop();
    this.latencyMs = null;
    await this.start();
  }

  private onConfig(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration('flint')) return;
    if (RESTART_KEYS.some((k) => e.affectsConfiguration(`flint.${k}`))) {
      void this.restart('settings changed');
      return;
    }
    const settings = this.settings();
    this.client?.sendNotification('workspace/didChangeConfiguration', { settings: { flint: settings } });
    if (this.state === 'disabled' || !settings.enable) this.setState(settings.enable ? 'ready' : 'disabled', '');
    this.updateContext();
  }

  private running(): LanguageClient | undefined {
    const c = this.client;
    return c && c.state === State.Running ? c : undefined;
  }

  private updateContext(): void {
    const active = !!this.running() && this.settings().enable;
    void vscode.commands.executeCommand('setContext', 'flint.active', active);
  }

  // ---------------------------------------------------------------- status

  private onStatus(s: FlintStatus): void {
    if (s.model) this.model = s.model;
    if (typeof s.lastLatencyMs === 'number') {
      this.latencyMs = s.lastLatencyMs;
      this.latencySource = s.source ?? null;
      if (s.state !== 'loading') this.stats.addServer(s.lastLatencyMs, s.source);
    }
    const state: ServerState = !this.settings().enable && s.state !== 'error' ? 'disabled' : s.state;
    this.setState(state, s.message ?? '');
  }

  private setState(state: ServerState, message: string): void {
    this.state = state;
    this.message = message;
    this.render();
  }

  private render(): void {
    const v = statusView(this.state, this.latencyMs, this.latencySource, this.model, this.message);
    this.status.text = v.text;
    this.status.tooltip = v.tooltip;
    this.status.accessibilityInformation = { label: v.tooltip.split('\n').slice(0, 2).join(', ') };
    this.status.backgroundColor =
      this.state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  }

  // ---------------------------------------------------------------- inline completions

  private async provide(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | null> {
    const client = this.running();
    if (!client || !this.settings().enable) return null;
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
    const items = raw.map((it, i) => {
      const arg = (it.command?.arguments?.[0] ?? {}) as { id?: string; index?: number };
      const insert =
        typeof it.insertText === 'string' ? it.insertText : new vscode.SnippetString(it.insertText.value);
      const range = it.range ? client.protocol2CodeConverter.asRange(it.range) : undefined;
      const item = new vscode.InlineCompletionItem(insert, range, {
        title: 'Flint: accepted',
        command: ACCEPTED_CMD,
        arguments: [{ id: arg.id, index: arg.index ?? i }],
      });
      if (it.filterText) item.filterText = it.filterText;
      return item;
    });
    const first = (raw[0].command?.arguments?.[0] ?? {}) as { id?: string };
    this.shown = { uri: document.uri.toString(), id: first.id ?? null, count: items.length, index: 0, acceptedLength: 0 };
    if (this.latencyMs === null || this.state !== 'busy') {
      // The server's flint/status carries its own measurement; until it arrives show the round trip.
      this.latencyMs = this.latencyMs ?? rtt;
      this.render();
    }
    if (first.id) client.sendNotification('flint/didShow', { id: first.id, index: 0 });
    return items;
  }

  private accepted(arg: { id?: string; index?: number } | undefined): void {
    this.stats.accepted++;
    if (arg?.id) this.client?.sendNotification('flint/didAccept', { id: arg.id, index: arg.index ?? 0 });
    this.shown = undefined;
  }

  private async cycle(delta: number): Promise<void> {
    await vscode.commands.executeCommand(
      delta > 0 ? 'editor.action.inlineSuggest.showNext' : 'editor.action.inlineSuggest.showPrevious',
    );
    const s = this.shown;
    if (s && s.count > 0) {
      s.index = (s.index + delta + s.count) % s.count;
      s.acceptedLength = 0;
      if (s.id) this.client?.sendNotification('flint/didShow', { id: s.id, index: s.index });
    }
  }

  private async partialAccept(kind: 'word' | 'line'): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const s = this.shown;
    if (!editor) return;
    const doc = editor.document;
    let inserted = '';
    const sub = vscode.workspace.onDidChangeTextDocument((e) => {
      if (e.document === doc) for (const c of e.contentChanges) inserted += c.text;
    });
    try {
      await vscode.commands.executeCommand(
        kind === 'word' ? 'editor.action.inlineSuggest.acceptNextWord' : 'editor.action.inlineSuggest.acceptNextLine',
      );
      await new Promise((r) => setTimeout(r, 30)); // the document change event follows the command
    } finally {
      sub.dispose();
    }
    if (!inserted || !s || !s.id || s.uri !== doc.uri.toString()) return;
    s.acceptedLength += encodedLength(inserted, this.positionEncoding);
    this.stats.partialAccepts++;
    this.client?.sendNotification('flint/didPartiallyAccept', {
      id: s.id,
      index: s.index,
      acceptedLength: s.acceptedLength,
    });
  }

  // ---------------------------------------------------------------- Pick Variant

  private async pickVariant(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const client = this.running();
    if (!editor) return;
    if (!client) {
      void vscode.window.showWarningMessage('Flint: the server is not running.');
      return;
    }
    const doc = editor.document;
    const pos = editor.selection.active;
    const qp = vscode.window.createQuickPick<vscode.QuickPickItem & { variant: VariantItem }>();
    qp.title = 'Flint: Pick Variant';
    qp.placeholder = 'Asking Flint for variants…';
    qp.matchOnDetail = true;
    qp.busy = true;
    qp.show();
    const cts = new vscode.CancellationTokenSource();
    qp.onDidHide(() => cts.cancel());
    let res: VariantsResult | null;
    const t0 = performance.now();
    try {
      res = await client.sendRequest<VariantsResult | null>(
        'flint/variants',
        { textDocument: { uri: doc.uri.toString() }, position: client.code2ProtocolConverter.asPosition(pos) },
        cts.token,
      );
    } catch (err) {
      qp.hide();
      if (!cts.token.isCancellationRequested) void vscode.window.showWarningMessage(`Flint: ${String(err)}`);
      return;
    }
    if (cts.token.isCancellationRequested) return;
    qp.busy = false;
    if (!res || !res.items?.length) {
      qp.placeholder = 'Flint has no suggestion here';
      qp.items = [];
      return;
    }
    const n = res.items.length;
    qp.title = `Flint: ${n} variant${n > 1 ? 's' : ''} (${fmtMs(performance.now() - t0)} round trip)`;
    qp.placeholder = 'Choose a variant to insert (latency · source)';
    qp.items = res.items.map((v) => ({ ...variantLabel(v), variant: v }));
    const picked = await new Promise<VariantItem | undefined>((resolve) => {
      qp.onDidAccept(() => resolve(qp.selectedItems[0]?.variant));
      qp.onDidHide(() => resolve(undefined));
    });
    qp.hide();
    qp.dispose();
    if (!picked) return;
    await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    const range = picked.range ? client.protocol2CodeConverter.asRange(picked.range) : new vscode.Range(pos, pos);
    const ok = await editor.edit((eb) => eb.replace(range, picked.insertText));
    if (!ok) return;
    // Leave the cursor after the inserted text.
    const end = doc.positionAt(doc.offsetAt(range.start) + picked.insertText.length);
    editor.selection = new vscode.Selection(end, end);
    this.stats.picked++;
    client.sendNotification('flint/didAccept', { id: res.id, index: picked.index });
  }

  // ---------------------------------------------------------------- Toggle / Stats

  private async toggle(): Promise<void> {
    const enable = !this.settings().enable;
    await this.cfg().update('enable', enable, vscode.ConfigurationTarget.Global);
    void vscode.window.setStatusBarMessage(`Flint ${enable ? 'enabled' : 'disabled'}`, 2000);
  }

  private showStats(): void {
    const head = `Flint ${this.state}${this.model ? ` · ${this.model}` : ''} · last suggestion ${fmtMs(this.latencyMs)}${
      this.latencySource ? ` (${this.latencySource})` : ''
    }`;
    const body = this.stats.summary();
    this.log.info(`stats\n${head}\n${body}`);
    this.log.show(true);
    void vscode.window.showInformationMessage(`${head}. ${body.split('\n').slice(0, 2).join('; ')}`);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    this.status.dispose();
    this.log.dispose();
  }
}

let flint: Flint | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  flint = new Flint(context);
  context.subscriptions.push(flint);
  await flint.start();
}

export async function deactivate(): Promise<void> {
  await flint?.stop();
  flint = undefined;
}
