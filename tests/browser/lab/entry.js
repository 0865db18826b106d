// JupyterLab's own output rendering for the browser test: the output area, the rendermime
// registry with JupyterLab's standard renderers and sanitizer, and the light theme's styles,
// bundled by lab_outputs.mjs with esbuild. The page calls window.taasRenderOutputs.
import '@jupyterlab/theme-light-extension/style/variables.css';
import '@jupyterlab/theme-light-extension/style/theme.css';
import '@jupyterlab/rendermime/style/index.css';
import '@jupyterlab/outputarea/style/index.css';
import { Sanitizer } from '@jupyterlab/apputils';
import { OutputArea, OutputAreaModel } from '@jupyterlab/outputarea';
import { RenderMimeRegistry, standardRendererFactories } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

const rendermime = new RenderMimeRegistry({ initialFactories: standardRendererFactories, sanitizer: new Sanitizer() });

// Renders a cell's outputs (nbformat JSON) into host as JupyterLab does: trusted as outputs
// the session produced, or not trusted as a notebook opened from elsewhere.
window.taasRenderOutputs = (host, outputs, trusted) => {
  const model = new OutputAreaModel({ trusted });
  for (const output of outputs) model.add(output);
  Widget.attach(new OutputArea({ model, rendermime }), host);
};
