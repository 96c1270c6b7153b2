// The user's switches: the Flint menu (the status-bar item's click), Toggle, per-language on/off,
// Snooze / Resume (with the timer that ends a snooze on time), and the remote API key.
import * as vscode from 'vscode';
import { parseSnooze, SNOOZE_CHOICES } from './util';
import { Server } from './server';
import { Settings } from './settings';
import { StatusBar } from './status';

export class Switches implements vscode.Disposable {
  private snoozeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly settings: Settings,
    private readonly server: Server,
    private readonly status: StatusBar,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  /** The status-bar menu: everything a user switches, in one place. */
  async menu(): Promise<void> {
    type Item = vscode.QuickPickItem & { run?: () => unknown };
    const enabled = this.settings.enabled();
    const until = this.settings.snoozedUntil();
    const lang = vscode.window.activeTextEditor?.document?.languageId;
    const langOff = !!lang && this.settings.cfg().get<string[]>('disabledLanguages', []).includes(lang);
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
      { label: '$(graph) Show Stats', run: () => this.status.showStats() },
      { label: '$(question) Why This Suggestion', run: () => this.status.why() },
      { label: '$(output) Open Log', run: () => this.log.show() },
      { label: '$(key) Set Remote API Key…', run: () => this.setSecret('remoteApiKey') },
      { label: '$(gear) Settings', run: () => vscode.commands.executeCommand('workbench.action.openSettings', '@ext:flint.flint') },
      { label: '$(debug-restart) Restart Server', run: () => this.server.restart('menu') },
    );
    const model = this.status.model;
    const pick = await vscode.window.showQuickPick(items, { title: `Flint: ${this.status.state}${model ? ` · ${model}` : ''}` });
    await pick?.run?.();
  }

  /** Flint: Toggle (`flint.enable`). */
  async toggle(): Promise<void> {
    const enable = !this.settings.enabled();
    await this.settings.cfg().update('enable', enable, vscode.ConfigurationTarget.Global);
    void vscode.window.setStatusBarMessage(`Flint ${enable ? 'enabled' : 'disabled'}`, 2000);
  }

  private async toggleLanguage(lang: string): Promise<void> {
    const cur = this.settings.cfg().get<string[]>('disabledLanguages', []);
    const next = cur.includes(lang) ? cur.filter((l) => l !== lang) : [...cur, lang];
    await this.settings.cfg().update('disabledLanguages', next, vscode.ConfigurationTarget.Global);
    void vscode.window.setStatusBarMessage(`Flint ${next.includes(lang) ? 'disabled' : 'enabled'} for ${lang}`, 3000);
  }

  /** Flint: Snooze for N Minutes (asks when `minutes` is not given). */
  async snooze(minutes?: number): Promise<void> {
    const n = minutes !== undefined ? minutes : await askSnoozeMinutes();
    if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) return;
    await this.settings.setSnoozedUntil(Date.now() + n * 60000);
    this.log.info(`snoozed for ${n} min`);
    await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    this.armSnooze();
    this.server.pushSettings();
  }

  /** Flint: Resume (end a snooze). */
  async resume(): Promise<void> {
    await this.settings.setSnoozedUntil(0);
    this.armSnooze();
    this.server.pushSettings();
  }

  /** Re-render while snoozed (the minutes left) and end the snooze on time. */
  armSnooze(): void {
    if (this.snoozeTimer) clearTimeout(this.snoozeTimer);
    this.snoozeTimer = undefined;
    const until = this.settings.snoozedUntil();
    if (until) {
      const wait = Math.min(until - Date.now(), 60000 - ((until - Date.now()) % 60000) || 60000);
      this.snoozeTimer = setTimeout(() => {
        const still = this.settings.snoozedUntil();
        if (!still) this.server.pushSettings();
        this.armSnooze();
      }, Math.max(250, wait));
    }
    this.status.render();
    this.server.updateContext();
  }

  /** Flint: Set Remote API Key (asks when `value` is not given; empty removes it). */
  async setSecret(name: string, value?: string): Promise<void> {
    const v =
      value ??
      (await vscode.window.showInputBox({
        title: 'Flint: Remote API Key',
        prompt: 'Sent as `Authorization: Bearer …` to flint.remoteUrl. Kept in VS Code\'s secret storage. Empty: remove it.',
        password: true,
        ignoreFocusOut: true,
      }));
    if (v === undefined) return;
    await this.settings.storeSecret(name, v.trim());
    this.server.pushSettings();
    void vscode.window.setStatusBarMessage(`Flint: remote API key ${v.trim() ? 'stored' : 'removed'}`, 3000);
  }

  dispose(): void {
    if (this.snoozeTimer) clearTimeout(this.snoozeTimer);
  }
}

/** The snooze picker: a listed length, or Other… and a typed one; undefined when dismissed. */
async function askSnoozeMinutes(): Promise<number | string | undefined> {
  const items = [
    ...SNOOZE_CHOICES.map((m) => ({ label: `${m} minutes`, minutes: m })),
    { label: 'Other…', minutes: 0 },
  ];
  const pick = await vscode.window.showQuickPick(items, { title: 'Flint: Snooze suggestions for…' });
  if (!pick) return undefined;
  if (pick.minutes) return pick.minutes;
  const text = await vscode.window.showInputBox({
    title: 'Flint: Snooze for how many minutes?',
    validateInput: (t) => (typeof parseSnooze(t) === 'string' ? (parseSnooze(t) as string) : null),
  });
  if (text === undefined) return undefined;
  return parseSnooze(text);
}
