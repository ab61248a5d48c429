// Reading the report blocks that are still untyped JSON (types.ts: awaiting generation).
import type { Json } from './types';

/** A JSON value as display text: strings as they are, numbers and booleans spelled, others as JSON. */
export function str(x: Json | undefined): string | null {
  if (x === null || x === undefined) return null;
  if (typeof x === 'string') return x;
  if (typeof x === 'number' || typeof x === 'boolean') return String(x);
  return JSON.stringify(x);
}

/** A finite number, else null. */
export function num(x: Json | undefined): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}
