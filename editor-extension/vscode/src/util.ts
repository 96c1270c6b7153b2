// Pure helpers (no `vscode` import) so they can be unit-tested with `node --test`.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

/** Settings the extension sends as initializationOptions / didChangeConfiguration (docs/protocol.md). */
export interface FlintSettings {
  enable: boolean;
  model: string;
  maxVariants: number;
  maxLines: number;
  multiline: 'auto' | 'always' | 'never';
  debounceMs: number;
  threads: number;
  cacheSizeMb: number;
}

/** Settings whose change needs a new server process (everything else is pushed live). */
export const RESTART_KEYS = ['pythonPath', 'serverArgs', 'model', 'threads'];

export interface SettingsSource {
  get<T>(key: string, fallback: T): T;
}

export function readSettings(cfg: SettingsSource): FlintSettings {
  const multiline = cfg.get<string>('multiline', 'auto');
  return {
    enable: cfg.get<boolean>('enable', true),
    model: cfg.get<string>('model', 'qwen2.5-coder-0.5b') || 'qwen2.5-coder-0.5b',
    maxVariants: clampInt(cfg.get<number>('maxVariants', 3), 1, 8, 3),
    maxLines: clampInt(cfg.get<number>('maxLines', 8), 1, 64, 8),
    multiline: multiline === 'always' || multiline === 'never' ? multiline : 'auto',
    debounceMs: clampInt(cfg.get<number>('debounceMs', 0), 0, 2000, 0),
    threads: clampInt(cfg.get<number>('threads', 2), 1, 256, 2),
    cacheSizeMb: clampInt(cfg.get<number>('cacheSizeMb', 256), 0, 1 << 20, 256),
  };
}

function clampInt(v: unknown, lo: number, hi: number, dflt: number): number {
  const n = typeof v === 'number' && Number.isFinite(v) ? Math.round(v) : dflt;
  return Math.min(hi, Math.max(lo, n));
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
}

export function variantLabel(v: VariantItem): { label: string; description: string; detail: string } {
  const lines = v.insertText.split(/\r?\n/);
  const firstIdx = lines.findIndex((l) => l.trim().length > 0);
  const first = firstIdx >= 0 ? lines[firstIdx].trim() : '(empty)';
  const more = lines.length > 1 ? ` (+${lines.length - 1} line${lines.length > 2 ? 's' : ''})` : '';
  const parts = [`#${v.index + 1}`, fmtMs(v.totalMs ?? null)];
  if (v.ttftMs !== null && v.ttftMs !== undefined) parts.push(`first token ${fmtMs(v.ttftMs)}`);
  parts.push(v.source || 'unknown source');
  if (v.tokens) parts.push(`${v.tokens} tok`);
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

export function statusView(
  state: ServerState,
  latencyMs: number | null,
  source: string | null,
  model: string,
  message: string,
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
  const text = `${icon[state]} Flint${word[state] ?? lat}`;
  const tip = [
    `Flint: ${state}${model ? ` (${model})` : ''}`,
    latencyMs !== null ? `last suggestion: ${fmtMs(latencyMs)}${source ? ` from ${source}` : ''}` : '',
    message,
    'Click for stats',
  ]
    .filter(Boolean)
    .join('\n');
  return { text, tooltip: tip };
}
