// The extension stays split by concern (extension.ts only wires the parts): no source file over 400
// lines, no function over 60. `npm test` after `npm run compile`; reads the sources in src/.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'fs';
import * as path from 'path';
import * as ts from 'typescript';

const SRC = path.join(__dirname, '..', '..', 'src');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;

function sources(): string[] {
  return fs.readdirSync(SRC).filter((f) => f.endsWith('.ts')).map((f) => path.join(SRC, f));
}

/** Every function in a file (declarations, methods, constructors, arrows) with its length in lines. */
function functionLengths(file: string): { name: string; lines: number }[] {
  const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const out: { name: string; lines: number }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = 'name' in node && node.name ? node.name.getText(sf) : `(anonymous, line ${first + 1})`;
      out.push({ name: `${path.basename(file)}: ${name}`, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

test('the sources are there', () => {
  const names = sources().map((f) => path.basename(f));
  for (const f of ['extension.ts', 'server.ts', 'settings.ts', 'status.ts', 'completions.ts', 'variants.ts', 'cursor.ts']) {
    assert.ok(names.includes(f), f);
  }
});

test(`no source file over ${MAX_FILE_LINES} lines`, () => {
  for (const f of sources()) {
    const text = fs.readFileSync(f, 'utf8');
    const n = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    assert.ok(n <= MAX_FILE_LINES, `${path.basename(f)}: ${n} lines`);
  }
});

test(`no function over ${MAX_FUNCTION_LINES} lines`, () => {
  const long = sources()
    .flatMap(functionLengths)
    .filter((f) => f.lines > MAX_FUNCTION_LINES);
  assert.deepEqual(long, []);
});
