"""The JupyterLab application (3.6, built from its npm packages into ./build by webpack.config.js)
served by Debian's jupyterlab_server 2.16 on jupyter_server 1.23, as JupyterLab's own
examples/app does: Debian 12 has no JupyterLab package and there is no PyPI here.
tests/browser/test_jupyterlab.py starts it; by hand, with Debian's Python:

  /usr/bin/python3 tests/browser/jupyterlab/lab_app.py --ServerApp.ip=127.0.0.1 \
      --ServerApp.port=8899 --ServerApp.token=SECRET --ServerApp.root_dir=DIR --no-browser
"""
import json
import os

from jupyterlab_server import LabServerApp
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.web import StaticFileHandler
from traitlets import Unicode

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")
MATHJAX_DIR = "/usr/share/javascript/mathjax"  # Debian package libjs-mathjax

# Ignore Jupyter config files on disk so the app is standalone.
os.environ["JUPYTER_NO_CONFIG"] = "1"

with open(os.path.join(HERE, "package.json")) as fid:
    version = json.load(fid)["version"]


class MeHandler(APIHandler):
    """GET /api/me as jupyter_server 2 answers it: JupyterLab 3.6's user
    manager asks for it; jupyter_server 1.x has no such API (a 404 in the console)."""

    @web.authenticated
    def get(self):
        name = "anonymous"
        self.finish(json.dumps({
            "identity": {"username": name, "name": name, "display_name": name,
                         "initials": "A", "avatar_url": None, "color": None},
            "permissions": {},
        }))


def _jupyter_server_extension_points():
    return [{"module": __name__, "app": TaasLabApp}]


class TaasLabApp(LabServerApp):
    name = "taas_lab"  # its static files are served at /static/taas_lab/
    extension_url = "/lab"
    default_url = "/lab"
    load_other_extensions = False
    app_name = "JupyterLab"
    app_version = version
    app_settings_dir = os.path.join(HERE, "app_settings")  # holds overrides.json
    schemas_dir = os.path.join(BUILD, "schemas")
    static_dir = BUILD
    templates_dir = os.path.join(HERE, "templates")
    themes_dir = os.path.join(BUILD, "themes")
    # Overridable on the command line, e.g. --TaasLabApp.user_settings_dir=/tmp/x
    # (a plain class attribute would stop them being configurable)
    user_settings_dir = Unicode(os.path.join(BUILD, "user_settings")).tag(config=True)
    workspaces_dir = Unicode(os.path.join(BUILD, "workspaces")).tag(config=True)

    def initialize_settings(self):
        super().initialize_settings()
        settings = self.serverapp.web_app.settings
        settings["terminals_available"] = False
        # MathJax 2 from Debian's libjs-mathjax instead of the CDN (no internet here).
        if os.path.isfile(os.path.join(MATHJAX_DIR, "MathJax.js")):
            settings["mathjax_url"] = "/taas-lab-mathjax/MathJax.js"

    def initialize_handlers(self):
        super().initialize_handlers()
        self.handlers.append(("/api/me", MeHandler))
        if os.path.isdir(MATHJAX_DIR):
            # ExtensionApp prefixes base_url to these patterns.
            self.handlers.append(
                ("/taas-lab-mathjax/(.*)", StaticFileHandler, {"path": MATHJAX_DIR})
            )


if __name__ == "__main__":
    TaasLabApp.launch_instance()
