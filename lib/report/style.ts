/**
 * The report's stylesheet, inlined into the page (system fonts only: nothing is fetched).
 *
 * @module
 */

export const PAGE_STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; padding: 0 16px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin-bottom: 2px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0; }
dl.facts dt { color: #666; }
dl.facts dd { margin: 0; font-family: ui-monospace, monospace; word-break: break-all; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure.chart { margin: 0; border: 1px solid #e4e4e4; border-radius: 6px; padding: 8px; background: #fff; }
figure.chart figcaption { font-weight: 600; margin-bottom: 4px; }
figure.chart.empty { min-width: 200px; }
svg .tick, svg text { font-size: 10px; fill: #555; }
.legend { font-size: 12px; color: #444; }
.key { margin-right: 10px; white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; }
.note { color: #777; font-style: italic; }
.trajectory { border: 1px solid #e4e4e4; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
.facts { color: #555; }
.chat { display: flex; flex-direction: column; gap: 6px; }
.msg { border-radius: 6px; padding: 4px 8px; max-width: 100%; }
.msg .role { font-size: 11px; text-transform: uppercase; color: #777; }
.msg pre { margin: 0; white-space: pre-wrap; word-break: break-word; font: 13px/1.5 ui-monospace, monospace; }
.msg.system { background: #f4f4f4; }
.msg.user { background: #eef6ee; }
.msg.assistant { background: #fff; border: 1px solid #ccd; }
.msg.tool, .msg.env { background: #fbf6e9; }
.tok { border-radius: 2px; }
.tool-calls pre { margin: 0; white-space: pre-wrap; max-width: 420px; }
.status { padding: 1px 6px; border-radius: 8px; font-size: 12px; }
.status.ok { background: #dff3e4; color: #1d6b33; }
.status.bad { background: #fbe1e1; color: #9b1c1c; }
`;
