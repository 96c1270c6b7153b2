// Flint's settings as the extension reads them: the `flint.*` configuration, the secrets kept in VS Code's
// SecretStorage, the snooze (global state), and the documents Flint stays off in. The server validates
// the values it gets (initializationOptions, workspace/didChangeConfiguration: docs/protocol.md).
import * as vscode from 'vscode';
import { readSettings, RESTART_KEYS, SECRET_KEYS, serverSettingKeys } from './util';

/** The URI schemes Flint works in (documents, completions, cursor reports). */
export const SCHEMES = ['file', 'untitled', 'vscode-remote'];

const SNOOZE_KEY = 'flint.snoozedUntil';

/** Whether a settings change needs a new server process (the others are pushed live). */
export function needsRestart(e: vscode.ConfigurationChangeEvent): boolean {
  return RESTART_KEYS.some((k) => e.affectsConfiguration(`flint.${k}`));
}

export class Settings {
  private readonly keys: string[];
  private readonly secrets: Record<string, string | undefined> = {};

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.keys = serverSettingKeys(context.extension.packageJSON?.contributes?.configuration?.properties ?? {});
  }

  cfg(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('flint');
  }

  /** `flint.enable`: the user's switch (a snooze is apart from it). */
  enabled(): boolean {
    return this.cfg().get<boolean>('enable', true);
  }

  /** What the server gets (secrets included: never log this, log maskSecrets(...) instead). */
  forServer(): Record<string, unknown> {
    const c = this.cfg();
    return readSettings(this.keys, { get: <T>(k: string, d: T) => c.get<T>(k, d) }, this.secrets, !!this.snoozedUntil());
  }

  /** The secret values that are set, for masking them in logged traffic. */
  secretValues(): string[] {
    return Object.values(this.secrets).filter((v): v is string => !!v);
  }

  /** Secrets from VS Code's SecretStorage (never settings.json); read before the server starts. */
  async loadSecrets(): Promise<void> {
    for (const k of SECRET_KEYS) {
      try {
        this.secrets[k] = await this.context.secrets.get(`flint.${k}`);
      } catch (err) {
        this.log.warn(`secret storage: ${String(err)}`);
      }
    }
  }

  /** Store a secret (empty: remove it), in SecretStorage and for the next settings sent. */
  async storeSecret(name: string, value: string): Promise<void> {
    if (value) await this.context.secrets.store(`flint.${name}`, value);
    else await this.context.secrets.delete(`flint.${name}`);
    this.secrets[name] = value || undefined;
  }

  /** When the snooze ends (epoch ms), or 0 when not snoozed. */
  snoozedUntil(): number {
    const t = this.context.globalState.get<number>(SNOOZE_KEY, 0);
    return t > Date.now() ? t : 0;
  }

  setSnoozedUntil(t: number): Thenable<void> {
    return this.context.globalState.update(SNOOZE_KEY, t);
  }

  /** Whether Flint works in this document: not a disabled language, not an excluded file. */
  wanted(doc: vscode.TextDocument): boolean {
    return this.offReason(doc) === null;
  }

  /** Why Flint is off in this document (its language, or "excluded file"), or null when it is not. */
  offReason(doc: vscode.TextDocument): string | null {
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

  /** Whether Flint suggests in this document right now: enabled, not snoozed, not off for it. */
  suggestsIn(doc: vscode.TextDocument): boolean {
    return this.enabled() && !this.snoozedUntil() && this.wanted(doc);
  }
}
