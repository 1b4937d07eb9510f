// Bundle each widget entry into attnkit/static/<name>.js (ES module) and copy the CSS. The
// entries are the BUNDLES of src/traits.gen.ts, generated from the Python widget classes
// (python -m attnkit.widgets._traits), so a widget's bundle is named in one place.
import { build, transform } from "esbuild";
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, "..", "attnkit", "static");
const generated = await transform(readFileSync(resolve(here, "src", "traits.gen.ts"), "utf8"), { loader: "ts", format: "esm" });
const { BUNDLES: entries } = await import(`data:text/javascript;base64,${Buffer.from(generated.code).toString("base64")}`);
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
