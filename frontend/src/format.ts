// Number formatting with units: one function per unit, the twin of tb_mfu_plugin/fmt.py (the same
// text for the same value, tests/test_units.py checks it). Every figure on the page goes through one.
import { DEFINITIONS, type Figure, type Unit } from './definitions';

/** The one sign on every view for a figure that is unknown or does not apply (fmt.py's NA). */
export const NA = 'n/a';

function isNum(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function fixed(x: number, digits: number): string {
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export const IMPOSSIBLE = 'impossible (>100 %)';

/** A share 0-1 as a percentage. Above 100 % it is impossible and never shown as a figure. */
export function pct(x: number | null | undefined, digits?: number): string {
  if (!isNum(x)) return NA;
  if (x > 1 + 1e-6) return IMPOSSIBLE;
  const v = x * 100;
  return `${fixed(v, digits ?? pctDigits(v))} %`;
}

/** Decimals of a percentage: one from 1 %, two below; under 0.01 % two significant digits, so a
 * tiny MFU reads 0.00079 %, never a rounded 0 (pct_digits in fmt.py). */
export function pctDigits(v: number): number {
  const a = Math.abs(v);
  if (a >= 1 || a === 0) return 1;
  if (a >= 0.01) return 2;
  return Math.min(8, 1 - Math.floor(Math.log10(a)));
}

/** Microseconds, scaled to µs, ms or s. */
export function dur(us: number | null | undefined): string {
  if (!isNum(us)) return NA;
  const a = Math.abs(us);
  if (a < 1) return `${fixed(us * 1000, 0)} ns`;
  if (a < 1000) return `${fixed(us, a < 10 ? 2 : a < 100 ? 1 : 0)} µs`;
  if (a < 1e6) return `${fixed(us / 1000, 2)} ms`;
  return `${fixed(us / 1e6, 2)} s`;
}

/** Bytes in decimal units (1 MB = 1e6 B), matching GB/s = 1e9 B/s. */
export function bytes(b: number | null | undefined): string {
  if (!isNum(b)) return NA;
  const a = Math.abs(b);
  if (a < 1000) return `${fixed(b, 0)} B`;
  const units = ['kB', 'MB', 'GB', 'TB', 'PB'];
  let v = b / 1000;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${fixed(v, Math.abs(v) < 10 ? 2 : Math.abs(v) < 100 ? 1 : 0)} ${units[i]}`;
}

export function gbps(x: number | null | undefined): string {
  if (!isNum(x)) return NA;
  return `${fixed(x, x < 10 ? 2 : 1)} GB/s`;
}

/** FLOPs (a count) scaled to GFLOP, TFLOP, PFLOP. */
export function flops(x: number | null | undefined): string {
  if (!isNum(x)) return NA;
  const a = Math.abs(x);
  if (a >= 1e15) return `${fixed(x / 1e15, 2)} PFLOP`;
  if (a >= 1e12) return `${fixed(x / 1e12, 2)} TFLOP`;
  if (a >= 1e9) return `${fixed(x / 1e9, 2)} GFLOP`;
  if (a >= 1e6) return `${fixed(x / 1e6, 2)} MFLOP`;
  return `${fixed(x, 0)} FLOP`;
}

/** FLOP/s as TFLOP/s. */
export function tflops(x: number | null | undefined): string {
  if (!isNum(x)) return NA;
  const t = x / 1e12;
  return `${fixed(t, t < 10 ? 2 : 1)} TFLOP/s`;
}

/** Arithmetic intensity: FLOPs per byte. */
export function intensity(x: number | null | undefined): string {
  if (!isNum(x)) return NA;
  return `${fixed(x, x < 10 ? 2 : x < 1000 ? 1 : 0)} FLOP/B`;
}

export function count(x: number | null | undefined, digits?: number): string {
  if (!isNum(x)) return NA;
  const d = digits ?? (Number.isInteger(x) ? 0 : Math.abs(x) < 10 ? 2 : 1);
  return fixed(x, d);
}

/** ``n`` and its noun, singular for exactly one: "1 step", "3 steps", "0.5 waits" (fmt.counted).
 * ``text`` is how ``n`` is written, when not as it is. */
export function counted(n: number, noun: string, text: string = String(n)): string {
  return `${text} ${noun}${n === 1 ? '' : 's'}`;
}

/** A multiple (how many times something fits or grows): 2 decimals below 10, 1 above, then ×. */
export function factor(x: number | null | undefined): string {
  if (!isNum(x)) return NA;
  return `${fixed(x, Math.abs(x) < 10 ? 2 : 1)}×`;
}

/** count() with ``digits`` fixed: a one-argument formatter for a table column or a metric. */
export function counter(digits?: number): (x: number | null | undefined) => string {
  return (x) => count(x, digits);
}

/** Signed percent change, relative: +12.3 %. */
export function relDelta(a: number, b: number): string {
  if (!isNum(a) || !isNum(b) || a === 0) return '';
  const r = (b - a) / Math.abs(a);
  const sign = r > 0 ? '+' : r < 0 ? '−' : '±';
  return `${sign}${fixed(Math.abs(r) * 100, Math.abs(r) < 0.1 ? 1 : 0)} %`;
}

/** Signed difference of two shares in percentage points: +4.1 pp. */
export function ppDelta(a: number, b: number): string {
  if (!isNum(a) || !isNum(b)) return '';
  const d = (b - a) * 100;
  const sign = d > 0 ? '+' : d < 0 ? '−' : '±';
  return `${sign}${fixed(Math.abs(d), 1)} pp`;
}

/** Kineto span names are epoch milliseconds; show them as local date and time. */
export function spanLabel(span: string): string {
  if (!/^\d{12,14}$/.test(span)) return span || 'trace';
  const d = new Date(Number(span));
  if (Number.isNaN(d.getTime())) return span;
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function isNumber(x: unknown): x is number {
  return isNum(x);
}

const tflopRate = (x: number | null | undefined) => tflops(isNum(x) ? x * 1e12 : x);

/** The formatter of each unit of the definitions (tb_mfu_plugin/analysis/definitions.py). */
export const BY_UNIT: Record<Unit, (x: number | null | undefined) => string> = {
  share: (x) => pct(x),
  time: dur,
  bytes,
  flops,
  flop_rate: tflops,
  tflop_rate: tflopRate,
  bandwidth: gbps,
  count: (x) => count(x),
  factor,
};

/** A figure of the definitions as text, by its unit's formatter. */
export function figure(name: Figure, x: number | null | undefined): string {
  return BY_UNIT[DEFINITIONS[name].unit](x);
}

/** A figure's label, and its one-line definition (the label's tooltip). */
export function label(name: Figure): string {
  return DEFINITIONS[name].label;
}

export function definition(name: Figure): string {
  return DEFINITIONS[name].definition;
}
