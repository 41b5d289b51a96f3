// How numbers, sizes and times read on screen.

const countFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const fullTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'long' });

const SIZE_UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

/** 41233 -> "41,233" (in the visitor's locale). */
export function formatCount(n: number): string {
  return countFormat.format(n);
}

/** Bytes in binary units: "0 B", "999 B", "1.5 KiB", "12 MiB", "3.4 GiB". */
export function formatSize(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 1024) return `${Math.max(0, Math.round(bytes))} B`;
  let value = bytes;
  let unit: string = 'B';
  for (const next of SIZE_UNITS) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  const digits = value < 10 ? 1 : 0;
  return `${value.toFixed(digits)} ${unit}`;
}

/** "12.5 MiB/s". */
export function formatRate(bytesPerSecond: number): string {
  return `${formatSize(bytesPerSecond)}/s`;
}

/** Seconds since the Unix epoch -> local date and time, e.g. "Nov 21, 2026, 10:19 PM". */
export function formatTime(unixSeconds: number): string {
  const date = dateOf(unixSeconds);
  return date ? timeFormat.format(date) : '—';
}

/** The same time spelled out in full, for tooltips. */
export function formatFullTime(unixSeconds: number): string {
  const date = dateOf(unixSeconds);
  return date ? fullTimeFormat.format(date) : 'unknown';
}

/** The latest time a JavaScript Date holds: 8.64e15 ms, in seconds. */
const LATEST_DATE_SECONDS = 8.64e12;

/**
 * A time the sharer sent as a Date, or null when there is none to show: unknown (0
 * or before), or past what a Date holds (a sharer can send any 64-bit number, and
 * formatting an invalid Date throws, which would stop a whole listing drawing).
 */
function dateOf(unixSeconds: number): Date | null {
  if (!Number.isFinite(unixSeconds) || unixSeconds <= 0 || unixSeconds > LATEST_DATE_SECONDS) return null;
  return new Date(unixSeconds * 1000);
}

/** "1 item", "12,000 items". */
export function formatItems(n: number): string {
  return n === 1 ? '1 item' : `${formatCount(n)} items`;
}

/** "rw-r--r--" style permission bits. */
export function formatMode(mode: number): string {
  const bits = 'rwxrwxrwx';
  let out = '';
  for (let i = 0; i < 9; i += 1) {
    out += mode & (1 << (8 - i)) ? bits[i] : '-';
  }
  return out;
}
