// Unit tests for the vscode-free helpers: `npm test` (node --test) after `npm run compile`.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as path from 'path';
import {
  encodedLength,
  percentile,
  readSettings,
  resolvePython,
  serverArgs,
  Stats,
  statusView,
  variantLabel,
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

test('settings are clamped and defaulted', () => {
  const s = readSettings({ get: <T>(k: string, d: T) => (({ maxVariants: 99, multiline: 'bogus', model: '' }) as any)[k] ?? d });
  assert.equal(s.maxVariants, 8);
  assert.equal(s.multiline, 'auto');
  assert.equal(s.model, 'qwen2.5-coder-0.5b');
  assert.equal(s.debounceMs, 0);
  assert.equal(s.enable, true);
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
});

test('status bar text', () => {
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
