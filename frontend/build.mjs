// Builds src/index.ts into ../tb_mfu_plugin/tensorboard/static/index.js: one ES module,
// CSS inlined as text, ECharts bundled (no CDN: TensorBoard's CSP forbids remote scripts).
import * as esbuild from 'esbuild';

const watch = process.argv.includes('--watch');
const options = {
  entryPoints: ['src/index.ts'],
  // MFU_OUTFILE lets a test build elsewhere and compare with the committed bundle.
  outfile: process.env.MFU_OUTFILE || '../tb_mfu_plugin/tensorboard/static/index.js',
  bundle: true,
  format: 'esm',
  target: ['es2020'],
  minify: true,
  legalComments: 'eof',
  loader: { '.css': 'text' },
  charset: 'utf8',
  logLevel: 'info',
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
