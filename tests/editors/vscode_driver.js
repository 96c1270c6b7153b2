// Drives real VS Code (code-server) in headless Chromium with playwright-core, as a person would:
// open a Python file, type, wait for Flint's ghost text, accept it with Tab, run "Flint: Pick Variant"
// and choose the second variant, read the status bar. Prints one JSON line with what it saw.
//
//   node vscode_driver.js '{"url": ..., "workspace": ..., "artifacts": ..., "chromium": ..., "timeoutMs": ...}'
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const cfg = JSON.parse(process.argv[2]);
const out = { steps: [] };
const shot = async (page, name) => {
  const file = path.join(cfg.artifacts, `${name}.png`);
  await page.screenshot({ path: file }).catch(() => undefined);
  out.steps.push(name);
};
const norm = (s) => (s || '').replace(/\u00a0/g, ' ');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(fn, timeoutMs, what, page) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) {
      if (page) await shot(page, `timeout-${what.replace(/\W+/g, '-')}`);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(100);
  }
}

async function statusText(page) {
  const items = page.locator('.statusbar .right-items .statusbar-item', { hasText: 'Flint' });
  if ((await items.count()) === 0) return null;
  return norm(await items.first().innerText()).trim();
}

async function ghostText(page) {
  // First line: inline decoration after the cursor; further lines: the ghost view zone.
  return page.evaluate(() => {
    const ed = document.querySelector('.editor-instance .monaco-editor') || document.querySelector('.monaco-editor');
    if (!ed) return '';
    const inline = [...ed.querySelectorAll('.ghost-text-decoration')].map((e) => e.textContent).join('');
    const lines = [...ed.querySelectorAll('.ghost-text .view-line')].map((e) => e.textContent);
    return [inline, ...lines].join('\n').replace(/\u00a0/g, ' ').replace(/\n+$/, '');
  });
}

async function openFile(page, name) {
  await page.keyboard.press('Control+P');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 20000 });
  await page.keyboard.type(name, { delay: 20 });
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
  await row.waitFor({ timeout: 20000 });
  await sleep(300); // let the list settle (recently opened files move around)
  await row.click();
  await page.locator(`.tab[data-resource-name="${name}"], .tab:has-text("${name}")`).first().waitFor({ timeout: 20000 });
  await page.locator('.editor-instance .monaco-editor .view-lines').first().click();
  await sleep(300);
}

async function save(page, file, expectFn) {
  // Ctrl+S right after a QuickPick closes can land before focus is back in the editor: press it again
  // (after Escape and a click on the file's tab) until the file on disk holds the expected text.
  const read = () => { const t = fs.readFileSync(file, 'utf8'); return expectFn(t) ? t : null; };
  for (let attempt = 0; attempt < 4; attempt++) {
    if (attempt > 0) {
      await page.keyboard.press('Escape');
      await page.locator('.tabs-container .tab', { hasText: path.basename(file) }).first().click().catch(() => {});
      await sleep(200);
    }
    await page.keyboard.press('Control+S');
    const t0 = Date.now();
    while (Date.now() - t0 < 3000) {
      const text = read();
      if (text) return text;
      await sleep(100);
    }
  }
  return waitFor(async () => read(), 100, `saved ${path.basename(file)}`, page);
}

async function runCommand(page, title) {
  await page.keyboard.press('Control+Shift+P');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 20000 });
  await page.keyboard.type(title, { delay: 10 });
  await waitFor(async () => (await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).count()) > 0, 20000, `command ${title}`, page);
  await page.keyboard.press('Enter');
}

async function statusClick(page) {
  await page.locator('.statusbar .right-items .statusbar-item', { hasText: 'Flint' }).first().click();
  await page.locator('.quick-input-widget .quick-input-list .monaco-list-row').first().waitFor({ timeout: 20000 });
  await sleep(200);
}

async function quickPickLabels(page) {
  const rows = page.locator('.quick-input-widget .quick-input-list .monaco-list-row .label-name');
  const out = [];
  for (let i = 0; i < (await rows.count()); i++) out.push(norm(await rows.nth(i).innerText()).trim());
  return out;
}

