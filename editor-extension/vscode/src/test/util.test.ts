// Unit tests for the vscode-free helpers: `npm test` (node --test) after `npm run compile`.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as path from 'path';
import * as fs from 'fs';
import {
  encodedLength,
  maskSecrets,
  parseSnooze,
  percentile,
  pickerStatus,
  readSettings,
  redact,
  serverSettingKeys,
  stderrLevel,
  resolvePython,
  serverArgs,
  Stats,
  statusView,
  variantLabel,
  whyText,
} from '../util';

test('pythonPath setting wins and expands ${workspaceFolder} and ~', () => {
  const r = resolvePython('${workspaceFolder}/env/bin/python', ['/ws'], () => false, 'linux');
  assert.equal(r.python, '/ws/env/bin/python');
  assert.match(resolvePython('~/py', [], () => false, 'linux').python, /\/py$/);
});

test('workspace .venv before venv before python3', () => {
  const seen = new Set([path.join('/b', 'venv', 'bin', 'python'), path.join('/b', '.venv', 'bin', 'python')]);
  assert.equal(resolvePython('', ['/a', '/b'], (p) => seen.has(p), 'linux').python, '/b/.venv/bin/python');
  assert.equal(resolvePython('', ['/a'], () => false, 'linux').python, 'python3');
  assert.equal(resolvePython('', ['C:\\w'], () => false, 'win32').python, 'python');
});

test('server command line', () => {
  assert.deepEqual(serverArgs(['--verbose', '']), ['-m', 'lsp_server.cli', 'serve', '--verbose']);
});

test('server settings: every flint.* property but the client-only ones, secrets from SecretStorage', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
  const keys = serverSettingKeys(pkg.contributes.configuration.properties);
  assert.ok(keys.includes('routing') && keys.includes('remoteUrl') && keys.includes('enable'), keys.join());
  for (const k of ['pythonPath', 'serverArgs', 'trace.server', 'disabledLanguages', 'exclude', 'remoteApiKey']) {
    assert.ok(!keys.includes(k), k);
  }
  const cfg = { get: <T>(k: string, d: T) => (({ routing: 'hybrid', enable: true }) as any)[k] ?? d };
  const s = readSettings(keys, cfg, { remoteApiKey: 'sk-1' });
  assert.equal(s.routing, 'hybrid');
  assert.equal(s.remoteApiKey, 'sk-1');
  assert.equal(s.enable, true);
  assert.equal(readSettings(keys, cfg, {}).remoteApiKey, null); // not set: the server uses $FLINT_REMOTE_API_KEY
  assert.equal(readSettings(keys, cfg, {}, true).enable, false); // snoozed
  assert.equal(maskSecrets(s).remoteApiKey, '***');
  assert.equal(s.remoteApiKey, 'sk-1');
});

test('server stderr lines keep their logging level', () => {
  assert.equal(stderrLevel('2026-11-23 10:00:00,123 lsp_server.server INFO model loaded', null), 'info');
  assert.equal(stderrLevel('2026-11-23 10:00:00,123 flint WARNING slow', 'info'), 'warn');
  assert.equal(stderrLevel('2026-11-23 10:00:00,123 flint DEBUG x', null), 'debug');
  assert.equal(stderrLevel('2026-11-23 10:00:00,123 flint ERROR boom', null), 'error');
  assert.equal(stderrLevel('Traceback (most recent call last):', 'info'), 'error');
  assert.equal(stderrLevel('  File "x.py", line 1', 'error'), 'error');
  assert.equal(stderrLevel('usage: flint [-h]', null), 'warn');
});

test('snooze minutes', () => {
  assert.equal(parseSnooze(' 15 '), 15);
  for (const bad of ['', '0', '-3', '1.5', 'abc', '1441']) assert.equal(typeof parseSnooze(bad), 'string', bad);
});

