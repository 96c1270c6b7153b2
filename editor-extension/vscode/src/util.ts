// Pure helpers (no `vscode` import) so they can be unit-tested with `node --test`.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

/**
 * Settings the extension keeps to itself (everything else under `flint.` in package.json is a server
 * setting, sent as initializationOptions / didChangeConfiguration: docs/protocol.md).
 */
export const CLIENT_KEYS = ['disabledLanguages', 'exclude', 'pythonPath', 'serverArgs', 'trace.server'];

/** Server settings kept in VS Code's SecretStorage, never in settings.json (storage key `flint.<name>`). */
export const SECRET_KEYS = ['remoteApiKey'];

/** Settings whose change needs a new server process (everything else is pushed live). */
export const RESTART_KEYS = ['pythonPath', 'serverArgs', 'model', 'threads', 'disabledLanguages', 'exclude'];

export interface SettingsSource {
  get<T>(key: string, fallback: T): T;
}

/** The server settings' names: package.json's `flint.*` properties minus the client's own. */
export function serverSettingKeys(properties: Record<string, unknown>): string[] {
  return Object.keys(properties)
    .filter((k) => k.startsWith('flint.'))
    .map((k) => k.slice('flint.'.length))
    .filter((k) => !CLIENT_KEYS.includes(k));
}

/**
 * What the server gets: every server setting as VS Code resolves it (defaults come from package.json,
 * which a test keeps equal to the server's), the secrets from SecretStorage (null: not set, so the
 * server falls back to $FLINT_REMOTE_API_KEY), and `enable` off while snoozed. The server validates.
 */
export function readSettings(
  keys: string[],
  cfg: SettingsSource,
  secrets: Record<string, string | undefined> = {},
  snoozed = false,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = cfg.get<unknown>(k, null);
  for (const k of SECRET_KEYS) out[k] = secrets[k] ? secrets[k] : null;
  if (snoozed) out.enable = false;
  return out;
}

/** Settings fit for a log line: secrets shown as `***` when set. */
export function maskSecrets(settings: Record<string, unknown>): Record<string, unknown> {
  const out = { ...settings };
  for (const k of SECRET_KEYS) if (out[k]) out[k] = '***';
  return out;
}

export type LogLevelName = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const PY_LEVELS = { DEBUG: 'debug', INFO: 'info', WARNING: 'warn', ERROR: 'error', CRITICAL: 'error' } as const;

/**
 * The level of one line the server wrote to stderr (Python logging: `<date> <time> <logger> <LEVEL> msg`).
 * A line without a level (a traceback's body, a wrapped message) keeps the previous line's level; a
 * traceback's first line is an error; anything else unknown is a warning (stderr is not chatter).
 */
export function stderrLevel(line: string, previous: LogLevelName | null): LogLevelName {
  const m =
    /^\S+ \S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL)\b/.exec(line) ??
    /^(DEBUG|INFO|WARNING|ERROR|CRITICAL)[: ]/.exec(line);
  if (m) return PY_LEVELS[m[1] as keyof typeof PY_LEVELS];
  if (line.startsWith('Traceback (most recent call last)')) return 'error';
  return previous ?? 'warn';
}

/** Minutes offered by `Flint: Snooze`; it also takes any whole number. */
export const SNOOZE_CHOICES = [5, 15, 30, 60];

/** A snooze length typed by the user, in minutes (1..1440), or what is wrong with it. */
export function parseSnooze(text: string): number | string {
  const n = Number(text.trim());
  if (text.trim() === '' || !Number.isInteger(n) || n < 1 || n > 24 * 60) {
    return 'Enter a whole number of minutes from 1 to 1440';
  }
  return n;
}

export function expandPath(p: string, workspaceFolder?: string): string {
  let out = p.trim();
  if (workspaceFolder) out = out.split('${workspaceFolder}').join(workspaceFolder);
  out = out.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => process.env[name] ?? '');
  if (out === '~' || out.startsWith('~/')) out = path.join(os.homedir(), out.slice(1));
  return out;
}

export interface PythonChoice {
  python: string;
  reason: string;
}

/**
 * The interpreter that runs `flint serve`: the `flint.pythonPath` setting, else a virtualenv in a
 * workspace folder (.venv, then venv), else `python3` (`python` on Windows) from PATH.
 */
