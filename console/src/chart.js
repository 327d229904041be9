// Line charts over time with uPlot. Each chart registers its uPlot instance in
// window.__esCharts[testid] so the browser test can read how many points it
// holds (u.data[0].length) and see it grow; the container also carries
// data-points with the same number.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export const palette = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

window.__esCharts = window.__esCharts || {};

/**
 * makeChart(container, {testid, labels: ['bytes in', ...], yFormat})
 * returns {setData(xs, ...ys), setSeries(labels), destroy()}. xs are epoch seconds.
 * setSeries rebuilds the chart when the set of lines changes (a new partition).
 */
export function makeChart(container, { testid, labels, yFormat = (v) => String(v), height = 220 }) {
  const box = document.createElement('div');
  box.className = 'chart';
  box.dataset.testid = testid;
  box.dataset.points = '0';
  container.append(box);
  let u = null;
  let current = labels;
  let lastData = null;

  const width = () => Math.max(300, box.clientWidth || container.clientWidth || 600);

  function build(seriesLabels) {
    if (u) u.destroy();
    current = seriesLabels;
    const opts = {
      width: width(),
      height,
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [
        {},
        { values: (_u, ticks) => ticks.map(yFormat), size: 80 },
      ],
      series: [
        {},
        ...seriesLabels.map((label, i) => ({
          label,
          stroke: palette[i % palette.length],
          width: 1.5,
          value: (_u, v) => (v === null || v === undefined ? '–' : yFormat(v)),
          points: { show: false },
        })),
      ],
    };
    const empty = [[], ...seriesLabels.map(() => [])];
    u = new uPlot(opts, lastData && lastData.length === seriesLabels.length + 1 ? lastData : empty, box);
    window.__esCharts[testid] = u;
  }
  build(labels);

  const onResize = () => u && u.setSize({ width: width(), height });
  window.addEventListener('resize', onResize);

  return {
    setSeries(seriesLabels) {
      if (seriesLabels.length !== current.length || seriesLabels.some((l, i) => l !== current[i])) {
        lastData = null;
        build(seriesLabels);
      }
    },
    setData(xs, ...ys) {
      lastData = [xs, ...ys];
      u.setData(lastData);
      box.dataset.points = String(xs.length);
    },
    destroy() {
      window.removeEventListener('resize', onResize);
      if (window.__esCharts[testid] === u) delete window.__esCharts[testid];
      u.destroy();
      u = null;
    },
  };
}