test('acceptedLength units', () => {
  assert.equal(encodedLength('a😀', 'utf-16'), 3);
  assert.equal(encodedLength('a😀', 'utf-8'), 5);
  assert.equal(encodedLength('a😀', 'utf-32'), 2);
});

test('variant rows show latency and source', () => {
  const v = variantLabel({ index: 1, insertText: '\n    return a + b\n', totalMs: 41.6, ttftMs: 7.25, source: 'model', tokens: 6 });
  assert.equal(v.label, 'return a + b (+2 lines)');
  assert.equal(v.description, '#2 · 42 ms · first token 7.3 ms · model · 6 tok');
  const remote = variantLabel({ index: 0, insertText: 'x', totalMs: 850, ttftMs: 300, source: 'model', backend: 'remote' });
  assert.equal(remote.description, '#1 · 850 ms · first token 300 ms · model · remote');
});

test('variants that cost no generation say so instead of a latency', () => {
  const d = (source: string) => variantLabel({ index: 0, insertText: 'x', totalMs: 0, ttftMs: 0, source, tokens: 3 }).description;
  assert.equal(d('memory'), '#1 · from cache (memory)');
  assert.equal(d('disk'), '#1 · from cache (disk)');
  assert.equal(d('type-through'), '#1 · typed through');
  assert.equal(d('model'), '#1 · latency not reported · model · 3 tok'); // never "0.0 ms"
});

test('status bar text', () => {
  const now = 1_000_000;
  assert.equal(statusView('ready', 5, 'model', 'm', '', { snoozedUntil: now + 14.5 * 60000, now }).text, '$(bell-slash) Flint snoozed 15 min');
  assert.equal(statusView('ready', 5, 'model', 'm', '', { snoozedUntil: now - 1, now }).text, '$(zap) Flint 5.0 ms');
  assert.equal(statusView('ready', 5, 'model', 'm', '', { offFor: 'markdown', now }).text, '$(circle-slash) Flint off (markdown)');
  assert.equal(statusView('ready', 42.4, 'model', 'm', '').text, '$(zap) Flint 42 ms');
  assert.equal(statusView('loading', null, null, 'm', '').text, '$(loading~spin) Flint loading');
  assert.equal(statusView('busy', 3.14, 'memory', 'm', '').text, '$(sync~spin) Flint 3.1 ms');
});

test('stats percentiles', () => {
  assert.equal(percentile([5, 1, 3, 2, 4], 50), 3);
  const s = new Stats();
  s.addServer(10, 'model');
  s.addServer(1, 'memory');
  s.suggestions = 2;
  s.accepted = 1;
  assert.match(s.summary(), /acceptance rate 50.0%/);
  assert.match(s.summary(), /sources: model 1, memory 1/);
});

test('secrets are masked in traces', () => {
  assert.equal(redact('{"remoteApiKey":"sk-123456"} sk-123456', ['sk-123456']), '{"remoteApiKey":"***"} ***');
  assert.equal(redact('a b', ['', 'ab']), 'a b'); // empty and too-short values are not masked
});

test('why this suggestion: one line per context chunk, or a plain statement when none', () => {
  const w = whyText({ files: ['pkg/a.py'], chunks: ['pkg/a.py:3 (import)', 'pkg/a.py:40 (open)'], digest: 'x' });
  assert.match(w.title, /2 chunk\(s\) from 1 file/);
  assert.equal(w.detail, 'pkg/a.py:3 (import)\npkg/a.py:40 (open)');
  assert.match(whyText(undefined).title, /only the current file/);
});

test('the picker says why its list is short: alternatives coming, or the model agrees', () => {
  const choose = 'Choose a variant to insert (latency · source)';
  assert.equal(pickerStatus({ complete: true }), choose);
  assert.equal(pickerStatus({ complete: false, note: 'item 1 ready; alternatives on their way' }),
    `${choose} · Flint: item 1 ready; alternatives on their way`);
  assert.match(pickerStatus({ complete: true, note: "the model's variants agree: no other suggestion here" }),
    /variants agree/);
});
