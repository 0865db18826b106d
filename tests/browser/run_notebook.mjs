// Drives Jupyter Notebook (classic) in Debian's Chromium through playwright-core, as a user
// would: opens a notebook, picks the taas kernel in Kernel → Change kernel, runs Cell → Run All,
// waits until every cell has run, checks what the page shows (the training display of
// docs/notebook.md "Training", no error output anywhere, the Evaluation) and saves a full-page
// screenshot; then renders the run's outputs in JupyterLab's output area (lab_outputs.mjs) and
// checks them there. tests/browser/test_browser.py starts the notebook server and runs this.
//
//   node run_notebook.mjs --url URL --screenshot FILE --lab-screenshot FILE --tmp DIR
//                         [--timeout SECONDS] [--chromium PATH]
//
// URL is the notebook's page with the server's token (http://127.0.0.1:PORT/notebooks/NAME?token=T);
// Chromium's profile is a new empty folder under DIR, removed at the end. Prints one line per
// check; exits 0 when every check passed, 1 when one failed or the run did not finish, 2 on bad
// usage. The screenshot is taken whatever happened, once the page is open.

import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { checkInJupyterLab } from './lab_outputs.mjs';

const usage = 'usage: node run_notebook.mjs --url URL --screenshot FILE --lab-screenshot FILE --tmp DIR ' +
              '[--timeout SECONDS] [--chromium PATH]';
let opts;
try {
  opts = parseArgs({
    options: {
      url: { type: 'string' },
      screenshot: { type: 'string' },
      'lab-screenshot': { type: 'string' },
      tmp: { type: 'string' },
      timeout: { type: 'string', default: '600' },
      chromium: { type: 'string', default: '/usr/bin/chromium' },
    },
  }).values;
} catch (e) {
  console.error(`${e.message}\n${usage}`);
  process.exit(2);
}
if (!opts.url || !opts.screenshot || !opts['lab-screenshot'] || !opts.tmp || !(Number(opts.timeout) > 0)) {
  console.error(usage);
  process.exit(2);
}
const runTimeoutMs = Number(opts.timeout) * 1000;

