// The charts page: one uPlot per chart, fed from /api/charts every sample interval.
// A chart is rebuilt when its set of lines changes, else only its data is replaced.
// window.apogeeCharts[id] is the uPlot instance (its .data is what is drawn).
"use strict";

(() => {
  const COLORS = ["#2d5be3", "#e3522d", "#1e9e5a", "#9b3de3", "#e3a92d", "#2db8e3", "#e32d8f", "#6b7385",
                  "#7a5c00", "#00796b"];
  const charts = {};
  window.apogeeCharts = charts;

  function query() {
    const params = new URLSearchParams(window.location.search);
    const out = new URLSearchParams();
    for (const name of ["topics", "groups"]) if (params.get(name)) out.set(name, params.get(name));
    const text = out.toString();
    return text ? "?" + text : "";
  }

  function draw(box, chart) {
    const id = box.dataset.chart;
    const names = chart.series.map((s) => s.name);
    const data = [chart.times, ...chart.series.map((s) => s.values)];
    const empty = box.querySelector(".empty");
    if (empty) empty.hidden = chart.times.length > 0;
    const current = charts[id];
    if (current && current.names.join("\u0001") === names.join("\u0001")) {
      current.setData(data);
      return;
    }
    if (current) current.destroy();
    const plot = box.querySelector(".plot");
    plot.innerHTML = "";
    const opts = {
      width: Math.max(300, plot.clientWidth || box.clientWidth - 16),
      height: 180,
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      series: [{}, ...names.map((name, i) => ({ label: name, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false }))],
      axes: [{}, { label: chart.unit, size: 60 }],
      legend: { live: true },
    };
    const u = new uPlot(opts, data, plot);
    u.names = names;
    charts[id] = u;
  }

  async function step(root) {
    try {
      const answer = await Apogee.getJSON(root.dataset.source + query());
      for (const box of root.querySelectorAll("[data-chart]")) {
        const chart = answer.charts[box.dataset.chart];
        if (chart) draw(box, chart);
      }
      root.dataset.ticks = String(answer.ticks);
    } catch (problem) {
      if (!root.dataset.reported) Apogee.showProblem(problem);
      root.dataset.reported = "1";
    }
    setTimeout(() => step(root), Number(root.dataset.every || 5000));
  }

  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("charts");
    if (root && window.uPlot) step(root);
  });
})();
