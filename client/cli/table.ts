import type { Context } from './context.ts';
import { printJson } from './context.ts';
import { printable } from './printable.ts';

/**
 * Prints `rows` for a person or for a program: a table with a header row and aligned columns on
 * a terminal; the JSON `value` with `--json` or when stdout is a pipe or a file (what scripts
 * read, unchanged), as `status` does. Every cell is escaped (names come from the host).
 */
export function printRows(
  ctx: Context,
  value: unknown,
  header: string[],
  rows: string[][],
  none: string,
): number {
  if (ctx.flags.json === true || ctx.io.stdout.isTTY !== true) return printJson(ctx, value);
  if (rows.length === 0) {
    ctx.io.stdout.write(`${none}\n`);
    return 0;
  }
  ctx.io.stdout.write(tableText(header, rows));
  return 0;
}

/** `header` and `rows` as aligned columns (two spaces apart), one line each. */
export function tableText(header: string[], rows: string[][]): string {
  const shown = [header, ...rows].map((row) => row.map((cell) => printable(cell)));
  const widths = header.map((_, i) => Math.max(...shown.map((row) => [...(row[i] ?? '')].length)));
  return shown
    .map((row) =>
      row
        .map((cell, i) =>
          i === row.length - 1 ? cell : cell.padEnd(widths[i]! + cell.length - [...cell].length),
        )
        .join('  ')
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join('');
}