export function resolvePython(
  setting: string | undefined,
  workspaceFolders: string[],
  exists: (p: string) => boolean = isFile,
  platform: NodeJS.Platform = process.platform,
): PythonChoice {
  if (setting && setting.trim()) {
    return { python: expandPath(setting, workspaceFolders[0]), reason: 'flint.pythonPath setting' };
  }
  const rel = platform === 'win32' ? ['Scripts', 'python.exe'] : ['bin', 'python'];
  for (const folder of workspaceFolders) {
    for (const venv of ['.venv', 'venv']) {
      const candidate = path.join(folder, venv, ...rel);
      if (exists(candidate)) return { python: candidate, reason: `workspace virtualenv ${venv}` };
    }
  }
  return { python: platform === 'win32' ? 'python' : 'python3', reason: 'PATH' };
}

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

export function serverArgs(extra: string[]): string[] {
  return ['-m', 'lsp_server.cli', 'serve', ...extra.filter((a) => typeof a === 'string' && a.length > 0)];
}

/** Latency and acceptance counters shown by `Flint: Show Stats`. */
export class Stats {
  requests = 0;
  suggestions = 0;
  empty = 0;
  accepted = 0;
  partialAccepts = 0;
  picked = 0;
  errors = 0;
  readonly rttMs: number[] = [];
  readonly serverMs: number[] = [];
  readonly sources = new Map<string, number>();

  addRtt(ms: number): void {
    this.rttMs.push(ms);
    if (this.rttMs.length > 5000) this.rttMs.shift();
  }

  addServer(ms: number, source: string | null | undefined): void {
    this.serverMs.push(ms);
    if (this.serverMs.length > 5000) this.serverMs.shift();
    if (source) this.sources.set(source, (this.sources.get(source) ?? 0) + 1);
  }

  summary(): string {
    const lat = (xs: number[]) =>
      xs.length ? `p50 ${fmtMs(percentile(xs, 50))}, p95 ${fmtMs(percentile(xs, 95))}, n=${xs.length}` : 'n/a';
    const src = [...this.sources.entries()].map(([k, v]) => `${k} ${v}`).join(', ') || 'n/a';
    return [
      `requests ${this.requests}, suggestions ${this.suggestions}, empty ${this.empty}, errors ${this.errors}`,
      `accepted ${this.accepted} (Tab), picked ${this.picked} (Pick Variant), partial accepts ${this.partialAccepts}`,
      `acceptance rate ${this.suggestions ? ((100 * (this.accepted + this.picked)) / this.suggestions).toFixed(1) : '0.0'}%`,
      `server latency: ${lat(this.serverMs)}`,
      `round trip (editor ↔ server): ${lat(this.rttMs)}`,
      `sources: ${src}`,
    ].join('\n');
  }
}

export function percentile(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const k = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[k];
}

export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

/** One variant from `flint/variants` as a QuickPick row. */
export interface VariantItem {
  index: number;
  insertText: string;
  range?: { start: { line: number; character: number }; end: { line: number; character: number } } | null;
  ttftMs?: number | null;
  totalMs?: number | null;
  source?: string | null;
  tokens?: number | null;
  backend?: string | null;
}

/**
 * How long a variant took, as the user should read it (docs/protocol.md `flint/variants`): a model
 * answer shows its own generation time (`totalMs`) and first-token time (`ttftMs`); an answer that
 * cost no generation says where it came from instead of a latency.
 */
export function variantTiming(v: VariantItem): string[] {
  switch (v.source) {
    case 'memory':
      return ['from cache (memory)'];
    case 'disk':
      return ['from cache (disk)'];
    case 'type-through':
      return ['typed through'];
  }
  const out: string[] = [];
  if (typeof v.totalMs === 'number' && v.totalMs > 0) out.push(fmtMs(v.totalMs));
  else out.push('latency not reported');
  if (typeof v.ttftMs === 'number' && v.ttftMs > 0) out.push(`first token ${fmtMs(v.ttftMs)}`);
  out.push(v.source || 'unknown source');
  return out;
}

