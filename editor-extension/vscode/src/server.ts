// Launching `flint serve` (LSP over stdio) and its lifecycle: the server and client options, start,
// stop, restart, and what the server sends on its own (flint/status, flint/refresh).
import * as readline from 'readline';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import { LogLevelName, maskSecrets, PythonChoice, resolvePython, serverArgs, stderrLevel } from './util';
import { middleware } from './middleware';
import { SCHEMES, Settings } from './settings';
import { FlintStatus, StatusBar } from './status';
import { TraceChannel } from './trace';

/** A flint/refresh for a document (uri as VS Code writes it) at a version, if the server gave one. */
export type RefreshListener = (uri: string, version?: number) => void;

interface RefreshParams {
  textDocument: { uri: string; version?: number };
}

export function serverOptions(py: PythonChoice, args: string[], cwd: string | undefined): ServerOptions {
  return {
    command: py.python,
    args,
    options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
  };
}

/** `init`: the settings the server starts with (initializationOptions). */
export function clientOptions(
  settings: Settings,
  init: Record<string, unknown>,
  log: vscode.LogOutputChannel,
  trace: TraceChannel,
): LanguageClientOptions {
  return {
    documentSelector: SCHEMES.map((scheme) => ({ scheme })),
    initializationOptions: init,
    outputChannel: log,
    traceOutputChannel: trace,
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
    middleware: middleware(settings),
  };
}

function lines(input: NodeJS.ReadableStream, fn: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', fn);
}

export class Server implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  /** The negotiated position encoding (flint/didPartiallyAccept lengths are in its units). */
  positionEncoding = 'utf-16';
  // open Pick Variant lists: flint/refresh for their document means more variants are ready
  private readonly refreshListeners = new Set<RefreshListener>();
  private readonly started = new vscode.EventEmitter<LanguageClient>();
  /** A server is up and initialized. */
  readonly onDidStart = this.started.event;

  constructor(
    private readonly settings: Settings,
    private readonly status: StatusBar,
    private readonly log: vscode.LogOutputChannel,
    private readonly trace: TraceChannel,
  ) {}

  start(): Promise<void> {
    this.starting = this.launch().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async launch(): Promise<void> {
    const folders = (vscode.workspace.workspaceFolders ?? [])
      .filter((f) => f.uri.scheme === 'file')
      .map((f) => f.uri.fsPath);
    const py = resolvePython(this.settings.cfg().get<string>('pythonPath', ''), folders);
    const args = serverArgs(this.settings.cfg().get<string[]>('serverArgs', []));
    await this.settings.loadSecrets();
    const init = this.settings.forServer();
    this.status.model = String(init.model ?? '');
    this.log.info(`starting: ${py.python} ${args.join(' ')} (interpreter from ${py.reason})`);
    this.log.info(`initializationOptions: ${JSON.stringify(maskSecrets(init))}`);

    const options = clientOptions(this.settings, init, this.log, this.trace);
    const client = new LanguageClient('flint', 'Flint', serverOptions(py, args, folders[0]), options);
    this.client = client;
    this.status.setState('starting', 'starting the server');
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Stopped) this.status.setState('stopped', 'server stopped');
      else if (e.newState === State.Starting) this.status.setState('starting', 'starting the server');
      this.updateContext();
    });
    try {
      await client.start();
    } catch (err) {
      await this.failed(py, err);
      return;
    }
    if (this.client !== client) return;
    this.listen(client);
  }

  private async failed(py: PythonChoice, err: unknown): Promise<void> {
    this.status.setState('error', `could not start ${py.python}: ${String(err)}`);
    this.log.error(`start failed: ${String(err)}`);
    const choice = await vscode.window.showErrorMessage(
      `Flint: the server did not start with ${py.python} (${py.reason}). Is Flint installed in that interpreter?`,
      'Open Settings',
      'Show Log',
    );
    if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'flint.pythonPath');
    if (choice === 'Show Log') this.log.show();
  }

  /** The client just started: listen to the server's own notifications. */
  private listen(client: LanguageClient): void {
    this.positionEncoding = (client.initializeResult?.capabilities.positionEncoding as string) ?? 'utf-16';
    this.started.fire(client);
    client.onNotification('flint/status', (s: FlintStatus) => this.status.onStatus(s));
    client.onNotification('flint/refresh', (p: RefreshParams) => this.refreshed(client, p));
    // Flint reports `loading` right after `initialized`; a server that never sends flint/status is
    // taken as ready after a moment.
    setTimeout(() => {
      if (this.client === client && this.status.state === 'starting' && client.state === State.Running) {
        this.status.setState(this.settings.enabled() ? 'ready' : 'disabled', 'server running');
      }
    }, 3000);
    this.updateContext();
  }

  /** flint/refresh: more variants for an open Pick Variant list, or the suggestion on screen is whole
   * now: asking again shows it. */
  private refreshed(client: LanguageClient, p: RefreshParams): void {
    const ed = vscode.window.activeTextEditor;
    if (!ed || this.client !== client) return;
    const uri = client.protocol2CodeConverter.asUri(p.textDocument.uri).toString();
    for (const listen of this.refreshListeners) listen(uri, p.textDocument.version);
    if (ed.document.uri.toString() !== uri) return;
    if (p.textDocument.version !== undefined && ed.document.version !== p.textDocument.version) return;
    void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
  }

  /** Call `listen` on every flint/refresh until the returned disposable is disposed. */
  onRefresh(listen: RefreshListener): vscode.Disposable {
    this.refreshListeners.add(listen);
    return new vscode.Disposable(() => this.refreshListeners.delete(listen));
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
    this.status.forgetLatency();
    await this.start();
  }

  /** The client, when its server is running. */
  running(): LanguageClient | undefined {
    const c = this.client;
    return c && c.state === State.Running ? c : undefined;
  }

  /** A notification to the current server, running or not (dropped when there is none). */
  notify(method: string, params: object): void {
    this.client?.sendNotification(method, params);
  }

  /** Send the settings as they are now (workspace/didChangeConfiguration) and show them. */
  pushSettings(): void {
    this.notify('workspace/didChangeConfiguration', { settings: { flint: this.settings.forServer() } });
    this.status.render();
    this.updateContext();
  }

  /** The `flint.active` context key Flint's keybindings wait for. */
  updateContext(): void {
    const active = !!this.running() && this.settings.enabled() && !this.settings.snoozedUntil();
    void vscode.commands.executeCommand('setContext', 'flint.active', active);
  }

  dispose(): void {
    this.started.dispose();
  }
}
