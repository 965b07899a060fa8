// Bundles src/app.js with uPlot into OUTFILE (build.sh runs it): esbuild's API from web/node_modules,
// offline, minified. One change to uPlot on the way: it builds an Intl.NumberFormat and asks
// Intl.DateTimeFormat for the time zone when its module is evaluated, and the first use of Intl in a
// fresh renderer loads ICU's data: 40-50 ms of the page load's main thread on the 2-core test
// machine (bench/web_page_profile.mjs), before anything is drawn. Both become lazy here (made on
// their first use; the page itself gives its axes and clock formatters that need no Intl). Should
// a later uPlot word them otherwise, the bundle is built unchanged with a warning.
//   node bundle.mjs OUTFILE
import * as esbuild from 'esbuild';
import { readFile } from 'node:fs/promises';

const LAZY_INTL = [
  ["const numFormatter = new Intl.NumberFormat(domEnv ? nav.language : 'en-US');",
   "let numFormatterMade = null;\nconst numFormatter = { format: (v) => (numFormatterMade ??= new Intl.NumberFormat(domEnv ? nav.language : 'en-US')).format(v) };"],
  ['const localTz = new Intl.DateTimeFormat().resolvedOptions().timeZone;',
   'let localTzFound = null;\nconst localTz = () => (localTzFound ??= new Intl.DateTimeFormat().resolvedOptions().timeZone);'],
  ['else if (tz == localTz)', 'else if (tz == localTz())'],
];

const lazyIntl = {
  name: 'uplot-lazy-intl',
  setup(build) {
    build.onLoad({ filter: /uplot[\\/]dist[\\/]uPlot\.esm\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      if (!LAZY_INTL.every(([from]) => source.split(from).length === 2)) {
        return { contents: source, warnings: [{ text: 'uPlot changed: its Intl formatters stay eager (web/bundle.mjs)' }] };
      }
      let contents = source;
      for (const [from, to] of LAZY_INTL) contents = contents.replace(from, to);
      return { contents };
    });
  },
};

await esbuild.build({
  entryPoints: ['src/app.js'], bundle: true, minify: true, format: 'iife', target: 'es2020',
  outfile: process.argv[2], logLevel: 'warning', plugins: [lazyIntl],
  // The page's first mark (bench/web_page_profile.mjs): the script starts to run, before uPlot's module.
  banner: { js: "performance.mark('app.js evaluates');" },
});
