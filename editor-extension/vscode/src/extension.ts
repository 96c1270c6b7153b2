// Flint for VS Code: runs `flint serve` (LSP over stdio) and shows its inline completions.
import * as readline from 'readline';
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
  LogLevelName,
  maskSecrets,
  parseSnooze,
  readSettings,
  resolvePython,
  RESTART_KEYS,
  SECRET_KEYS,
  serverArgs,
  serverSettingKeys,
  ServerState,
  SNOOZE_CHOICES,
  stderrLevel,
  Stats,
  statusView,
  variantLabel,
  VariantItem,
  whyText,
} from './util';
import type { ContextInfo } from './util';
import { TraceChannel } from './trace';

const ACCEPTED_CMD = 'flint._accepted';
const SNOOZE_KEY = 'flint.snoozedUntil';
const SCHEMES = ['file', 'untitled', 'vscode-remote'];
// the cursor settled this long after a move: tell the server (flint/didMoveCursor) so it starts that spot
const CURSOR_SETTLE_MS = 100;

interface FlintStatus {
  state: 'loading' | 'ready' | 'busy' | 'error';
  model?: string;
  lastLatencyMs?: number | null;
  source?: string | null;
  message?: string;
  context?: ContextInfo;
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
  private lastContext: ContextInfo | undefined; // what fed the last suggestion (flint/status)
  private shown: Shown | undefined;
  private positionEncoding = 'utf-16';
  // open Pick Variant lists: flint/refresh for their document means more variants are ready
  private readonly refreshListeners = new Set<(uri: string, version?: number) => void>();
  private starting: Promise<void> | undefined;
  private readonly settingKeys: string[];
  private readonly secrets: Record<string, string | undefined> = {};
  private readonly trace: TraceChannel;
  private snoozeTimer: ReturnType<typeof setTimeout> | undefined;
  private cursorTimer: ReturnType<typeof setTimeout> | undefined;
  private lastCursor = ''; // the spot last reported with flint/didMoveCursor

