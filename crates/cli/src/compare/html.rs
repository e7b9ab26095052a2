//! The HTML report: one self-contained file (no network, no external script) holding the table
//! with filters (verdict, module, op name), the first divergence at the top, and one plot per
//! metric along execution order, so the place where the error starts to grow can be seen.

use super::value::Cell;
use super::value::Mode;
use msprobe_core::json::Json;

fn cell_json(c: &Cell) -> Json {
    match c {
        Cell::F(f) if f.is_finite() => Json::Float(*f),
        Cell::I(i) => Json::Int(*i),
        other => Json::Str(other.py_str().into()),
    }
}

/// The metrics plotted per mode: (column, label).
fn plotted(mode: Mode) -> &'static [(usize, &'static str)] {
    match mode {
        Mode::All => &[(6, "Cosine"), (7, "MaxAbsErr"), (8, "MaxRelativeErr"), (9, "One Thousandth Err Ratio")],
        Mode::Summary => &[(6, "Max diff"), (7, "Min diff"), (8, "Mean diff"), (9, "L2norm diff")],
        Mode::Md5 => &[],
    }
}

pub struct Report<'a> {
    pub title: String,
    pub mode: Mode,
    pub header: &'a [&'a str],
    pub rows: &'a [Vec<Cell>],
    /// the module path of each row's record (outermost last), from construct.json
    pub modules: Vec<String>,
    pub colors: Vec<&'static str>,
    pub divergence: &'a [String],
    /// row index of the first forward divergence, if any
    pub marker: Option<usize>,
}

pub fn render(r: &Report) -> String {
    let data = Json::Object(vec![
        ("title".into(), Json::Str(r.title.clone().into())),
        ("header".into(), Json::Array(r.header.iter().map(|h| Json::Str(h.to_string().into())).collect())),
        (
            "rows".into(),
            Json::Array(r.rows.iter().map(|row| Json::Array(row.iter().map(cell_json).collect())).collect()),
        ),
        ("modules".into(), Json::Array(r.modules.iter().map(|m| Json::Str(m.clone().into())).collect())),
        ("colors".into(), Json::Array(r.colors.iter().map(|c| Json::Str(c.to_string().into())).collect())),
        (
            "verdict".into(),
            Json::Int(match r.mode {
                Mode::All => 19,
                Mode::Summary => 22,
                Mode::Md5 => 8,
            }),
        ),
        (
            "plots".into(),
            Json::Array(
                plotted(r.mode)
                    .iter()
                    .map(|(c, l)| Json::Array(vec![Json::Int(*c as i128), Json::Str(l.to_string().into())]))
                    .collect(),
            ),
        ),
        ("marker".into(), r.marker.map(|m| Json::Int(m as i128)).unwrap_or(Json::Null)),
    ]);
    // the JSON sits in a <script> element: keep "</" out of it
    let data = data.to_compact().replace("</", "<\\/");
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let div = esc(&r.divergence.join("\n"));
    TEMPLATE.replace("{{TITLE}}", &esc(&r.title)).replace("{{DIVERGENCE}}", &div).replace("{{DATA}}", &data)
}

