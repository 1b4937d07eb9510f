// Bundle the report renderer (Jupyter widget HTML manager + anywidget front end) into one
// classic script and one stylesheet: attnkit/static/report.js and report.css. report.py
// inlines both into every HTML report, so reports need no network.
import { build } from "esbuild";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, "..", "..", "attnkit", "static");
mkdirSync(out, { recursive: true });

// Reports carry ipywidgets 8 state only: the ipywidgets 7 copies html-manager also ships are
// stubbed out (they would double the CSS and fight the 8.x styles), and so are the lab
// colour variables, which the nbconvert lab template already defines.
const stubs = {
  name: "attnkit-stubs",
  setup(b) {
    b.onResolve({ filter: /^@jupyter-widgets\/(base7|controls7)(\/.*)?$/ }, (args) => ({
      path: args.path,
      namespace: "attnkit-stub",
    }));
    b.onResolve({ filter: /labvariables\.css$/ }, (args) => ({ path: args.path, namespace: "attnkit-stub" }));
    b.onLoad({ filter: /\.css$/, namespace: "attnkit-stub" }, () => ({ contents: "", loader: "css" }));
    b.onLoad({ filter: /.*/, namespace: "attnkit-stub" }, (args) => ({
      contents: `const msg = ${JSON.stringify("attnkit report: widget state from ipywidgets 7 (")} + ${JSON.stringify(args.path)} + ") is not supported; execute the notebook with ipywidgets 8.";
module.exports = new Proxy({}, { get(_t, key) { if (key === "__esModule" || key === "then") return undefined; throw new Error(msg); } });`,
      loader: "js",
    }));
  },
};

const result = await build({
  entryPoints: { report: resolve(here, "src", "report.ts") },
  outdir: out,
  bundle: true,
  format: "iife",
  target: "es2022",
  platform: "browser",
  minify: true,
  sourcemap: false,
  legalComments: "none",
  logLevel: "warning",
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [stubs],
  metafile: process.argv.includes("--meta"),
  loader: { ".woff2": "dataurl", ".svg": "dataurl", ".png": "dataurl", ".gif": "dataurl" },
});

// `node build.mjs --meta`: what takes the space (inspect with esbuild's analyzer).
if (result.metafile) writeFileSync(resolve(here, "node_modules", ".report-meta.json"), JSON.stringify(result.metafile));

// What went into the bundle, so a report can name the front-end versions it carries.
const version = (name) => JSON.parse(readFileSync(resolve(here, "node_modules", name, "package.json"), "utf8")).version;
const manifest = {
  "@jupyter-widgets/html-manager": version("@jupyter-widgets/html-manager"),
  "@jupyter-widgets/base": version("@jupyter-widgets/base"),
  "@jupyter-widgets/controls": version("@jupyter-widgets/controls"),
  anywidget: version("anywidget"),
};
writeFileSync(resolve(out, "report.json"), JSON.stringify(manifest, null, 2) + "\n");