  constructor(private readonly context: vscode.ExtensionContext) {
    this.log = vscode.window.createOutputChannel('Flint', { log: true });
    // LSP traces go to the same channel, shown whenever `flint.trace.server` is not `off`.
    this.trace = new TraceChannel(
      this.log,
      () => this.cfg().get<string>('trace.server', 'off'),
      () => Object.values(this.secrets).filter((v): v is string => !!v),
    );
    this.settingKeys = serverSettingKeys(context.extension.packageJSON?.contributes?.configuration?.properties ?? {});
    this.status = vscode.window.createStatusBarItem('flint.status', vscode.StatusBarAlignment.Right, 100);
    this.status.name = 'Flint';
    this.status.command = 'flint.menu';
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
    reg('flint.whySuggestion', () => this.why());
    reg('flint.restart', () => this.restart('restart command'));
    reg('flint.showLog', () => this.log.show());
    reg('flint.menu', () => this.menu());
    reg('flint.snooze', (minutes?: number) => this.snooze(minutes));
    reg('flint.resume', () => this.resume());
    reg('flint.setRemoteApiKey', (key?: string) => this.setSecret('remoteApiKey', key));
    reg(ACCEPTED_CMD, (arg: { id?: string; index?: number } | undefined) => this.accepted(arg));

    this.disposables.push(
      vscode.languages.registerInlineCompletionItemProvider(
        SCHEMES.map((scheme) => ({ scheme })),
        { provideInlineCompletionItems: (d, p, c, t) => this.provide(d, p, c, t) },
      ),
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfig(e)),
      vscode.workspace.onDidChangeWorkspaceFolders(() => {
        if (!this.cfg().get<string>('pythonPath')) void this.restart('workspace folders changed');
      }),
      vscode.window.onDidChangeActiveTextEditor((ed) => {
        this.render();
        this.cursorMoved(ed);
      }),
      vscode.window.onDidChangeTextEditorSelection((e) => this.cursorMoved(e.textEditor)),
      context.secrets.onDidChange((e) => {
        if (e.key.startsWith('flint.')) void this.loadSecrets().then(() => this.pushSettings());
      }),
      this.trace,
    );
  }

  /** Secrets from VS Code's SecretStorage (never settings.json); read before the server starts. */
  private async loadSecrets(): Promise<void> {
    for (const k of SECRET_KEYS) {
      try {
        this.secrets[k] = await this.context.secrets.get(`flint.${k}`);
      } catch (err) {
        this.log.warn(`secret storage: ${String(err)}`);
      }
    }
  }

  private async setSecret(name: string, value?: string): Promise<void> {
    const v =
      value ??
      (await vscode.window.showInputBox({
        title: 'Flint: Remote API Key',
        prompt: 'Sent as `Authorization: Bearer …` to flint.remoteUrl. Kept in VS Code\'s secret storage. Empty: remove it.',
        password: true,
        ignoreFocusOut: true,
      }));
    if (v === undefined) return;
    if (v.trim()) await this.context.secrets.store(`flint.${name}`, v.trim());
    else await this.context.secrets.delete(`flint.${name}`);
    this.secrets[name] = v.trim() || undefined;
    this.pushSettings();
    void vscode.window.setStatusBarMessage(`Flint: remote API key ${v.trim() ? 'stored' : 'removed'}`, 3000);
  }

  /** Whether Flint works in this document: not a disabled language, not an excluded file. */
  private wanted(doc: vscode.TextDocument): boolean {
    return this.offReason(doc) === null;
  }

  private offReason(doc: vscode.TextDocument): string | null {
    const c = this.cfg();
    if (c.get<string[]>('disabledLanguages', []).includes(doc.languageId)) return doc.languageId;
    for (const pattern of c.get<string[]>('exclude', [])) {
      if (typeof pattern !== 'string' || !pattern) continue;
      const filters: vscode.DocumentFilter[] = [{ pattern }];
      const folder = vscode.workspace.getWorkspaceFolder(doc.uri);
      if (folder) filters.push({ pattern: new vscode.RelativePattern(folder, pattern) });
      if (filters.some((f) => vscode.languages.match(f, doc) > 0)) return 'excluded file';
    }
    return null;
  }

  private snoozedUntil(): number {
    const t = this.context.globalState.get<number>(SNOOZE_KEY, 0);
    return t > Date.now() ? t : 0;
  }

  private async snooze(minutes?: number): Promise<void> {
    let n: number | string | undefined = minutes;
    if (n === undefined) {
      const items = [
        ...SNOOZE_CHOICES.map((m) => ({ label: `${m} minutes`, minutes: m })),
        { label: 'Other…', minutes: 0 },
      ];
      const pick = await vscode.window.showQuickPick(items, { title: 'Flint: Snooze suggestions for…' });
      if (!pick) return;
      n = pick.minutes;
      if (!n) {
        const text = await vscode.window.showInputBox({
          title: 'Flint: Snooze for how many minutes?',
          validateInput: (t) => (typeof parseSnooze(t) === 'string' ? (parseSnooze(t) as string) : null),
        });
        if (text === undefined) return;
        n = parseSnooze(text);
      }
    }
    if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) return;
    await this.context.globalState.update(SNOOZE_KEY, Date.now() + n * 60000);
    this.log.info(`snoozed for ${n} min`);
    await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    this.armSnooze();
    this.pushSettings();
  }

  private async resume(): Promise<void> {
    await this.context.globalState.update(SNOOZE_KEY, 0);
    this.armSnooze();
    this.pushSettings();
  }

  /** Re-render while snoozed (the minutes left) and end the snooze on time. */
  armSnooze(): void {
    if (this.snoozeTimer) clearTimeout(this.snoozeTimer);
    this.snoozeTimer = undefined;
    const until = this.snoozedUntil();
    if (until) {
      const wait = Math.min(until - Date.now(), 60000 - ((until - Date.now()) % 60000) || 60000);
      this.snoozeTimer = setTimeout(() => {
        const still = this.snoozedUntil();
        if (!still) this.pushSettings();
        this.armSnooze();
      }, Math.max(250, wait));
    }
    this.render();
    this.updateContext();
  }

  private pushSettings(): void {
    const settings = this.settings();
    this.client?.sendNotification('workspace/didChangeConfiguration', { settings: { flint: settings } });
    this.render();
    this.updateContext();
  }

  /** The status-bar menu: everything a user switches, in one place. */
  private async menu(): Promise<void> {
    type Item = vscode.QuickPickItem & { run?: () => unknown };
    const enabled = this.cfg().get<boolean>('enable', true);
    const until = this.snoozedUntil();
    const doc = vscode.window.activeTextEditor?.document;
    const lang = doc?.languageId;
    const langOff = !!lang && this.cfg().get<string[]>('disabledLanguages', []).includes(lang);
    const items: Item[] = [
      { label: `$(${enabled ? 'circle-slash' : 'check'}) ${enabled ? 'Disable' : 'Enable'} completions`, run: () => this.toggle() },
      until
        ? { label: '$(bell) Resume now', description: `snoozed until ${new Date(until).toLocaleTimeString()}`, run: () => this.resume() }
        : { label: '$(bell-slash) Snooze…', description: 'pause suggestions for some minutes', run: () => this.snooze() },
    ];
    if (lang) {
      items.push({
        label: `$(symbol-file) ${langOff ? 'Enable' : 'Disable'} for ${lang}`,
        description: 'flint.disabledLanguages',
        run: () => this.toggleLanguage(lang),
      });
    }
    items.push(
      { label: '$(list-selection) Pick Variant…', run: () => vscode.commands.executeCommand('flint.pickVariant') },
      { label: '$(graph) Show Stats', run: () => this.showStats() },
      { label: '$(question) Why This Suggestion', run: () => this.why() },
      { label: '$(output) Open Log', run: () => this.log.show() },
      { label: '$(key) Set Remote API Key…', run: () => this.setSecret('remoteApiKey') },
      { label: '$(gear) Settings', run: () => vscode.commands.executeCommand('workbench.action.openSettings', '@ext:flint.flint') },
      { label: '$(debug-restart) Restart Server', run: () => this.restart('menu') },
    );
    const pick = await vscode.window.showQuickPick(items, { title: `Flint: ${this.state}${this.model ? ` · ${this.model}` : ''}` });
    await pick?.run?.();
  }

  private async toggleLanguage(lang: string): Promise<void> {
    const cur = this.cfg().get<string[]>('disabledLanguages', []);
    const next = cur.includes(lang) ? cur.filter((l) => l !== lang) : [...cur, lang];
    await this.cfg().update('disabledLanguages', next, vscode.ConfigurationTarget.Global);
    void vscode.window.setStatusBarMessage(`Flint ${next.includes(lang) ? 'disabled' : 'enabled'} for ${lang}`, 3000);
  }

  private cfg(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('flint');
  }

  /** What the server gets (secrets included: never log this, log maskSecrets(...) instead). */
  private settings(): Record<string, unknown> {
    const c = this.cfg();
    return readSettings(this.settingKeys, { get: <T>(k: string, d: T) => c.get<T>(k, d) }, this.secrets, !!this.snoozedUntil());
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
    await this.loadSecrets();
    const settings = this.settings();
    this.model = String(settings.model ?? '');
    this.log.info(`starting: ${py.python} ${args.join(' ')} (interpreter from ${py.reason})`);
    this.log.info(`initializationOptions: ${JSON.stringify(maskSecrets(settings))}`);

    const serverOptions: ServerOptions = {
      command: py.python,
      args,
      options: { cwd: folders[0], env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: SCHEMES.map((scheme) => ({ scheme })),
      initializationOptions: settings,
      outputChannel: this.log,
      traceOutputChannel: this.trace,
      // Server stderr at the level it was logged with (the default shows every line as an error).
      stdioOptions: {
        stdout: (input, out) => lines(input, (l) => out.info(l)),
        stderr: (input, out) => {
          let level: LogLevelName | null = null;
          lines(input, (l) => {
            level = stderrLevel(l, level);
            out[level](l);
          });
        },
      },
      middleware: {
        // Disabled languages and excluded files: their text never reaches the server.
        didOpen: (doc, next) => (this.wanted(doc) ? next(doc) : Promise.resolve()),
        didChange: (e, next) => (this.wanted(e.document) ? next(e) : Promise.resolve()),
        didSave: (doc, next) => (this.wanted(doc) ? next(doc) : Promise.resolve()),
        didClose: (doc, next) => (this.wanted(doc) ? next(doc) : Promise.resolve()),
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
    this.lastCursor = '';
    this.cursorMoved(vscode.window.activeTextEditor); // where the user is as the server starts
    client.onNotification('flint/status', (s: FlintStatus) => this.onStatus(s));
    // routing `race`: a capable answer replaced the suggestion on screen; asking again shows it
    client.onNotification('flint/refresh', (p: { textDocument: { uri: string; version?: number } }) => {
      const ed = vscode.window.activeTextEditor;
      if (!ed || this.client !== client) return;
      const uri = client.protocol2CodeConverter.asUri(p.textDocument.uri).toString();
      for (const listen of this.refreshListeners) listen(uri, p.textDocument.version);
      if (ed.document.uri.toString() !== uri) return;
      if (p.textDocument.version !== undefined && ed.document.version !== p.textDocument.version) return;
      void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
    });
    // Flint reports `loading` right after `initialized`; a server that never sends flint/status is
    // taken as ready after a moment.
    setTimeout(() => {
      if (this.client === client && this.state === 'starting' && client.state === State.Running) {
        this.setState(this.cfg().get<boolean>('enable', true) ? 'ready' : 'disabled', 'server running');
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
    this.pushSettings();
    const enable = this.cfg().get<boolean>('enable', true);
    if (this.state === 'disabled' || !enable) this.setState(enable ? 'ready' : 'disabled', '');
  }

  private running(): LanguageClient | undefined {
    const c = this.client;
    return c && c.state === State.Running ? c : undefined;
  }

  private updateContext(): void {
    const active = !!this.running() && this.cfg().get<boolean>('enable', true) && !this.snoozedUntil();
    void vscode.commands.executeCommand('setContext', 'flint.active', active);
  }

  // ---------------------------------------------------------------- status

  private onStatus(s: FlintStatus): void {
    if (s.model) this.model = s.model;
    if (s.context) this.lastContext = s.context;
    if (typeof s.lastLatencyMs === 'number') {
      this.latencyMs = s.lastLatencyMs;
      this.latencySource = s.source ?? null;
      if (s.state !== 'loading') this.stats.addServer(s.lastLatencyMs, s.source);
    }
    const state: ServerState = !this.cfg().get<boolean>('enable', true) && s.state !== 'error' ? 'disabled' : s.state;
    this.setState(state, s.message ?? '');
  }

  private setState(state: ServerState, message: string): void {
    this.state = state;
    this.message = message;
    this.render();
  }

  private render(): void {
    const doc = vscode.window.activeTextEditor?.document;
    const v = statusView(this.state, this.latencyMs, this.latencySource, this.model, this.message, {
      snoozedUntil: this.snoozedUntil(),
      offFor: doc ? this.offReason(doc) : null,
    });
    this.status.text = v.text;
    this.status.tooltip = v.tooltip;
    this.status.accessibilityInformation = { label: v.tooltip.split('\n').slice(0, 2).join(', ') };
    this.status.backgroundColor =
      this.state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  }

  // ---------------------------------------------------------------- inline completions

  /**
   * Tell the server where the cursor settled after a move that was not an edit (a file opened or focused,
   * a click, a jump): it starts that spot's work before the first keystroke there. Typing moves the cursor
   * too; the server ignores a spot its edits already told it about.
   */
  private cursorMoved(ed: vscode.TextEditor | undefined): void {
    if (this.cursorTimer) clearTimeout(this.cursorTimer);
    this.cursorTimer = undefined;
    if (!ed || !SCHEMES.includes(ed.document.uri.scheme)) return;
    this.cursorTimer = setTimeout(() => {
      this.cursorTimer = undefined;
      const client = this.running();
      const doc = ed.document;
      if (!client || vscode.window.activeTextEditor !== ed || !ed.selection.isEmpty || doc.isClosed) return;
      if (!this.cfg().get<boolean>('enable', true) || this.snoozedUntil() || !this.wanted(doc)) return;
      const pos = ed.selection.active;
      const key = `${doc.uri.toString()}@${doc.version}:${pos.line}:${pos.character}`;
      if (key === this.lastCursor) return;
      this.lastCursor = key;
      void client.sendNotification('flint/didMoveCursor', {
        textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri), version: doc.version },
        position: client.code2ProtocolConverter.asPosition(pos),
      });
    }, CURSOR_SETTLE_MS);
  }

  private async provide(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | null> {
    const client = this.running();
    if (!client || !this.cfg().get<boolean>('enable', true) || this.snoozedUntil() || !this.wanted(document)) return null;
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
    let res = null as VariantsResult | null; // set by show(), also from flint/refresh
    const t0 = performance.now();
    const show = (r: VariantsResult | null): void => {
      qp.busy = false;
      if (!r || !r.items?.length) {
        if (!res) {
          qp.placeholder = 'Flint has no suggestion here';
          qp.items = [];
        }
        return;
      }
      if (res && r.items.length <= res.items.length) return; // nothing new (or an older, shorter answer)
      res = r;
      const n = r.items.length;
      qp.title = `Flint: ${n} variant${n > 1 ? 's' : ''} (${fmtMs(performance.now() - t0)} round trip)`;
      qp.placeholder = 'Choose a variant to insert (latency · source)';
      const active = qp.activeItems[0]?.variant.insertText;
      qp.items = r.items.map((v) => ({ ...variantLabel(v), variant: v }));
      const keep = qp.items.find((it) => it.variant.insertText === active);
      if (keep) qp.activeItems = [keep];
    };
    const ask = () =>
      client.sendRequest<VariantsResult | null>(
        'flint/variants',
        { textDocument: { uri: doc.uri.toString() }, position: client.code2ProtocolConverter.asPosition(pos) },
        cts.token,
      );
    // The server answers with item 1 as soon as it is ready and sends flint/refresh when the other
    // variants are there: asking again then returns them all.
    const onRefresh = (uri: string, version?: number): void => {
      if (uri !== doc.uri.toString() || (version !== undefined && version !== doc.version)) return;
      if (cts.token.isCancellationRequested) return;
      ask().then(
        (r) => {
          if (!cts.token.isCancellationRequested) show(r);
        },
        (err) => this.log.debug(`pick variant: asking again: ${String(err)}`),
      );
    };
    this.refreshListeners.add(onRefresh);
    qp.onDidHide(() => this.refreshListeners.delete(onRefresh));
    try {
      show(await ask());
    } catch (err) {
      this.refreshListeners.delete(onRefresh);
      qp.hide();
      if (!cts.token.isCancellationRequested) void vscode.window.showWarningMessage(`Flint: ${String(err)}`);
      return;
    }
    if (cts.token.isCancellationRequested) return;
    const picked = await new Promise<VariantItem | undefined>((resolve) => {
      qp.onDidAccept(() => resolve(qp.selectedItems[0]?.variant));
      qp.onDidHide(() => resolve(undefined));
    });
    this.refreshListeners.delete(onRefresh);
    qp.hide();
    qp.dispose();
    if (!picked || !res) return;
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
    const enable = !this.cfg().get<boolean>('enable', true);
    await this.cfg().update('enable', enable, vscode.ConfigurationTarget.Global);
    void vscode.window.setStatusBarMessage(`Flint ${enable ? 'enabled' : 'disabled'}`, 2000);
  }

  /** Flint: Why This Suggestion: the other files' chunks the last suggestion's prompt held. */
  private why(): string {
    const w = whyText(this.lastContext);
    this.log.info(`why this suggestion\n${w.title}${w.detail ? `\n${w.detail}` : ''}`);
    void vscode.window.showInformationMessage(w.title, { modal: w.detail !== '', detail: w.detail || undefined });
    return [w.title, w.detail].filter(Boolean).join('\n');
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
    if (this.snoozeTimer) clearTimeout(this.snoozeTimer);
    if (this.cursorTimer) clearTimeout(this.cursorTimer);
    for (const d of this.disposables) d.dispose();
    this.status.dispose();
    this.log.dispose();
  }
}

function lines(input: NodeJS.ReadableStream, fn: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', fn);
}

let flint: Flint | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  flint = new Flint(context);
  context.subscriptions.push(flint);
  flint.armSnooze();
  await flint.start();
}

export async function deactivate(): Promise<void> {
  await flint?.stop();
  flint = undefined;
}