const failures = [];
function check(ok, what, detail = '') {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
  if (!ok) failures.push(what);
  return ok;
}
const log = (msg) => console.log(`---- ${msg}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls fn (run in the page) until accept(its value) is true; returns that value. Fails after ms.
async function waitFor(page, fn, accept, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await page.evaluate(fn);
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await sleep(250);
  }
}

// The kernel's state as the page shows it: the indicator's icon and name, and any modal
// dialog (a dead or restarting kernel, a failed save).
function kernelState() {
  const icon = document.querySelector('#kernel_indicator_icon');
  const modal = document.querySelector('.modal.in');
  const logo = document.querySelector('#kernel_logo_widget img.current_kernel_logo');
  const nb = window.Jupyter && window.Jupyter.notebook;
  return {
    loaded: Boolean(nb && nb._fully_loaded),
    kernel: nb && nb.kernel ? nb.kernel.name : null,
    indicator: (document.querySelector('#kernel_indicator .kernel_indicator_name') || {}).textContent || '',
    idle: Boolean(icon && icon.classList.contains('kernel_idle_icon')),
    dead: Boolean(icon && (icon.classList.contains('kernel_dead_icon') ||
                           icon.classList.contains('kernel_disconnected_icon'))),
    modal: modal ? modal.innerText.replace(/\s+/g, ' ').trim() : null,
    logo: Boolean(logo && /\/kernelspecs\/taas\/logo-/.test(logo.src) && logo.offsetWidth > 0 && logo.naturalWidth > 1),
  };
}

// Every code cell as the page shows it: its prompt, its outputs (the notebook's model, which
// keeps each error output's ename and the result's text/plain), what its output area shows and
// the table its result (Out[n]) shows, as its header cells and first row.
function codeCells() {
  return window.Jupyter.notebook.get_cells().filter((c) => c.cell_type === 'code').map((c) => {
    const el = c.element[0];
    const area = el.querySelector('.output_wrapper');
    const result = c.output_area.outputs.find((o) => o.output_type === 'execute_result');
    const table = el.querySelector('.output_result table');
    const texts = (cells) => Array.from(cells).map((e) => e.innerText.trim());
    return {
      resultPlain: result ? [].concat(result.data['text/plain'] || '').join('') : null,
      resultTable: table ? { headers: texts(table.querySelectorAll('thead th')),
                             row: texts((table.querySelector('tbody tr') || table).querySelectorAll('td')) } : null,
      source: c.get_text(),
      prompt: ((el.querySelector('.input_prompt') || {}).innerText || '').replace(/\s+/g, ' ').trim(),
      running: el.classList.contains('running'),
      outputTypes: c.output_area.outputs.map((o) => o.output_type),
      enames: c.output_area.outputs.filter((o) => o.output_type === 'error').map((o) => o.ename),
      errorAreas: el.querySelectorAll('.output_error').length,
      stderr: Array.from(el.querySelectorAll('.output_stderr')).map((e) => e.innerText).join(''),
      text: area ? area.innerText : '',
    };
  });
}

// The training display (docs/notebook.md "Training") in the code cell whose source calls fit.
function trainingDisplay() {
  const cell = window.Jupyter.notebook.get_cells().find((c) => c.cell_type === 'code' && /\bfit\(/.test(c.get_text()));
  if (!cell) return null;
  const root = cell.element[0].querySelector('.output_area div.taas-training');
  if (!root) return { found: false };
  const progress = root.querySelector('progress.taas-progress');
  // the chart is an img of an SVG (a data: URI): drawn when the browser decoded it
  const img = root.querySelector('img.taas-chart');
  const box = img ? img.getBoundingClientRect() : null;
  const src = img ? img.getAttribute('src') || '' : '';
  const b64 = src.startsWith('data:image/svg+xml;base64,') ? src.slice(src.indexOf(',') + 1) : null;
  const svg = b64 ? new DOMParser().parseFromString(
    new TextDecoder().decode(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0))), 'image/svg+xml') : null;
  const path = (cls) => {
    const p = svg && svg.querySelector(`path.${cls}`);
    return p ? p.getAttribute('d') || '' : null;
  };
  // the same output as Notebook shows it in a notebook that is not trusted: its HTML through
  // Notebook's own sanitizer (no styles, no SVG, no data: src)
  const html = cell.output_area.outputs.filter((o) => o.data && o.data['text/html'])
    .map((o) => o.data['text/html']).find((h) => h.includes('taas-training'));
  const untrusted = document.createElement('div');
  if (html) untrusted.append(...window.require('base/js/security').sanitize_html_and_parse(html));
  document.body.append(untrusted);
  const untrustedText = untrusted.innerText;
  untrusted.remove();
  const table = root.querySelector('table.taas-epochs');
  return {
    found: true,
    displays: cell.element[0].querySelectorAll('.output_area div.taas-training').length,
    state: root.getAttribute('data-state'),
    progress: progress ? { value: progress.value, max: progress.max } : null,
    rows: table ? Array.from(table.querySelectorAll('tr')).filter((r) => r.querySelector('td')).length : null,
    chart: box ? { width: box.width, height: box.height, natural: img.naturalWidth, complete: img.complete } : null,
    untrustedText,
    trainLoss: path('taas-train-loss'),
    valLoss: path('taas-val-loss'),
    valAccuracy: path('taas-val-accuracy'),
    summary: (root.querySelector('div.taas-summary') || {}).innerText || null,
  };
}

async function pickKernel(page) {
  log('Kernel → Change kernel → taas');
  await page.click('#kernellink');
  await page.hover('#menu-change-kernel');
  await page.click('#kernel-submenu-taas > a');
  // the kernel Notebook started from the metadata is already taas, so nothing restarts; a
  // different one would be replaced by a new taas kernel here
  const state = await waitFor(page, kernelState, (s) => s.idle && s.kernel === 'taas', 60000, 'an idle taas kernel');
  check(state.kernel === 'taas' && state.indicator === 'taas', 'the notebook runs on the taas kernel',
        `kernel ${state.kernel}, indicator "${state.indicator}"`);
  check(state.logo, 'the kernel\'s logo is shown');
}

async function runAll(page) {
  log('Cell → Run All');
  await page.click('#celllink');
  await page.click('#run_all_cells > a');
  // wait until every code cell shows an execution count and the kernel is idle; stop at once
  // on an error output, a dead kernel or a dialog
  const t0 = Date.now();
  const deadline = t0 + runTimeoutMs;
  let cells;
  for (;;) {
    const s = await page.evaluate(kernelState);
    cells = await page.evaluate(codeCells);
    const failed = cells.find((c) => c.enames.length || c.errorAreas);
    if (failed) throw new Error(`a cell failed: ${failed.enames.join(', ')}\n${failed.text}`);
    if (s.dead) throw new Error('the kernel died');
    if (s.modal) throw new Error(`a dialog opened: ${s.modal}`);
    if (s.idle && cells.every((c) => /^In\s*\[\d+\]/.test(c.prompt) && !c.running)) break;
    if (Date.now() > deadline) {
      throw new Error(`not done after ${opts.timeout} s; prompts: ${cells.map((c) => c.prompt).join(' ')}`);
    }
    await sleep(500);
  }
  log(`every cell ran in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return cells;
}