async function pickRow(page, text) {
  const row = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: text }).first();
  await row.waitFor({ timeout: 20000 });
  await row.click();
}

// Issue 15's switches, as a person uses them: the API key command, the status-bar menu, snooze and
// resume, a disabled language and an excluded file.
async function switches(page) {
  // 1. Flint: Set Remote API Key (a password input box).
  await runCommand(page, 'Flint: Set Remote API Key');
  await page.locator('.quick-input-widget input[type="password"]').waitFor({ state: 'visible', timeout: 20000 });
  await page.keyboard.type(cfg.apiKey, { delay: 5 });
  await page.keyboard.press('Enter');
  await sleep(1500);
  // 2. The status-bar menu.
  await statusClick(page);
  out.menu = await quickPickLabels(page);
  await shot(page, '6-menu');
  // 3. Snooze from the menu: 5 minutes.
  await pickRow(page, 'Snooze');
  await pickRow(page, '5 minutes');
  await waitFor(async () => /snoozed/.test((await statusText(page)) || ''), 20000, 'snoozed status', page);
  out.statusSnoozed = await statusText(page);
  await shot(page, '7-snoozed');
  // No suggestion while snoozed.
  await openFile(page, 'add.py');
  await page.keyboard.press('Control+End');
  await page.keyboard.press('Enter');
  await page.keyboard.type('x = ', { delay: 30 });
  await sleep(2500);
  out.ghostWhileSnoozed = await ghostText(page);
  // 4. Resume from the menu: suggestions come back.
  await statusClick(page);
  out.menuSnoozed = await quickPickLabels(page);
  await pickRow(page, 'Resume now');
  await waitFor(async () => !/snoozed/.test((await statusText(page)) || 'snoozed'), 20000, 'resumed status', page);
  out.statusResumed = await statusText(page);
  await page.locator('.editor-instance .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type('f', { delay: 30 });
  out.ghostAfterResume = await waitFor(async () => (await ghostText(page)).trim(), 20000, 'ghost text after resume', page);
  // 5. A disabled language and an excluded file.
  await openFile(page, 'notes.md');
  await waitFor(async () => /off/.test((await statusText(page)) || ''), 20000, 'Flint off for markdown', page);
  out.statusMarkdown = await statusText(page);
  await shot(page, '8-markdown');
  await openFile(page, 'secrets.pem');
  await waitFor(async () => /excluded/.test((await statusText(page)) || ''), 20000, 'Flint off for an excluded file', page);
  out.statusExcluded = await statusText(page);
}

async function freshPick(page) {
  await openFile(page, 'fresh.py');
  await page.keyboard.press('Control+End');
  const t0 = Date.now();
  await runCommand(page, 'Flint: Pick Variant');
  const rows = page.locator('.quick-input-list .monaco-list-row', { has: page.locator('.label-description', { hasText: /^#\d/ }) });
  const placeholder = async () => (await page.locator('.quick-input-box input').first().getAttribute('placeholder').catch(() => '')) || '';
  await waitFor(async () => (await rows.count()) >= 3 || /agree/.test(await placeholder()), cfg.timeoutMs,
    'three variants (or the server saying there are no others) in the QuickPick', page);
  out.freshPickMs = Date.now() - t0;
  await sleep(200);
  out.freshVariants = [];
  for (let i = 0; i < (await rows.count()); i++) {
    const r = rows.nth(i);
    const label = norm(await r.locator('.label-name').first().innerText().catch(() => ''));
    const description = norm(await r.locator('.label-description').first().innerText().catch(() => ''));
    const whole = norm(await r.innerText().catch(() => ''));
    // the row's detail line (the variant's next lines), without the label and the latency
    out.freshVariants.push({ label, description, detail: whole.replace(label, '').replace(description, '').trim() });
  }
  out.freshPlaceholder = await placeholder();
  await shot(page, '3b-fresh-pick');
  await page.keyboard.press('Escape');
  await sleep(300);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text().slice(0, 300)); });
  try {
    await page.goto(`${cfg.url}/?folder=${encodeURIComponent(cfg.workspace)}`, { timeout: 60000 });
    await page.locator('.monaco-workbench').waitFor({ timeout: 90000 });
    await waitFor(() => statusText(page), 60000, 'the Flint status bar item', page);
    out.statusAtStart = await statusText(page);
    await shot(page, '0-workbench');
    // The status bar says "starting"/"loading" until the model is in memory.
    await waitFor(async () => !/starting|loading/.test((await statusText(page)) || 'starting'), cfg.timeoutMs, 'Flint ready', page);
    out.statusReady = await statusText(page);
    // the next-edit scenarios (vscode_next_edit.js), each a run of its own
    const flows = require('./vscode_next_edit.js')({ cfg, out, shot, norm, sleep, waitFor, openFile, save });
    if (flows[cfg.scenario]) {
      await flows[cfg.scenario](page);
      out.ok = true;
      return;
    }

    // 1. Type in add.py and wait for ghost text from the server.
    await openFile(page, 'add.py');
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('End'); // end of the `def` line
    await page.keyboard.press('Enter'); // new indented line in the function body
    const t0 = Date.now();
    out.ghost = await waitFor(async () => {
      const g = await ghostText(page);
      return g.trim() ? g : null;
    }, cfg.timeoutMs, 'ghost text', page);
    out.ghostAfterMs = Date.now() - t0;
    await sleep(200);
    out.ghost = await ghostText(page); // settled
    await shot(page, '1-ghost-text');

    // 2. Tab accepts it: the saved file holds the suggestion.
    await page.keyboard.press('Tab');
    await sleep(300);
    const firstGhostLine = out.ghost.split('\n')[0].trim();
    out.afterTab = await save(page, path.join(cfg.workspace, 'add.py'), (t) => t.includes(firstGhostLine));
    await shot(page, '2-accepted');

    // 3. Flint: Pick Variant in pick.py, choose the second variant.
    await openFile(page, 'pick.py');
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    await waitFor(async () => (await ghostText(page)).trim(), cfg.timeoutMs, 'ghost text in pick.py', page);
    await runCommand(page, 'Flint: Pick Variant');
    // Wait for Flint's QuickPick itself (the command palette's rows are still there at first).
    const rows = page.locator('.quick-input-list .monaco-list-row', { has: page.locator('.label-description', { hasText: /^#\d/ }) });
    await waitFor(async () => (await rows.count()) >= 2, cfg.timeoutMs, 'two variants in the QuickPick', page);
    await sleep(200);
    out.variants = [];
    for (let i = 0; i < (await rows.count()); i++) {
      const r = rows.nth(i);
      out.variants.push({
        label: norm(await r.locator('.label-name').first().innerText().catch(() => '')),
        description: norm(await r.locator('.label-description').first().innerText().catch(() => '')),
      });
    }
    await shot(page, '3-pick-variant');
    out.quickPickTitle = norm(await page.locator('.quick-input-title').first().innerText().catch(() => ''));
    await rows.nth(1).click(); // the second variant
    const picked = out.variants[1].label.replace(/ \(\+\d+ lines?\)$/, '').trim();
    out.picked = picked;
    out.afterPick = await save(page, path.join(cfg.workspace, 'pick.py'), (t) => t.includes(picked));
    await shot(page, '4-picked');

    // 3b. Pick Variant at a fresh spot (issue 34): a body nobody asked about yet, the list kept open until
    // it holds three items or the server says there is no other suggestion.
    if (cfg.freshPick) await freshPick(page);

    // 4. Status bar: state and the last suggestion's latency.
    out.status = await statusText(page);
    const m = /([\d.]+) ms/.exec(out.status || '');
    out.statusLatencyMs = m ? Number(m[1]) : null;
    const tip = page.locator('.statusbar .right-items .statusbar-item', { hasText: 'Flint' }).first();
    out.statusAria = await tip.getAttribute('aria-label').catch(() => null);
    await shot(page, '5-status-bar');
    if (cfg.switches) await switches(page);
    out.ok = true;
  } catch (err) {
    out.ok = false;
    out.error = String(err && err.stack ? err.stack : err);
    await shot(page, 'error');
  } finally {
    out.consoleErrors = consoleErrors.slice(0, 20);
    await browser.close();
    process.stdout.write(JSON.stringify(out) + '\n');
  }
})();