export function variantLabel(v: VariantItem): { label: string; description: string; detail: string } {
  const lines = v.insertText.split(/\r?\n/);
  const firstIdx = lines.findIndex((l) => l.trim().length > 0);
  const first = firstIdx >= 0 ? lines[firstIdx].trim() : '(empty)';
  const more = lines.length > 1 ? ` (+${lines.length - 1} line${lines.length > 2 ? 's' : ''})` : '';
  const parts = [`#${v.index + 1}`, ...variantTiming(v)];
  if (v.backend && v.backend !== 'local') parts.push(v.backend);
  if (v.tokens && v.source === 'model') parts.push(`${v.tokens} tok`);
  const detail = lines
    .slice(firstIdx >= 0 ? firstIdx + 1 : 0)
    .map((l) => l.replace(/\s+$/, ''))
    .join(' ⏎ ')
    .slice(0, 200);
  return { label: first + more, description: parts.join(' · '), detail };
}

/** Length of `text` in the negotiated position encoding's units. */
export function encodedLength(text: string, encoding: string): number {
  if (encoding === 'utf-8') return Buffer.byteLength(text, 'utf8');
  if (encoding === 'utf-32') return [...text].length;
  return text.length; // utf-16
}

export type ServerState = 'starting' | 'loading' | 'ready' | 'busy' | 'error' | 'stopped' | 'disabled';

export interface StatusView {
  text: string;
  tooltip: string;
}

/** Why suggestions are off right now though the server runs (snooze, language, glob), if they are. */
export interface Pause {
  snoozedUntil?: number | null; // epoch ms
  offFor?: string | null; // e.g. "markdown" or "excluded file"
  now?: number;
}

export function statusView(
  state: ServerState,
  latencyMs: number | null,
  source: string | null,
  model: string,
  message: string,
  pause: Pause = {},
): StatusView {
  const lat = latencyMs !== null ? ` ${fmtMs(latencyMs)}` : '';
  const icon: Record<ServerState, string> = {
    starting: '$(loading~spin)',
    loading: '$(loading~spin)',
    ready: '$(zap)',
    busy: '$(sync~spin)',
    error: '$(error)',
    stopped: '$(debug-stop)',
    disabled: '$(circle-slash)',
  };
  const word: Partial<Record<ServerState, string>> = {
    starting: ' starting',
    loading: ' loading',
    error: ' error',
    stopped: ' stopped',
    disabled: ' off',
  };
  const now = pause.now ?? Date.now();
  const snoozeLeft = pause.snoozedUntil && pause.snoozedUntil > now ? pause.snoozedUntil - now : 0;
  let text = `${icon[state]} Flint${word[state] ?? lat}`;
  let why = '';
  if (state !== 'error' && state !== 'stopped' && state !== 'disabled') {
    if (snoozeLeft) {
      const min = Math.ceil(snoozeLeft / 60000);
      text = `$(bell-slash) Flint snoozed ${min} min`;
      why = `snoozed until ${new Date(pause.snoozedUntil as number).toLocaleTimeString()}`;
    } else if (pause.offFor) {
      text = `$(circle-slash) Flint off (${pause.offFor})`;
      why = `off for ${pause.offFor} (flint.disabledLanguages / flint.exclude)`;
    }
  }
  const tip = [
    `Flint: ${state}${model ? ` (${model})` : ''}`,
    why,
    latencyMs !== null ? `last suggestion: ${fmtMs(latencyMs)}${source ? ` from ${source}` : ''}` : '',
    message,
    'Click for the Flint menu',
  ]
    .filter(Boolean)
    .join('\n');
  return { text, tooltip: tip };
}

/** `text` with every occurrence of each secret (4+ characters) replaced by `***`. */
export function redact(text: string, secrets: string[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join('***');
  return out;
}

/** The repository context the server says fed the last suggestion (flint/status `context`). */
export interface ContextInfo {
  files?: string[];
  chunks?: string[];
  digest?: string;
}

/** "Why this suggestion": a headline and one line per context chunk (path:line (source)). */
export function whyText(ctx: ContextInfo | null | undefined): { title: string; detail: string } {
  const chunks = ctx?.chunks ?? [];
  if (chunks.length === 0) {
    return { title: 'Flint: the last suggestion used only the current file (no repository context).', detail: '' };
  }
  const files = ctx?.files ?? [];
  return {
    title: `Flint: the last suggestion's prompt held ${chunks.length} chunk(s) from ${files.length} file(s).`,
    detail: chunks.join('\n'),
  };
}

/** The list's placeholder: the server's note (alternatives coming, or the model has no other suggestion). */
export function pickerStatus(r: { note?: string; complete?: boolean }): string {
  const choose = 'Choose a variant to insert (latency · source)';
  return r.note ? `${choose} · Flint: ${r.note}` : choose;
}
