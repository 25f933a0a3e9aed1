// Line charts drawn on a <canvas>, for the overview's message rates and
// queue depths. Labels are drawn with fillText (canvas text is never
// parsed as markup); the legend beside the chart is built with dom.js.

import { h, replace } from "./dom.js";
import { num } from "./format.js";

const COLORS = ["#e8590c", "#1c7ed6", "#2f9e44", "#ae3ec9", "#f59f00", "#0c8599", "#c92a2a"];

export class Chart {
  // id names the canvas (tests and CSS find it); unit follows values.
  constructor(id, title, unit) {
    this.unit = unit || "";
    this.canvas = h("canvas", { id, className: "chart", width: 640, height: 200 });
    this.legend = h("ul", { className: "legend", id: id + "-legend" });
    this.el = h("div", { className: "chart-box" }, h("h3", {}, title), this.canvas, this.legend);
  }

  // draw takes series [{label, points: [{t: ms, v: number}] oldest first}].
  draw(series) {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const cssW = c.clientWidth || 640, cssH = c.clientHeight || 200;
    if (c.width !== Math.round(cssW * dpr) || c.height !== Math.round(cssH * dpr)) {
      c.width = Math.round(cssW * dpr);
      c.height = Math.round(cssH * dpr);
    }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, cssW, cssH);
    const left = 56, right = 8, top = 8, bottom = 22;
    const w = cssW - left - right, hgt = cssH - top - bottom;

    let tMin = Infinity, tMax = -Infinity, vMax = 0;
    for (const s of series) {
      for (const p of s.points) {
        tMin = Math.min(tMin, p.t);
        tMax = Math.max(tMax, p.t);
        vMax = Math.max(vMax, p.v);
      }
    }
    const yMax = niceCeil(vMax);
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#666";
    g.strokeStyle = "#e5e5e5";
    g.lineWidth = 1;
    // Horizontal grid with value labels.
    for (let i = 0; i <= 4; i++) {
      const y = top + hgt - (hgt * i) / 4;
      g.beginPath();
      g.moveTo(left, Math.round(y) + 0.5);
      g.lineTo(left + w, Math.round(y) + 0.5);
      g.stroke();
      g.textAlign = "right";
      g.textBaseline = "middle";
      g.fillText(num((yMax * i) / 4) + this.unit, left - 4, y);
    }
    if (!isFinite(tMin) || tMax === tMin) {
      g.textAlign = "center";
      g.fillText("collecting samples…", left + w / 2, top + hgt / 2);
    } else {
      // Time labels at both ends and the middle.
      g.textBaseline = "top";
      for (const [f, align] of [[0, "left"], [0.5, "center"], [1, "right"]]) {
        g.textAlign = align;
        g.fillText(new Date(tMin + (tMax - tMin) * f).toLocaleTimeString(), left + w * f, top + hgt + 4);
      }
      const x = (t) => left + ((t - tMin) / (tMax - tMin)) * w;
      const y = (v) => top + hgt - (v / yMax) * hgt;
      series.forEach((s, i) => {
        if (!s.points.length) return;
        g.strokeStyle = COLORS[i % COLORS.length];
        g.lineWidth = 2;
        g.beginPath();
        s.points.forEach((p, j) => (j ? g.lineTo(x(p.t), y(p.v)) : g.moveTo(x(p.t), y(p.v))));
        g.stroke();
      });
    }
    replace(this.legend, series.map((s, i) => {
      const last = s.points.length ? s.points[s.points.length - 1].v : 0;
      return h("li", {}, h("span", { className: "swatch c" + (i % COLORS.length) }), s.label + " ",
        h("b", {}, num(last) + this.unit));
    }));
    this.canvas.dataset.drawn = String((Number(this.canvas.dataset.drawn) || 0) + 1);
  }
}

// niceCeil rounds a chart's top up to 1, 2 or 5 times a power of ten.
function niceCeil(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// countsToRates turns RabbitMQ samples of a counter (newest first, as the
// API sends them) into per-second rates between neighbours, oldest first.
export function countsToRates(samples) {
  const s = (samples || []).slice().sort((a, b) => a.timestamp - b.timestamp);
  const out = [];
  for (let i = 1; i < s.length; i++) {
    const dt = (s[i].timestamp - s[i - 1].timestamp) / 1000;
    if (dt > 0) out.push({ t: s[i].timestamp, v: Math.max(0, (s[i].sample - s[i - 1].sample) / dt) });
  }
  return out;
}

// levels turns samples of a length (newest first) into points, oldest first.
export function levels(samples) {
  return (samples || []).map((p) => ({ t: p.timestamp, v: p.sample })).sort((a, b) => a.t - b.t);
}