function checkOutputs(cells, training) {
  const prompts = cells.map((c) => c.prompt);
  check(prompts.every((p, i) => p === `In [${i + 1}]:`), 'every code cell ran once, in order', prompts.join(' '));
  const errors = cells.filter((c) => c.enames.length || c.errorAreas);
  check(errors.length === 0, 'no error output (.output_error, an ename)',
        errors.map((c) => c.enames.join(',') || 'error area').join('; ') || 'none');
  const stderr = cells.map((c) => c.stderr).join('');
  check(stderr === '', 'nothing written to stderr', stderr.slice(0, 200) || 'none');

  check(training && training.found, 'the training cell shows div.taas-training');
  if (!training || !training.found) return;
  check(training.displays === 1, 'one training display, updated in place', `${training.displays}`);
  check(training.state === 'done', 'data-state="done"', training.state);
  const p = training.progress;
  check(p && p.max > 0 && p.value === p.max, 'progress.taas-progress at 100 %', p ? `value ${p.value}, max ${p.max}` : 'missing');
  check(training.rows >= 1, 'table.taas-epochs has a row per epoch', `${training.rows} row(s)`);
  const c = training.chart;
  check(c && c.complete && c.natural > 0 && c.width > 0 && c.height > 0, 'img.taas-chart (its SVG) is drawn',
        c ? `${c.width}×${c.height} px, natural width ${c.natural}` : 'missing');
  check(Boolean(training.trainLoss), 'path.taas-train-loss has a d', training.trainLoss || 'missing or empty');
  check(training.valLoss !== null && training.valAccuracy !== null, 'path.taas-val-loss and path.taas-val-accuracy exist');
  check(/^done after .*; best val accuracy 0\.\d+ \(epoch \d+\); the trained weights are in net$/.test(training.summary || ''),
        'div.taas-summary says done', training.summary || 'missing');
  // not trusted: the bar's line, the table and the summary read as they are; the chart is gone
  // whole (inline SVG would leave its labels' text run together: "0.7585.0%0.56...")
  const u = training.untrustedText || '';
  check(/100%/.test(u) && /val accuracy/.test(u) && /done after/.test(u) && !u.includes('—') && !/\d%\d/.test(u),
        'the display in a notebook not trusted (Notebook\'s sanitizer): bar, table and summary, no chart text left',
        u.replace(/\s+/g, ' ').slice(0, 160));

  // a result's column, as its table on the page shows it
  const column = (cell, name) => {
    const t = cell && cell.resultTable;
    const i = t ? t.headers.indexOf(name) : -1;
    return i >= 0 ? t.row[i] : undefined;
  };
  const train = cells.find((c) => /\bfit\(/.test(c.source));
  check(/^History \(\d+ epochs?\)/.test(train.resultPlain || '') && /^\d+$/.test(column(train, 'epoch')),
        'the training cell\'s result is a History, shown as the epochs\' table',
        `${(train.resultPlain || 'no result').split('\n')[0]}; epoch ${column(train, 'epoch')}`);
  const evaluation = cells.find((c) => /\bevaluate\(/.test(c.source));
  const plain = (evaluation && evaluation.resultPlain) || 'no result';
  check(/^Evaluation\(loss=[0-9.]+, accuracy=0\.\d+, samples=\d+\)$/.test(plain) &&
        /^0\.\d+$/.test(column(evaluation, 'accuracy')),
        'the evaluation cell\'s result is an Evaluation, its accuracy shown in a table',
        `${plain}; accuracy column ${column(evaluation, 'accuracy')}`);
}

// Notebook scrolls inside #site, so a full-page screenshot needs a viewport as tall as the page.
async function screenshot(page, file) {
  const height = await page.evaluate(() => {
    const site = document.querySelector('#site');
    if (site) site.scrollTop = 0;
    const header = document.querySelector('#header');
    return (header ? header.offsetHeight : 0) + (site ? site.scrollHeight : document.body.scrollHeight);
  });
  await page.setViewportSize({ width: 1280, height: Math.min(Math.max(height, 720), 16000) });
  await sleep(500); // Notebook re-lays out on resize
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot: ${file}`);
}

const profile = mkdtempSync(join(opts.tmp, 'chromium-profile-'));
let context;
let pageOpen = false;
let page;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = context.pages()[0] || await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  log(`open ${opts.url.replace(/token=[^&]+/, 'token=…')}`);
  await page.goto(opts.url, { waitUntil: 'load', timeout: 60000 });
  pageOpen = true;
  const state = await waitFor(page, kernelState, (s) => s.loaded && s.idle, 60000,
                              'the notebook to load and its kernel to be idle');
  check(true, 'the notebook page loaded and its kernel started', `kernel ${state.kernel}`);
  await pickKernel(page);
  const cells = await runAll(page);
  checkOutputs(cells, await page.evaluate(trainingDisplay));
  check(pageErrors.length === 0, 'no uncaught JavaScript error in the page', pageErrors.join('; ') || 'none');
  const notebook = await page.evaluate(() => window.Jupyter.notebook.toJSON());
  await checkInJupyterLab(context, notebook, join(opts.tmp, 'lab'), opts['lab-screenshot'], check, log);
} catch (e) {
  check(false, 'the notebook ran in the browser', e.message);
} finally {
  if (pageOpen) {
    try {
      await screenshot(page, opts.screenshot);
    } catch (e) {
      check(false, 'the screenshot', e.message);
    }
  }
  if (context) await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
if (!pageOpen) failures.push('the page never opened');
console.log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
