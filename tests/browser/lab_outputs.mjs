// The outputs a notebook run left, as JupyterLab shows them: JupyterLab's own output area,
// renderers, sanitizer and light theme (npm, pinned in package-lock.json; bundled here with
// esbuild from lab/entry.js) in the same Chromium: how the Notebook run's outputs look in
// JupyterLab, trusted and not (the application itself runs in test_jupyterlab.py).
//
// Each code cell's outputs are rendered as trusted (what the session that ran them sees) and the
// training cell's once more as not trusted (a notebook opened from elsewhere: JupyterLab
// sanitizes its HTML). run_notebook.mjs calls checkInJupyterLab after the Notebook run.

import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

const HERE = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

// JupyterLab's stylesheets import each other as webpack does: url('~package/file.css').
const tildeImports = {
  name: 'tilde-imports',
  setup(build) {
    build.onResolve({ filter: /^~/ }, (args) => ({ path: require.resolve(args.path.slice(1)) }));
  },
};

async function bundle(dir) {
  mkdirSync(dir, { recursive: true });
  await esbuild.build({
    entryPoints: [join(HERE, 'lab', 'entry.js')],
    bundle: true,
    outfile: join(dir, 'lab.js'),
    logLevel: 'error',
    plugins: [tildeImports],
    loader: { '.svg': 'text', '.woff': 'dataurl', '.woff2': 'dataurl', '.ttf': 'dataurl', '.png': 'dataurl',
              '.gif': 'dataurl' },
  });
  const page = join(dir, 'index.html');
  writeFileSync(page, '<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="lab.css">' +
    '<script src="lab.js"></script><style>body{margin:16px;font-family:var(--jp-ui-font-family);' +
    'background:var(--jp-layout-color0)} h3{font:600 13px var(--jp-ui-font-family);margin:16px 0 4px}</style>' +
    '</head><body></body></html>');
  return pathToFileURL(page).href;
}

// In the page: renders the cells, then reads back what the checks need.
function renderAndRead(cells) {
  const section = (title, outputs, trusted) => {
    const h = document.createElement('h3');
    h.textContent = title;
    const host = document.createElement('div');
    document.body.append(h, host);
    window.taasRenderOutputs(host, outputs, trusted);
    return host;
  };
  const hosts = cells.map((c, i) => section(`In [${i + 1}] (trusted)`, c.outputs, true));
  const training = cells.findIndex((c) => /\bfit\(/.test(c.source));
  const untrusted = training >= 0 ? section(`In [${training + 1}] (not trusted)`, cells[training].outputs, false) : null;
  return new Promise((resolve) => setTimeout(() => {
    const all = document.body;
    const t = training >= 0 ? hosts[training] : null;
    const display = t && t.querySelector('div.taas-training');
    const img = display && display.querySelector('img.taas-chart');
    const box = img ? img.getBoundingClientRect() : null;
    const progress = display && display.querySelector('progress.taas-progress');
    const layer = all.querySelector('table.taas-model tbody tr td:nth-child(2)');
    const caption = (sel) => (all.querySelector(`${sel} caption`) || {}).textContent || null;
    const u = untrusted && untrusted.querySelector('div.taas-training');
    const uimg = u && u.querySelector('img.taas-chart');
    resolve({
      errors: all.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"], .jp-OutputArea-output.jp-mod-error, ' +
                                   '[data-mime-type="application/vnd.jupyter.error"]').length,
      mime: display ? display.closest('[data-mime-type]').getAttribute('data-mime-type') : null,
      state: display ? display.getAttribute('data-state') : null,
      progress: progress ? { value: progress.value, max: progress.max, width: progress.getBoundingClientRect().width } : null,
      chart: box ? { width: box.width, height: box.height, natural: img.naturalWidth, complete: img.complete } : null,
      rows: display ? display.querySelectorAll('table.taas-epochs tbody tr').length : 0,
      summary: display ? (display.querySelector('div.taas-summary') || {}).innerText || null : null,
      layerAlign: layer ? getComputedStyle(layer).textAlign : null,
      modelCaption: caption('table.taas-model'),
      historyCaption: caption('table.taas-epochs'),
      evaluationCaption: caption('table.taas-evaluation'),
      untrustedText: u ? u.innerText : null,
      untrustedChart: uimg ? { src: (uimg.getAttribute('src') || '').slice(0, 26), natural: uimg.naturalWidth,
                               complete: uimg.complete } : null,
    });
  }, 500));
}

// notebook: the nbformat JSON of the run; check(ok, what, detail) and log(msg) as the driver's.
export async function checkInJupyterLab(context, notebook, dir, screenshotFile, check, log) {
  log("JupyterLab's output area (@jupyterlab/outputarea, its renderers, sanitizer and light theme)");
  const url = await bundle(dir);
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  try {
    await page.goto(url, { waitUntil: 'load', timeout: 30000 });
    const cells = notebook.cells.filter((c) => c.cell_type === 'code')
      .map((c) => ({ source: [].concat(c.source).join(''), outputs: c.outputs }));
    const r = await page.evaluate(renderAndRead, cells);
    check(r.errors === 0, 'JupyterLab: no error or stderr output', `${r.errors}`);
    check(r.mime === 'text/html' && r.state === 'done', 'JupyterLab: the training display is rendered as HTML, done',
          `${r.mime}, ${r.state}`);
    const p = r.progress;
    check(p && p.max > 0 && p.value === p.max && p.width > 0, 'JupyterLab: the bar at 100 %',
          p ? `value ${p.value}, max ${p.max}, ${Math.round(p.width)} px wide` : 'missing');
    const c = r.chart;
    check(c && c.complete && c.natural > 0 && c.width > 0 && c.height > 0, 'JupyterLab: the chart is drawn',
          c ? `${c.width}×${c.height} px` : 'missing');
    check(r.rows >= 1 && /^done after /.test(r.summary || ''), 'JupyterLab: the epochs\' table and the summary',
          `${r.rows} row(s); ${r.summary}`);
    check(r.layerAlign === 'left' && /^Sequential: /.test(r.modelCaption || ''),
          'JupyterLab: the model summary\'s caption, its layers read from the left',
          `${r.modelCaption}; Layer cells text-align ${r.layerAlign}`);
    check(/^History \(\d+ epochs?\)$/.test(r.historyCaption || '') && r.evaluationCaption === 'Evaluation',
          'JupyterLab: the History and the Evaluation under their captions', `${r.historyCaption}; ${r.evaluationCaption}`);
    // JupyterLab's sanitizer keeps allowed inline styles and data: images (Notebook's drops
    // both): the chart is either drawn whole or gone whole, never its labels' text
    const u = r.untrustedText || '';
    const uc = r.untrustedChart;
    const whole = uc && uc.complete && uc.natural > 0 && uc.src.startsWith('data:image/svg+xml');
    check(/100%/.test(u) && /val accuracy/.test(u) && /done after/.test(u) && !u.includes('—') && !/\d%\d/.test(u) &&
          (whole || !uc || !uc.src.startsWith('data:')),
          'JupyterLab, not trusted: bar, table and summary, no chart text left',
          `chart ${whole ? 'drawn' : 'left out'}; ${u.replace(/\s+/g, ' ').slice(0, 100)}`);
    check(pageErrors.length === 0, 'JupyterLab: no uncaught JavaScript error', pageErrors.join('; ') || 'none');
  } finally {
    try {
      await page.screenshot({ path: screenshotFile, fullPage: true });
      log(`screenshot: ${screenshotFile}`);
    } finally {
      await page.close();
    }
  }
}
