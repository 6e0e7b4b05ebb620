/** A dependency-free SVG line chart: one panel per measure, x on a log scale. */

export interface Series {
  name: string;
  color: string;
  points: Array<{ x: number; y: number }>;
}

export interface Panel {
  title: string;
  yLabel: string;
  series: Series[];
}

const panelWidth = 420;
const panelHeight = 300;
const margin = { left: 60, right: 20, top: 40, bottom: 50 };

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');

function drawPanel(panel: Panel, offsetX: number, xs: number[]): string {
  const out: string[] = [];
  const w = panelWidth - margin.left - margin.right;
  const h = panelHeight - margin.top - margin.bottom;
  const xMin = Math.log10(Math.min(...xs));
  const xMax = Math.log10(Math.max(...xs));
  const yMax = niceMax(Math.max(...panel.series.flatMap((s) => s.points.map((p) => p.y))) * 1.1);
  const px = (x: number) =>
    offsetX + margin.left + ((Math.log10(x) - xMin) / (xMax - xMin || 1)) * w;
  const py = (y: number) => margin.top + h - (y / yMax) * h;
  out.push(
    `<text x="${offsetX + panelWidth / 2}" y="22" text-anchor="middle" font-weight="bold">${escapeXml(panel.title)}</text>`,
    `<line x1="${px(10 ** xMin)}" y1="${py(0)}" x2="${px(10 ** xMax)}" y2="${py(0)}" stroke="#333"/>`,
    `<line x1="${px(10 ** xMin)}" y1="${py(0)}" x2="${px(10 ** xMin)}" y2="${py(yMax)}" stroke="#333"/>`,
  );
  for (let i = 0; i <= 4; i++) {
    const y = (yMax * i) / 4;
    out.push(
      `<line x1="${px(10 ** xMin)}" y1="${py(y)}" x2="${px(10 ** xMax)}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${px(10 ** xMin) - 6}" y="${py(y) + 4}" text-anchor="end">${Number(y.toPrecision(3))}</text>`,
    );
  }
  for (const x of xs) {
    out.push(
      `<text x="${px(x)}" y="${py(0) + 18}" text-anchor="middle">${x.toLocaleString('en')}</text>`,
    );
  }
  out.push(
    `<text x="${offsetX + margin.left + w / 2}" y="${panelHeight - 10}" text-anchor="middle">connections (log scale)</text>`,
    `<text transform="translate(${offsetX + 16},${margin.top + h / 2}) rotate(-90)" text-anchor="middle">${escapeXml(panel.yLabel)}</text>`,
  );
  panel.series.forEach((series, i) => {
    const path = series.points.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ');
    out.push(
      `<polyline points="${path}" fill="none" stroke="${series.color}" stroke-width="2"/>`,
      ...series.points.map(
        (p) =>
          `<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${series.color}"/>`,
      ),
      `<rect x="${offsetX + margin.left + 10}" y="${margin.top + 6 + i * 16}" width="10" height="10" fill="${series.color}"/>`,
      `<text x="${offsetX + margin.left + 26}" y="${margin.top + 15 + i * 16}">${escapeXml(series.name)}</text>`,
    );
  });
  return out.join('\n');
}

/** Panels side by side sharing the x values `xs`. */
export function renderSvg(panels: Panel[], xs: number[], caption: string): string {
  const width = panelWidth * panels.length;
  const height = panelHeight + 24;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    ...panels.map((panel, i) => drawPanel(panel, i * panelWidth, xs)),
    `<text x="${width / 2}" y="${height - 6}" text-anchor="middle" fill="#555">${escapeXml(caption)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}