const TEMPLATE: &str = r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{TITLE}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} pre#div{background:#fff4e5;border:1px solid #f0b36b;padding:8px;white-space:pre-wrap}
#filters label{margin-right:14px} table{border-collapse:collapse;font-size:12px}
th,td{border:1px solid #ccc;padding:2px 5px;white-space:nowrap;max-width:380px;overflow:hidden;text-overflow:ellipsis}
th{background:#eee;position:sticky;top:0} tr.red td{background:#ffb3b3} tr.yellow td{background:#ffff99}
.plots{display:flex;flex-wrap:wrap;gap:12px} .plot{border:1px solid #ccc} #count{margin-left:12px;color:#555}
</style></head><body>
<h1>{{TITLE}}</h1>
<pre id="div">{{DIVERGENCE}}</pre>
<div class="plots" id="plots"></div>
<p id="filters">
<label>verdict <select id="fv"><option value="">all</option></select></label>
<label>module <input id="fm" placeholder="e.g. fc2"></label>
<label>op <input id="fo" placeholder="e.g. linear"></label>
<label><input type="checkbox" id="fh"> highlighted rows only</label><span id="count"></span></p>
<table id="t"><thead></thead><tbody></tbody></table>
<script id="data" type="application/json">{{DATA}}</script>
<script>
const D = JSON.parse(document.getElementById('data').textContent);
const V = D.verdict, head = document.querySelector('#t thead'), body = document.querySelector('#t tbody');
head.innerHTML = '<tr><th>#</th>' + D.header.map(h => '<th>' + h + '</th>').join('') + '<th>module</th></tr>';
const esc = s => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');
const verdicts = [...new Set(D.rows.map(r => String(r[V])))];
for (const v of verdicts) { const o = document.createElement('option'); o.value = v; o.textContent = v === '' ? '(empty)' : v; fv.appendChild(o); }
function render() {
  const v = fv.value, m = fm.value.toLowerCase(), op = fo.value.toLowerCase(), hi = fh.checked;
  let html = '', n = 0;
  D.rows.forEach((r, i) => {
    if (v && String(r[V]) !== v) return;
    if (m && !D.modules[i].toLowerCase().includes(m)) return;
    if (op && !String(r[0]).toLowerCase().includes(op)) return;
    if (hi && !D.colors[i]) return;
    n++;
    html += '<tr class="' + D.colors[i] + '"><td>' + i + '</td>' + r.map(c => '<td title="' + esc(c) + '">' + esc(c) + '</td>').join('') + '<td>' + esc(D.modules[i]) + '</td></tr>';
  });
  body.innerHTML = html; count.textContent = n + ' of ' + D.rows.length + ' rows';
}
[fv, fm, fo, fh].forEach(e => e.addEventListener('input', render));
render();
function plot(col, label) {
  const W = 560, H = 200, P = 36, c = document.createElement('canvas');
  c.width = W; c.height = H; c.className = 'plot'; c.dataset.metric = label; plots.appendChild(c);
  const g = c.getContext('2d'), pts = [];
  D.rows.forEach((r, i) => { const y = r[col]; if (typeof y === 'number' && isFinite(y)) pts.push([i, Math.abs(y)]); });
  g.fillStyle = '#fff'; g.fillRect(0, 0, W, H); g.fillStyle = '#222'; g.font = '12px sans-serif';
  g.fillText(label + ' along execution order (' + pts.length + ' points)', P, 14);
  if (!pts.length) { c.dataset.points = 0; return; }
  let lo = Math.min(...pts.map(p => p[1])), hi = Math.max(...pts.map(p => p[1]));
  if (hi === lo) { hi = lo + 1; }
  const X = i => P + (W - 2 * P) * i / Math.max(1, D.rows.length - 1), Y = y => H - P + (2 * P - H) * (y - lo) / (hi - lo);
  g.strokeStyle = '#999'; g.strokeRect(P, P, W - 2 * P, H - 2 * P);
  g.fillText(hi.toPrecision(3), 2, P + 4); g.fillText(lo.toPrecision(3), 2, H - P);
  if (D.marker !== null) { g.strokeStyle = '#d00'; g.beginPath(); g.moveTo(X(D.marker), P); g.lineTo(X(D.marker), H - P); g.stroke(); }
  g.strokeStyle = '#1565c0'; g.beginPath(); pts.forEach((p, k) => k ? g.lineTo(X(p[0]), Y(p[1])) : g.moveTo(X(p[0]), Y(p[1]))); g.stroke();
  g.fillStyle = '#1565c0'; pts.forEach(p => g.fillRect(X(p[0]) - 1, Y(p[1]) - 1, 3, 3));
  c.dataset.points = pts.length;
}
D.plots.forEach(p => plot(p[0], p[1]));
document.body.dataset.ready = '1';
</script></body></html>
"##;
