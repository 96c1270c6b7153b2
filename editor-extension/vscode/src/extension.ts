// Flint for VS Code: runs `flint serve` (LSP over stdio) and shows its inline completions.
// This file only activates the parts, restarts the server when a setting needs it and registers the
// commands. The parts: server.ts (launching `flint serve`, its lifecycle) with middleware.ts, settings.ts,
// status.ts (the status-bar item), completions.ts (inline completions and what is reported about them),
// variants.ts (Pick Variant), cursor.ts (flint/didMoveCursor), switches.ts (menu, toggle, snooze, API
// key), trace.ts (the LSP trace in the Flint channel), nextEdit.ts (flint/nextEdit: the edit that follows,
// elsewhere; its own commands and listeners); util.ts holds the pure helpers they share.
import * as vscode from 'vscode';
import { ACCEPTED_CMD, InlineCompletions, ItemRef } from './completions';
import { CursorReports } from './cursor';
import { NextEdits } from './nextEdit';
import { Server } from './server';
import { needsRestart, SCHEMES, Settings } from './settings';
import { StatusBar } from './status';
import { Switches } from './switches';
import { TraceChannel } from './trace';
import { Stats } from './util';
import { VariantPicker } from './variants';

interface Parts {
  log: vscode.LogOutputChannel;
  settings: Settings;
  status: StatusBar;
  server: Server;
  completions: InlineCompletions;
  variants: VariantPicker;
  cursor: CursorReports;
  switches: Switches;
}

let server: Server | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel('Flint', { log: true });
  const settings = new Settings(context, log);
  // LSP traces go to the same channel, shown whenever `flint.trace.server` is not `off`.
  const trace = new TraceChannel(log, () => settings.cfg().get<string>('trace.server', 'off'), () => settings.secretValues());
  const stats = new Stats();
  const status = new StatusBar(settings, stats, log);
  const srv = new Server(settings, status, log, trace);
  const p: Parts = {
    log,
    settings,
    status,
    server: srv,
    completions: new InlineCompletions(srv, settings, status, stats, log),
    variants: new VariantPicker(srv, stats, log),
    cursor: new CursorReports(srv, settings),
    switches: new Switches(settings, srv, status, log),
  };
  const subs = [...registerCommands(p), ...watch(context, p)];
  const nextEdits = new NextEdits(srv, settings, log);
  context.subscriptions.push(vscode.Disposable.from(p.switches, p.cursor, nextEdits, ...subs, trace, status, srv, log));
  server = srv;
  p.switches.armSnooze();
  await srv.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}

function registerCommands(p: Parts): vscode.Disposable[] {
  const { completions, switches, status, server: srv } = p;
  const commands: Record<string, (...args: any[]) => unknown> = {
    'flint.pickVariant': () => p.variants.pick(),
    'flint.nextVariant': () => completions.cycle(+1),
    'flint.previousVariant': () => completions.cycle(-1),
    'flint.acceptWord': () => completions.partialAccept('word'),
    'flint.acceptLine': () => completions.partialAccept('line'),
    'flint.toggle': () => switches.toggle(),
    'flint.showStats': () => status.showStats(),
    'flint.whySuggestion': () => status.why(),
    'flint.restart': () => srv.restart('restart command'),
    'flint.showLog': () => p.log.show(),
    'flint.menu': () => switches.menu(),
    'flint.snooze': (minutes?: number) => switches.snooze(minutes),
    'flint.resume': () => switches.resume(),
    'flint.setRemoteApiKey': (key?: string) => switches.setSecret('remoteApiKey', key),
    [ACCEPTED_CMD]: (arg: ItemRef | undefined) => completions.accepted(arg),
  };
  return Object.entries(commands).map(([id, fn]) => vscode.commands.registerCommand(id, fn));
}

/** The provider, and what Flint follows: settings, workspace folders, the cursor, the secrets. */
function watch(context: vscode.ExtensionContext, p: Parts): vscode.Disposable[] {
  const { settings, server: srv, cursor } = p;
  return [
    vscode.languages.registerInlineCompletionItemProvider(
      SCHEMES.map((scheme) => ({ scheme })),
      { provideInlineCompletionItems: (d, pos, c, t) => p.completions.provide(d, pos, c, t) },
    ),
    vscode.workspace.onDidChangeConfiguration((e) => onConfig(e, p)),
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      if (!settings.cfg().get<string>('pythonPath')) void srv.restart('workspace folders changed');
    }),
    vscode.window.onDidChangeActiveTextEditor((ed) => {
      p.status.render();
      cursor.moved(ed);
    }),
    vscode.window.onDidChangeTextEditorSelection((e) => cursor.moved(e.textEditor)),
    srv.onDidStart(() => cursor.restart()),
    context.secrets.onDidChange((e) => {
      if (e.key.startsWith('flint.')) void settings.loadSecrets().then(() => srv.pushSettings());
    }),
  ];
}

/** A settings change: restart the server for the ones that need a new process, push the others. */
function onConfig(e: vscode.ConfigurationChangeEvent, p: Parts): void {
  if (!e.affectsConfiguration('flint')) return;
  if (needsRestart(e)) {
    void p.server.restart('settings changed');
    return;
  }
  p.server.pushSettings();
  p.status.enableChanged();
}
