// The tab's one palette, light and dark. Charts need colour values (ECharts paints a canvas)
// and the stylesheet needs them too, so they live here and style.css reads them as custom
// properties (var(--dim) for UI.dim), which index.ts injects from cssVariables(): the light
// ones on :root, the dark ones on :root[data-theme="dark"] (theme.ts sets it). UI holds the
// theme shown now: useTheme() swaps its values, and the charts, drawn again, read them.
// No other source names a colour: tests/test_frontend.py fails on one.

/** Page and text colours, by role: the light theme, until useTheme('dark'). */
export const UI = {
  bg: '#f5f6f8',
  surface: '#ffffff', // cards, bars, inputs
  line: '#e1e4e8',
  lineSoft: '#eef0f2',
  lineStrong: '#d0d4da', // tooltip border, hovered button
  rowHover: '#fafbfc',
  text: '#1f2328',
  dim: '#57606a',
  muted: '#8b949e',
  accent: '#e8710a',
  accentSoft: '#fff3e6',
  accentLine: '#f5c28f',
  accentHover: '#ffe8cc',
  accentFaint: '#f2c9a1', // the spinner's track
  accentWash: '#fffaf4', // the MFU card's gradient
  good: '#1a7f37',
  goodBg: '#e6f4ea',
  bad: '#cf222e',
  badBg: '#fdecee',
  badLine: '#f4b8bd',
  badText: '#82071e',
  badStrong: '#a4262c',
  badNew: '#b3261e',
  warnBg: '#fff8e1',
  warnLine: '#f2cc60',
  warnText: '#6b4b00',
  warnStrong: '#8a6100',
  warnMark: '#9a6700',
  warnEdge: '#d4a72c',
  infoEdge: '#6e9ed1',
  shareBar: '#dbe6f3',
  blueBg: '#e3ecf7',
  blueText: '#2d5b8e',
  purpleBg: '#f1e7f5',
  purpleText: '#7b3f96',
  shadow: 'rgba(0,0,0,.08)',
  shadowStrong: 'rgba(0,0,0,.12)',
};

type Palette = { [K in keyof typeof UI]: string };

const LIGHT: Palette = { ...UI };

/** The same roles on a dark page, near TensorBoard's own dark mode (#303030 behind the tab). */
const DARK: Palette = {
  bg: '#1f2023',
  surface: '#2a2b2f',
  line: '#404248',
  lineSoft: '#34363b',
  lineStrong: '#55585f',
  rowHover: '#313338',
  text: '#e8eaed',
  dim: '#b0b6be',
  muted: '#8c939c',
  accent: '#ff9a45',
  accentSoft: '#45301c',
  accentLine: '#8a5a2c',
  accentHover: '#5a3d22',
  accentFaint: '#6b4a2a',
  accentWash: '#2f2a25',
  good: '#5fcf7a',
  goodBg: '#1e3a26',
  bad: '#ff7b72',
  badBg: '#45222a',
  badLine: '#7d3a40',
  badText: '#ffb4ab',
  badStrong: '#ff9b92',
  badNew: '#ff8a80',
  warnBg: '#3a3018',
  warnLine: '#7a6224',
  warnText: '#f0d48a',
  warnStrong: '#e8c15a',
  warnMark: '#e8b84a',
  warnEdge: '#d4a72c',
  infoEdge: '#7fb0e6',
  shareBar: '#2f4a6b',
  blueBg: '#1d3049',
  blueText: '#9cc4f2',
  purpleBg: '#3a2745',
  purpleText: '#d4a8ec',
  shadow: 'rgba(0,0,0,.35)',
  shadowStrong: 'rgba(0,0,0,.5)',
};

export type Theme = 'light' | 'dark';

/** Makes UI the palette of ``theme``: what charts drawn from now on read. */
export function useTheme(theme: Theme): void {
  Object.assign(UI, theme === 'dark' ? DARK : LIGHT);
}

/** Series colours (Tableau 10, plus a few tints), named by hue. */
export const SERIES = {
  blue: '#4e79a7',
  orange: '#f28e2b',
  red: '#e15759',
  teal: '#76b7b2',
  green: '#59a14f',
  yellow: '#edc948',
  purple: '#b07aa1',
  pink: '#ff9da7',
  brown: '#9c755f',
  grey: '#bab0ac',
  lightGrey: '#c9c9c9',
  lightGreen: '#86bc86',
  slate: '#6e7781',
};

/** What the series colours mean on the Overview and Compare charts. */
export const COLORS = {
  kernel: SERIES.blue,
  memcpy: SERIES.orange,
  memset: SERIES.yellow,
  idle: SERIES.lightGrey,
  sync: SERIES.red,
  busy: SERIES.blue,
  kernelShare: SERIES.teal,
  smEff: SERIES.green,
  mfu: SERIES.purple,
  runs: [SERIES.blue, SERIES.orange, SERIES.green, SERIES.red, SERIES.teal, SERIES.purple, SERIES.yellow, SERIES.brown],
};

/** The critical path's classes (WorkerReport.critical_path.classes): host work warm, GPU work cool. */
export const CRITICAL_PATH: Record<string, string> = {
  host: SERIES.brown,
  dataloader: SERIES.pink,
  launch: SERIES.orange,
  sync: SERIES.red,
  kernel_matmul: SERIES.blue,
  kernel_matmul_cuda_core: SERIES.teal,
  kernel_attention: SERIES.purple,
  kernel_elementwise: SERIES.green,
  kernel_other: SERIES.lightGreen,
  communication: SERIES.yellow,
  copy: SERIES.slate,
  memset: SERIES.grey,
  gpu_gap: SERIES.lightGrey,
  // read when drawn, so that they follow the theme
  get stream_wait() {
    return UI.lineStrong;
  },
  get other() {
    return UI.muted;
  },
};

function properties(p: Palette): string {
  return Object.entries(p)
    .map(([k, v]) => `  --${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: ${v};`)
    .join('\n');
}

/** Both palettes as CSS custom properties (lineSoft as --line-soft): the light one on :root, the
 * dark one on :root[data-theme="dark"]; color-scheme themes the native controls and scrollbars. */
export function cssVariables(): string {
  return (
    `:root {\n  color-scheme: light;\n${properties(LIGHT)}\n}\n` +
    `:root[data-theme="dark"] {\n  color-scheme: dark;\n${properties(DARK)}\n}\n`
  );
}
