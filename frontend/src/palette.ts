// The tab's one palette. Charts need colour values (ECharts paints a canvas) and the
// stylesheet needs them too, so they live here and style.css reads them as custom
// properties (var(--dim) for UI.dim), which index.ts injects from cssVariables().
// No other source names a colour: tests/test_frontend.py fails on one.

/** Page and text colours, by role. */
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
  stream_wait: UI.lineStrong,
  other: UI.muted,
};

/** UI as CSS custom properties on :root, lineSoft as --line-soft. */
export function cssVariables(): string {
  const props = Object.entries(UI).map(([k, v]) => `  --${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: ${v};`);
  return `:root {\n${props.join('\n')}\n}\n`;
}
