// examples/fashion_mnist.ipynb in the JupyterLab application (tests/browser/jupyterlab, built
// from JupyterLab's npm packages), driven in Debian's Chromium through playwright-core:
// the notebook opens on the taas kernel (its metadata names it), Run › Run All Cells runs it,
// and the page must show the training display at 100 % with its chart and table, the History
// and the Evaluation, and no error anywhere; then a running cell is stopped with the toolbar's
// interrupt button (the kernel lives on), Tab completes `Adade` and Shift+Tab shows
// Conv2d's signature. tests/browser/test_jupyterlab.py starts the server and runs this.
//
//   node run_lab.mjs --url URL --screenshot FILE --tmp DIR [--timeout S] [--chromium PATH]
//
// Prints a line per check; exits 0 when every check passed, 1 when one failed.

import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: o } = parseArgs({ options: {
  url: { type: 'string' }, screenshot: { type: 'string' }, tmp: { type: 'string' },
  timeout: { type: 'string', default: '400' }, chromium: { type: 'string', default: '/usr/bin/chromium' } } });
if (!o.url || !o.screenshot || !o.tmp) {
  console.error('usage: node run_lab.mjs --url URL --screenshot FILE --tmp DIR [--timeout S] [--chromium PATH]');
  process.exit(2);
}
const runMs = Number(o.timeout) * 1000;
const PROMPT = 60000;  // what the page must do at once, on a loaded machine
let failures = 0;
const log = (msg) => console.log(msg);
function check(ok, what, detail = '') {
  if (!ok) failures++;
  log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ` (${detail})` : ''}`);
  return ok;
}

// What the notebook's code cells show: prompt, error or stderr outputs, output text.
function codeCells() {
  return Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')).map((el) => ({
    prompt: (el.querySelector('.jp-InputPrompt') || {}).innerText || '',
    source: (el.querySelector('.CodeMirror') || {}).innerText || '',
    // JupyterLab shows an error's traceback and a stderr stream alike, with the stderr type
    errors: el.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]').length,
    text: (el.querySelector('.jp-Cell-outputArea') || {}).innerText || '',
  }));
}

// The training display (docs/notebook.md "Training") as JupyterLab shows it.
function trainingDisplay() {
  const cells = Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell'));
  const cell = cells.find((c) => c.querySelector('div.taas-training'));
  if (!cell) return { found: false };
  const root = cell.querySelector('div.taas-training');
  const progress = root.querySelector('progress.taas-progress');
  const img = root.querySelector('img.taas-chart');
  const box = img ? img.getBoundingClientRect() : null;
  const caption = (sel) => (document.querySelector(`.jp-NotebookPanel:not(.lm-mod-hidden) ${sel} caption`) || {}).textContent || null;
  return {
    found: true,
    displays: cell.querySelectorAll('div.taas-training').length,
    state: root.getAttribute('data-state'),
    progress: progress ? { value: progress.value, max: progress.max } : null,
    rows: root.querySelectorAll('table.taas-epochs tbody tr').length,
    chart: box ? { width: box.width, height: box.height, natural: img.naturalWidth, complete: img.complete } : null,
    summary: (root.querySelector('div.taas-summary') || {}).innerText || null,
    history: caption('table.taas-epochs'),
    evaluation: caption('table.taas-evaluation'),
  };
}

// Chromium's profile is a new folder under --tmp: a process naming it is this run's browser
const profile = mkdtempSync(join(o.tmp, 'chromium-profile-'));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: o.chromium, headless: true, viewport: { width: 1400, height: 1000 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = browser.pages()[0] || await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
const nb = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)');
const editorOf = (cell) => cell.locator('.CodeMirror').first();
try {
  await page.goto(o.url);
  await page.waitForSelector('#jp-menu-panel .lm-MenuBar-item', { timeout: PROMPT });
  await nb.locator('.jp-Cell').first().waitFor({ timeout: PROMPT });
  await nb.locator('.jp-Toolbar-kernelName:has-text("taas")').waitFor({ timeout: PROMPT });
  await nb.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').waitFor({ timeout: PROMPT });
  check(true, 'JupyterLab opened fashion_mnist.ipynb on the taas kernel');

  // Run › Run All Cells, as a user does
  await page.click('#jp-menu-panel .lm-MenuBar-item:has-text("Run")');
  await page.click('.lm-Menu:visible .lm-Menu-item[data-command="runmenu:run-all"]');
  const started = Date.now();
  let cells = [];
  for (;;) {  // until every code cell has its number, an error shows, or the time is up
    cells = await page.evaluate(codeCells);
    if (cells.some((c) => c.errors)) break;
    if (cells.length && cells.every((c) => /^\[\d+\]:$/.test(c.prompt.trim()))) break;
    if (Date.now() - started > runMs) break;
    await page.waitForTimeout(250);
  }
  log(`Run All took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  check(cells.length > 0 && cells.every((c, i) => c.prompt.trim() === `[${i + 1}]:`), 'every code cell ran once, in order',
        cells.map((c) => c.prompt.trim()).join(' '));
  const errors = cells.filter((c) => c.errors);
  check(errors.length === 0, 'no error output, nothing written to stderr',
        errors.map((c) => c.text.slice(0, 200)).join('; ') || 'none');
  const t = await page.evaluate(trainingDisplay);
  check(t.found && t.displays === 1, 'one training display (div.taas-training), updated in place', `${t.displays}`);
  check(t.state === 'done', 'data-state="done"', t.state);
  const p = t.progress;
  check(p && p.max > 0 && p.value === p.max, 'the bar at 100 %', p ? `value ${p.value}, max ${p.max}` : 'missing');
  check(t.rows >= 1, 'the epochs\' table', `${t.rows} row(s)`);
  const c = t.chart;
  check(c && c.complete && c.natural > 0 && c.width > 0 && c.height > 0, 'the chart is drawn',
        c ? `${Math.round(c.width)}×${Math.round(c.height)} px` : 'missing');
  check(/^done after .*; best val accuracy 0\.\d+ \(epoch \d+\); the trained weights are in net$/.test(t.summary || ''),
        'the summary line', t.summary || 'missing');
  check(/^History \(\d+ epochs?\)$/.test(t.history || ''), 'the History under its caption', t.history || 'missing');
  check(t.evaluation === 'Evaluation', 'the Evaluation under its caption', t.evaluation || 'missing');
  await nb.locator('div.taas-training').first().scrollIntoViewIfNeeded();
  await page.screenshot({ path: o.screenshot });
  log(`screenshot: ${o.screenshot}`);

  // a running cell stopped with the toolbar's interrupt button; the kernel goes on
  await page.keyboard.press('Escape');
  await nb.locator('.jp-Toolbar [data-command="notebook:insert-cell-below"]').click();
  const n = await nb.locator('.jp-CodeCell').count();
  const held = nb.locator('.jp-CodeCell').nth(n - 1);
  await editorOf(held).click();
  await page.keyboard.type('sleep(600)');
  await page.keyboard.press('Shift+Enter');
  await held.locator('.jp-InputPrompt:has-text("[*]")').waitFor({ timeout: PROMPT });
  await nb.locator('.jp-Toolbar [data-command="kernelmenu:interrupt"]').click();
  await held.locator('[data-mime-type="application/vnd.jupyter.stderr"]').first().waitFor({ timeout: PROMPT });
  const stopped = await held.locator('.jp-Cell-outputArea').innerText();
  check(/KeyboardInterrupt/.test(stopped), 'the toolbar\'s interrupt button stops a running cell', stopped.split('\n')[0]);
  const next = nb.locator('.jp-CodeCell').nth(n);
  await editorOf(next).click();
  await page.keyboard.type('40 + 2');
  await page.keyboard.press('Shift+Enter');
  await next.locator('.jp-OutputArea-output').first().waitFor({ timeout: PROMPT });
  check((await next.locator('.jp-OutputArea-output').first().innerText()).trim() === '42', 'the kernel lives on: 40 + 2 is 42');

  // Tab completes (one candidate: in place), Shift+Tab shows the kernel's inspection
  const comp = nb.locator('.jp-CodeCell').nth(n + 1);
  await editorOf(comp).click();
  await page.keyboard.type('Adade');
  await page.keyboard.press('Tab');
  await page.waitForFunction((i) => {
    const cell = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')[i];
    return cell && /Adadelta/.test(cell.querySelector('.CodeMirror').innerText);
  }, n + 1, { timeout: PROMPT });
  check(true, 'Tab after Adade completes Adadelta');
  await page.keyboard.press('Enter');
  await page.keyboard.type('Conv2d(');
  await page.keyboard.press('Shift+Tab');
  const tip = page.locator('.jp-Tooltip:visible');
  await tip.waitFor({ timeout: PROMPT });
  const tipText = (await tip.innerText()).trim();
  check(/Conv2d\(in_channels, out_channels, kernel_size/.test(tipText), 'Shift+Tab on Conv2d( shows its signature',
        tipText.split('\n')[0].slice(0, 100));
  check(pageErrors.length === 0, 'no uncaught JavaScript error', pageErrors.join('; ') || 'none');
} catch (e) {
  check(false, 'the page did what the test asked', e.message.split('\n')[0]);
  await page.screenshot({ path: join(o.tmp, 'failed.png') }).catch(() => {});
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
log(failures ? `${failures} check(s) failed` : 'every check passed');
process.exit(failures ? 1 : 0);
