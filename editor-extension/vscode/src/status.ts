// The status-bar item (`⚡ Flint 38 ms`): the server's state and the last suggestion's latency, from
// flint/status (docs/protocol.md); and the two commands that report what it knows, Show Stats and
// Why This Suggestion.
import * as vscode from 'vscode';
import { fmtMs, ServerState, Stats, statusView, whyText } from './util';
import type { ContextInfo } from './util';
import { Settings } from './settings';

/** The server's flint/status notification. */
export interface FlintStatus {
  state: 'loading' | 'ready' | 'busy' | 'error';
  model?: string;
  lastLatencyMs?: number | null;
  source?: string | null;
  message?: string;
  context?: ContextInfo;
}

export class StatusBar implements vscode.Disposable {
  // Read by the menu and the server's lifecycle (which sets the model it starts); the rest is kept here.
  state: ServerState = 'starting';
  model = '';
  private message = '';
  private latencyMs: number | null = null;
  private latencySource: string | null = null;
  private lastContext: ContextInfo | undefined; // what fed the last suggestion (flint/status)
  private readonly item: vscode.StatusBarItem;

  constructor(
    private readonly settings: Settings,
    private readonly stats: Stats,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.item = vscode.window.createStatusBarItem('flint.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'Flint';
    this.item.command = 'flint.menu';
    this.item.show();
    this.render();
  }

  onStatus(s: FlintStatus): void {
    if (s.model) this.model = s.model;
    if (s.context) this.lastContext = s.context;
    if (typeof s.lastLatencyMs === 'number') {
      this.latencyMs = s.lastLatencyMs;
      this.latencySource = s.source ?? null;
      if (s.state !== 'loading') this.stats.addServer(s.lastLatencyMs, s.source);
    }
    const state: ServerState = !this.settings.enabled() && s.state !== 'error' ? 'disabled' : s.state;
    this.setState(state, s.message ?? '');
  }

  setState(state: ServerState, message: string): void {
    this.state = state;
    this.message = message;
    this.render();
  }

  /** `flint.enable` changed (pushed live, no restart): show `off`, or come back from it. */
  enableChanged(): void {
    const enable = this.settings.enabled();
    if (this.state === 'disabled' || !enable) this.setState(enable ? 'ready' : 'disabled', '');
  }

  /** A suggestion arrived `rtt` ms after it was asked for. */
  roundTrip(rtt: number): void {
    if (this.latencyMs === null || this.state !== 'busy') {
      // The server's flint/status carries its own measurement; until it arrives show the round trip.
      this.latencyMs = this.latencyMs ?? rtt;
      this.render();
    }
  }

  /** A new server process: no last suggestion yet. */
  forgetLatency(): void {
    this.latencyMs = null;
  }

  render(): void {
    const doc = vscode.window.activeTextEditor?.document;
    const v = statusView(this.state, this.latencyMs, this.latencySource, this.model, this.message, {
      snoozedUntil: this.settings.snoozedUntil(),
      offFor: doc ? this.settings.offReason(doc) : null,
    });
    this.item.text = v.text;
    this.item.tooltip = v.tooltip;
    this.item.accessibilityInformation = { label: v.tooltip.split('\n').slice(0, 2).join(', ') };
    this.item.backgroundColor =
      this.state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  }

  /** Flint: Show Stats. */
  showStats(): void {
    const head = `Flint ${this.state}${this.model ? ` · ${this.model}` : ''} · last suggestion ${fmtMs(this.latencyMs)}${
      this.latencySource ? ` (${this.latencySource})` : ''
    }`;
    const body = this.stats.summary();
    this.log.info(`stats\n${head}\n${body}`);
    this.log.show(true);
    void vscode.window.showInformationMessage(`${head}. ${body.split('\n').slice(0, 2).join('; ')}`);
  }

  /** Flint: Why This Suggestion: the other files' chunks the last suggestion's prompt held. */
  why(): string {
    const w = whyText(this.lastContext);
    this.log.info(`why this suggestion\n${w.title}${w.detail ? `\n${w.detail}` : ''}`);
    void vscode.window.showInformationMessage(w.title, { modal: w.detail !== '', detail: w.detail || undefined });
    return [w.title, w.detail].filter(Boolean).join('\n');
  }

  dispose(): void {
    this.item.dispose();
  }
}
