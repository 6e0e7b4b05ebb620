/** "in 12 min", "3 h ago": a short relative time for tables (the exact time goes in a title). */
export function relativeTime(iso: string, nowMs: number = Date.now()): string {
  const diff = Date.parse(iso) - nowMs;
  const abs = Math.abs(diff);
  const unit =
    abs < 60_000
      ? `${Math.max(1, Math.round(abs / 1000))} s`
      : abs < 3_600_000
        ? `${Math.round(abs / 60_000)} min`
        : abs < 86_400_000
          ? `${Math.round(abs / 3_600_000)} h`
          : `${Math.round(abs / 86_400_000)} d`;
  if (abs < 5_000) return 'just now';
  return diff > 0 ? `in ${unit}` : `${unit} ago`;
}

/** A readable local date and time for titles and cells. */
export function dateTime(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** `YYYY-MM-DD` (UTC) for a date input, '' for null. */
export function dateInputValue(iso: string | null): string {
  return iso === null ? '' : iso.slice(0, 10);
}

/** A date input's value as the ISO instant of the end of that day (UTC), null when empty. */
export function expiryFromDateInput(value: string): string | null {
  if (value === '') return null;
  return new Date(`${value}T23:59:59.999Z`).toISOString();
}
