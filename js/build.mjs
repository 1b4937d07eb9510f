// Bundle each widget entry into attnkit/static/<name>.js (ES module) and copy the CSS.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, "..", "attnkit", "static");
const entries = ["heatmap", "headgrid", "headmap", "cluster", "flow", "score"];
const watch = process.argv.includes("--watch");

mkdirSync(out, { recursive: true });
await build({
  entryPoints: Object.fromEntries(entries.map((e) => [e, resolve(here, "src", `${e}.ts`)])),
  outdir: out,
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: !watch,
  sourcemap: false,
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync(resolve(here, "src", "styles.css"), resolve(out, "widgets.css"));
