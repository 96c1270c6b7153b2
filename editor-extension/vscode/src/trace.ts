// The channel vscode-languageclient writes LSP traces to. vscode-languageclient 10+ traces only while
// the trace channel's log level is Trace, which users set per channel, not through `flint.trace.server`;
// this wrapper makes that setting work: while it is `messages` or `verbose` it reports level Trace and
// writes the traces into the Flint channel at info level (so they show at the channel's default level).
import * as vscode from 'vscode';
import { redact } from './util';

export class TraceChannel implements vscode.LogOutputChannel {
  private readonly emitter = new vscode.EventEmitter<vscode.LogLevel>();
  private readonly sub: vscode.Disposable;
  private last: string;
  readonly onDidChangeLogLevel = this.emitter.event;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly setting: () => string,
    // Secret values the traffic may carry (the remote API key in didChangeConfiguration): masked.
    private readonly secrets: () => string[] = () => [],
  ) {
    this.last = setting();
    this.sub = vscode.Disposable.from(
      log.onDidChangeLogLevel((l) => this.emitter.fire(this.level(l))),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration('flint.trace.server')) return;
        const now = this.setting();
        if (now !== this.last) {
          this.last = now;
          this.emitter.fire(this.logLevel);
        }
      }),
    );
  }

  private on(): boolean {
    const v = this.setting();
    return v === 'messages' || v === 'verbose';
  }

  private level(channel: vscode.LogLevel): vscode.LogLevel {
    return this.on() ? vscode.LogLevel.Trace : channel;
  }

  get logLevel(): vscode.LogLevel {
    return this.level(this.log.logLevel);
  }

  get name(): string {
    return this.log.name;
  }

  trace(message: string, ...args: any[]): void {
    const text = redact(message, this.secrets());
    if (this.on()) this.log.info(text);
    else this.log.trace(text);
  }
  debug(message: string, ...args: any[]): void {
    this.log.debug(message, ...args);
  }
  info(message: string, ...args: any[]): void {
    this.log.info(message, ...args);
  }
  warn(message: string, ...args: any[]): void {
    this.log.warn(message, ...args);
  }
  error(error: string | Error, ...args: any[]): void {
    this.log.error(error, ...args);
  }
  append(value: string): void {
    this.log.append(value);
  }
  appendLine(value: string): void {
    this.log.appendLine(value);
  }
  replace(value: string): void {
    this.log.replace(value);
  }
  clear(): void {
    this.log.clear();
  }
  show(preserveFocus?: boolean): void;
  show(column?: vscode.ViewColumn, preserveFocus?: boolean): void;
  show(a?: any, b?: any): void {
    this.log.show(a, b);
  }
  hide(): void {
    this.log.hide();
  }
  dispose(): void {
    this.sub.dispose();
    this.emitter.dispose();
  }
}

