// page_script.hpp: the CSS and JavaScript that io/page.hpp inlines into every learner's page.
//
// The script reads the page's data (<script type="application/json" id="qkv-data">), draws
// the steps, the tables and the heatmaps, and computes each cell's explanation from the
// embedded numbers. It makes no network request: no fetch, no XMLHttpRequest, no image, font
// or script URL; the SVG download is a blob: URL made from the drawn figure. It exposes
// window.qkvPage (explain, svgText, showHead) for the browser test (tests/browser/).
#pragma once

namespace qkv::io::page_script {

inline constexpr const char* css = R"CSS(
:root{--fg:#1d2329;--muted:#5b6670;--line:#d6dde3;--head:#eef3f7;--accent:#08519c;--tipbg:#fffef7}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);
 margin:0 auto;padding:1.2em 1.6em 3em;max-width:78em;line-height:1.45;font-size:15px}
h1{font-size:1.55em;margin:.2em 0 .4em;overflow-wrap:anywhere}h2{font-size:1.2em;margin:0 0 .3em}
.intro{max-width:60em;white-space:pre-line;overflow-wrap:anywhere}.meta{color:var(--muted);font-size:.88em;overflow-wrap:anywhere}
.banner{background:#fff4d6;border:1px solid #e8c66a;padding:.5em .8em;border-radius:4px;margin:.8em 0}
section.step{border-top:1px solid var(--line);padding:1em 0 .6em;margin-top:.6em}
.prose{white-space:pre-line;max-width:62em;margin:.2em 0 .6em;overflow-wrap:anywhere}.prose.wide{flex-basis:100%;margin:0}
.where{color:var(--muted);font-size:.8em;font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.items{display:flex;flex-wrap:wrap;gap:1em 1.6em;align-items:flex-start}.items>*{min-width:0}
figure{margin:0;max-width:100%}
figcaption{font-size:.9em;margin-bottom:.25em}figcaption code{font-weight:600}
.dt{color:var(--muted);font-size:.85em}
.summary{color:#8a5a00;font-size:.85em;max-width:40em}
.scroll{overflow-x:auto;max-width:100%}
table.m{border-collapse:collapse;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
table.m th,table.m td{border:1px solid var(--line);padding:2px 7px;text-align:right;white-space:nowrap}
table.m th{background:var(--head);font-weight:500;color:#33414d}
table.m td{cursor:help}table.m td:hover,table.m td:focus,table.m td.pinned{outline:2px solid var(--accent);outline-offset:-2px;background:#e8f1fb}
table.m td.masked{color:#999;background:repeating-linear-gradient(45deg,#fff,#fff 3px,#e4e4e4 3px,#e4e4e4 5px)}
table.m td.gap,table.m th.gap{color:var(--muted);border:none;background:none;text-align:center}
td.proven{box-shadow:inset 0 -2px 0 #6bae42}
.legend-note{font-size:.8em;color:var(--muted)}
.heatmap{border:1px solid var(--line);border-radius:4px;padding:.5em .7em;background:#fff}
.heatmap .controls{display:flex;gap:.6em;align-items:center;font-size:.9em;margin-bottom:.3em;flex-wrap:wrap}
.heatmap svg rect.c{cursor:help}.heatmap svg rect.c:hover,.heatmap svg rect.c:focus{stroke:#d94801;stroke-width:2}
button,select{font:inherit;font-size:.9em}
#qkv-tip{position:absolute;z-index:10;max-width:min(44em,calc(100vw - 16px));overflow-y:auto;background:var(--tipbg);border:1px solid #c9b458;border-radius:5px;
 box-shadow:0 3px 12px rgba(0,0,0,.18);padding:.55em .75em;font-size:13px;line-height:1.4}
#qkv-tip .x-title{font-weight:600;margin-bottom:.2em}
#qkv-tip .x-formula,#qkv-tip .x-terms{font-family:ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
#qkv-tip .x-sum{font-family:ui-monospace,Menlo,Consolas,monospace;font-weight:600}
#qkv-tip .x-proof{border-top:1px dashed #c9b458;margin-top:.4em;padding-top:.3em}
#qkv-tip pre{margin:.2em 0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;background:#f6f4e6;padding:.3em}
#qkv-tip .x-note{color:var(--muted)}
footer{margin-top:2.5em;color:var(--muted);font-size:.8em}
@media (max-width:600px){body{padding:.8em .7em 2em}}
@media print{body{max-width:none;padding:0;font-size:11pt}#qkv-tip,button,select,.controls .hint{display:none!important}
 .scroll{overflow:visible}section.step{break-inside:auto}figure{break-inside:avoid}}
)CSS";

inline constexpr const char* js = R"JS(
(function () {
'use strict';
var D = JSON.parse(document.getElementById('qkv-data').textContent);
var M = D.matrices;
var NS = 'http://www.w3.org/2000/svg';
function num(v) { return typeof v === 'string' ? (v === 'inf' ? Infinity : v === '-inf' ? -Infinity : NaN) : v; }
// a float32 matrix's numbers are written as the shortest decimal that reads back to the float;
// Math.fround turns that decimal (read as a double) into the float's exact value, so that every
// number the page computes from them (sums, errors) uses the values qkv computed with, not
// their decimals (issue 28: 7.2f is 7.19999980926..., not 7.2)
function num32(v) { return Math.fround(num(v)); }
// page::pack_numbers: numbers' bits, little-endian, in base64
function unbits(text, dtype) {
  var raw = atob(text), u8 = new Uint8Array(raw.length);
  for (var b = 0; b < raw.length; ++b) u8[b] = raw.charCodeAt(b);
  return Array.from(dtype === 'float32' ? new Float32Array(u8.buffer) : new Float64Array(u8.buffer));
}
// page_detail::json_b85: each 5 characters one little-endian 32-bit word, most significant digit first
function unb85(text, dtype) {
  var D85 = '!#$%()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{}', val = new Uint8Array(128);
  for (var c = 0; c < 85; ++c) val[D85.charCodeAt(c)] = c;
  var n = text.length / 5, u32 = new Uint32Array(n);
  for (var k = 0, at = 0; k < n; ++k, at += 5)
    u32[k] = (((val[text.charCodeAt(at)] * 85 + val[text.charCodeAt(at + 1)]) * 85 + val[text.charCodeAt(at + 2)]) * 85 + val[text.charCodeAt(at + 3)]) * 85 + val[text.charCodeAt(at + 4)];
  return Array.from(dtype === 'float32' ? new Float32Array(u32.buffer) : new Float64Array(u32.buffer));
}
Object.keys(M).forEach(function (id) {
  var m = M[id], f = m.dtype === 'float32' ? num32 : num; m.id = id;
  if (m.bits) { m.data = unbits(m.bits, m.dtype); delete m.bits; }
  else if (m.b85 !== undefined) { m.data = unb85(m.b85, m.dtype); delete m.b85; }
  else if (m.data) m.data = m.data.map(f);
  if (m.row_b85 !== undefined) { m.row_data = unb85(m.row_b85, m.dtype); m.col_data = unb85(m.col_b85, m.dtype); delete m.row_b85; delete m.col_b85; }
  if (m.row_data) { m.row_data = m.row_data.map(f); m.rpos = new Map(m.row_index.map(function (r, k) { return [r, k]; })); }
  if (m.col_data) { m.col_data = m.col_data.map(f); m.cpos = new Map(m.col_index.map(function (c, k) { return [c, k]; })); }
});
function get(m, i, j) {
  if (!m) return undefined;
  if (m.data) return m.data[i * m.cols + j];
  if (!m.rpos) return undefined;  // a scratch matrix (page.hpp) before the module has computed it
  var k = m.rpos.get(i); if (k !== undefined) return m.row_data[k * m.cols + j];
  k = m.cpos ? m.cpos.get(j) : undefined; if (k !== undefined) return m.col_data[k * m.rows + i];
  return undefined;
}
function rl(m, i) { return m.row_labels && m.row_labels[i] !== undefined ? m.row_labels[i] : String(i + 1); }
function cl(m, j) { return m.col_labels && m.col_labels[j] !== undefined ? m.col_labels[j] : String(j + 1); }
// the full value of a double: the shortest text that reads back to it
function full(v) { return v === Infinity ? '\u221e' : v === -Infinity ? '\u2212\u221e' : isNaN(v) ? 'NaN' : (v < 0 ? '\u2212' + String(-v) : String(v)); }
// the shortest text that reads back to the same float32 (v is the float's exact value)
function text32(v) {
  if (!isFinite(v) || v === 0) return full(v);
  var p = 1; while (p < 9 && Math.fround(Number(v.toPrecision(p))) !== v) ++p;
  var a = Math.abs(v), s = a >= 1e-4 && a < 1e7 ? String(Number(v.toPrecision(p))) : v.toExponential(p - 1);  // as short(): 6.0336642e-6
  return s.charAt(0) === '-' ? '\u2212' + s.slice(1) : s;
}
// a value of matrix m as its dtype prints it: a float32 as the float's shortest text, a double in full
function vt(m, v) { return m && m.dtype === 'float32' ? text32(v) : full(v); }
// a table's value: at most 6 significant digits
function short(v) {
  if (!isFinite(v)) return full(v);
  if (v === 0) return '0';
  var a = Math.abs(v), s;
  if (a >= 1e-4 && a < 1e7) { s = String(Number(v.toPrecision(6))); }
  else { s = v.toExponential(5).replace(/\.?0+e/, 'e'); }
  return s.charAt(0) === '-' ? '\u2212' + s.slice(1) : s;
}
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  if (text !== undefined) e.textContent = text;
  return e;
}
function sel(tag, attrs, text) {
  var e = document.createElementNS(NS, tag);
  if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  if (text !== undefined) e.textContent = text;
  return e;
}
function cellName(m, i, j) { return m.caption + '(' + rl(m, i) + ', ' + cl(m, j) + ')'; }
function ulpOf(x, dtype) {
  var a = Math.abs(x); if (a === 0 || !isFinite(a)) return NaN;
  var e = Math.floor(Math.log2(a));
  if (Math.pow(2, e) > a) --e; else if (Math.pow(2, e + 1) <= a) ++e;  // log2 rounded across a power of two
  if (dtype === 'float32') return Math.pow(2, Math.max(e, -126) - 23);
  return Math.pow(2, Math.max(e, -1022) - 52);
}

// ---- explanations: {title, formula, terms: [[a, b], ...], sum, lines, value} -------------------
function explain(id, i, j) {
  var m = M[id], v = get(m, i, j), h = m.how || {op: ''}, x = {id: id, i: i, j: j, value: v, lines: [], terms: null};
  x.title = cellName(m, i, j) + ' = ' + vt(m, v);
  var A = M[h.a], B = M[h.b];
  if (h.op === 'dot' || h.op === 'matmul' || h.op === 'rowdot') {
    var terms = [], missing = false;
    for (var k = 0; k < h.n; ++k) {
      var a = get(A, i, h.ac + k);
      var b = h.op === 'dot' ? get(B, j, h.bc + k) : h.op === 'rowdot' ? get(B, i, h.bc + k) : get(B, h.br + k, h.bc + j);
      if (a === undefined || b === undefined) { missing = true; break; }
      terms.push([a, b]);
    }
    var bias = h.bias ? get(M[h.bias], 0, j) : undefined;
    if (h.op === 'rowdot') {
      x.formula = 'rowsum(' + A.caption + ' \u2218 ' + B.caption + ') of row ' + rl(A, i) + ' = \u03a3 over ' + h.n + ' terms of ' + A.caption + '(' + rl(A, i) + ', m) \u00d7 ' + B.caption + '(' + rl(B, i) + ', m)';
    } else if (h.op === 'dot') {
      x.formula = A.caption + '[' + rl(A, i) + '] \u00b7 ' + B.caption + '[' + rl(B, j) + ']' + (h.bias ? ' + ' + M[h.bias].caption + '[' + cl(m, j) + ']' : '') +
        (h.n === 1 ? ' = ' : ' = \u03a3 over ' + h.n + ' terms of ') + A.caption + '(' + rl(A, i) + ', m) \u00d7 ' + B.caption + '(' + rl(B, j) + ', m)';
    } else {
      x.formula = (h.n === 1 ? A.caption + '(' + rl(A, i) + ', ' + cl(A, h.ac) + ') \u00d7 ' + B.caption + '(' + rl(B, h.br) + ', ' + cl(B, h.bc + j) + ')'
                             : '\u03a3 over ' + h.n + ' terms of ' + A.caption + '(' + rl(A, i) + ', m) \u00d7 ' + B.caption + '(m, ' + cl(B, h.bc + j) + ')') +
        (h.bias ? ' + ' + M[h.bias].caption + '[' + cl(m, j) + ']' : '') +
        (B.caption.indexOf('value') >= 0 ? ': the values weighted by ' + A.caption + ' row ' + rl(A, i) : '');
    }
    if (missing) { x.lines.push('The terms of this sum are not on this page (it is summarised); qkv computed ' + vt(m, v) + '.'); return x; }
    var s = 0; terms.forEach(function (t) { s += t[0] * t[1]; });
    if (bias !== undefined) s += bias;
    x.terms = terms; x.bias = bias; x.sum = s; x.A = A; x.B = B; x.Bias = M[h.bias];
    return x;
  }
  if (h.op === 'scale') {
    var a0 = get(A, i, j);
    if (v === -Infinity && a0 !== -Infinity) {
      x.formula = 'masked: ' + (editor && editor.maskedByYou && editor.maskedByYou(id, i, j) ? 'you masked it (Alt+click, or M, again to unmask)' : h.mask || 'this key may not be seen') +
        ', so the scaled score is \u2212\u221e and its weight 0';
      x.masked = true; return x;
    }
    var B0 = h.b ? M[h.b] : undefined, b0 = B0 ? get(B0, i, j) : undefined;
    if (h.divisor) {  // a division, as the example computes it (page_how::divided)
      x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') / ' + full(h.divisor) + (B0 ? ' + ' + B0.caption + '(' + rl(B0, i) + ', ' + cl(B0, j) + ')' : '') +
        ' = ' + vt(A, a0) + ' / ' + full(h.divisor) + (B0 ? ' + ' + vt(B0, b0) : '') + ' (the scale ' + (h.note || '1/' + full(h.divisor)) + ')';
      x.sum = a0 / h.divisor + (B0 ? b0 : 0); x.scale = h.scale; x.divisor = h.divisor; x.operand = a0; x.added = b0;
      return x;
    }
    x.formula = h.scale + ' \u00d7 ' + A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ')' + (B0 ? ' + ' + B0.caption + '(' + rl(B0, i) + ', ' + cl(B0, j) + ')' : '') +
      ' = ' + full(h.scale) + ' \u00d7 ' + vt(A, a0) + (B0 ? ' + ' + vt(B0, b0) : '') + ' (the scale ' + (h.note || full(h.scale)) + ')';
    x.sum = h.scale * a0 + (B0 ? b0 : 0); x.scale = h.scale; x.operand = a0; x.added = b0;
    return x;
  }
  if (h.op === 'rope') {
    var hd = h.n, rw = h.ac, half = rw / 2, c6 = j % hd, base6 = j - c6, a6 = get(A, i, j);
    if (c6 >= rw) { x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + '), not rotated (column ' + c6 + ' of its head is past rotary_dim ' + rw + ')'; x.sum = a6; return x; }
    var il = h.note === 'interleaved', pair = il ? c6 >> 1 : c6 % half, first6 = il ? c6 % 2 === 0 : c6 < half;
    var o6 = base6 + (il ? (first6 ? c6 + 1 : c6 - 1) : (first6 ? c6 + half : c6 - half));
    var cs = get(M[h.b], i, pair), sn = get(M[h.bias], i, pair), b6 = get(A, i, o6);
    var nm = function (col) { return A.caption + '(' + rl(A, i) + ', ' + cl(A, col) + ')'; };
    x.formula = (first6 ? nm(j) + ' \u00d7 cos \u2212 ' + nm(o6) + ' \u00d7 sin' : nm(j) + ' \u00d7 cos + ' + nm(o6) + ' \u00d7 sin') +
      ' (RoPE, ' + h.note + ': pair ' + pair + ' of its head; cos and sin of the angle position \u00d7 base^(\u2212' + (2 * pair) + '/' + rw + '), row ' + rl(M[h.b], i) + ' of ' + M[h.b].caption + ' and ' + M[h.bias].caption + ')';
    if (a6 === undefined || b6 === undefined || cs === undefined || sn === undefined) { x.lines.push('The row is not on this page (it is summarised); qkv computed ' + vt(m, v) + '.'); return x; }
    x.formula += ' = ' + vt(A, a6) + ' \u00d7 ' + vt(M[h.b], cs) + (first6 ? ' \u2212 ' : ' + ') + vt(A, b6) + ' \u00d7 ' + vt(M[h.bias], sn);
    x.sum = first6 ? a6 * cs - b6 * sn : a6 * cs + b6 * sn;
    return x;
  }
  if (h.op === 'softmax' || h.op === 'softmax_naive') {
    var row = [], mx = -Infinity, miss = false, naive = h.op === 'softmax_naive';
    for (var q = 0; q < m.cols; ++q) { var s0 = get(A, i, q); if (s0 === undefined) { miss = true; break; } row.push(s0); if (s0 > mx) mx = s0; }
    x.formula = naive ? 'e^s / \u03a3 e^(s\u2096) over the ' + m.cols + ' scores of row ' + rl(A, i) + ' of ' + A.caption + ' (the tutorial\u2019s formula: no maximum subtracted)'
                      : 'e^(s \u2212 max) / \u03a3 e^(s\u2096 \u2212 max) over the ' + m.cols + ' scores of row ' + rl(A, i) + ' of ' + A.caption;
    if (miss) { x.lines.push('The row is not on this page (it is summarised); qkv computed ' + vt(m, v) + '.'); return x; }
    if (mx === -Infinity) { x.lines.push('Every key of this row is masked: qkv gives 0 (PyTorch gives NaN).'); x.sum = 0; x.softmax = {row: row, max: mx}; return x; }
    if (naive) mx = 0;  // e^s itself
    var ex = row.map(function (s1) { return Math.exp(s1 - mx); }), tot = 0;
    ex.forEach(function (e1) { tot += e1; });
    x.softmax = {row: row, max: mx, exps: ex, total: tot, s: row[j], naive: naive}; x.A = A;
    x.sum = ex[j] / tot;
    return x;
  }
  if (h.op === 'softmax_all') {  // one softmax over every cell of A (tutorial 000's numpy cell)
    var all = [], mx2 = -Infinity;
    for (var i2 = 0; i2 < A.rows; ++i2) for (var j2 = 0; j2 < A.cols; ++j2) { var s2 = get(A, i2, j2); if (s2 === undefined) { x.lines.push('The matrix is not on this page (it is summarised); qkv computed ' + vt(m, v) + '.'); return x; } all.push(s2); if (s2 > mx2) mx2 = s2; }
    x.formula = 'e^(s \u2212 max) / \u03a3 e^(s\u2096 \u2212 max) over all ' + all.length + ' scores of ' + A.caption + ' at once (softmax_all: the whole matrix sums to 1, a row does not)';
    if (mx2 === -Infinity) { x.lines.push('Every score is masked: qkv gives 0.'); x.sum = 0; return x; }
    var ex2 = all.map(function (s3) { return Math.exp(s3 - mx2); }), tot2 = 0;
    ex2.forEach(function (e3) { tot2 += e3; });
    x.softmax = {row: all, max: mx2, exps: ex2, total: tot2, s: all[i * A.cols + j], k: i * A.cols + j, naive: false}; x.A = A;
    x.sum = ex2[i * A.cols + j] / tot2;
    return x;
  }
  if (h.op === 'interleave' || h.op === 'deinterleave') {  // a permutation of the row's columns
    var half9 = A.cols / 2, from9 = h.op === 'interleave' ? (j % 2 === 0 ? j / 2 : (j - 1) / 2 + half9) : (j < half9 ? 2 * j : 2 * (j - half9) + 1);
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, from9) + ') = ' + vt(A, get(A, i, from9)) + (h.op === 'interleave'
      ? ': the row\u2019s two halves as pairs (column q and q + ' + half9 + ' side by side: half_split\u2019s pair as an interleaved one)'
      : ': the interleaved pairs back as the row\u2019s two halves (column 2q to q, 2q + 1 to q + ' + half9 + ')');
    x.sum = get(A, i, from9); return x;
  }
  if (h.op === 'round16') {  // core/half.hpp: to nearest, ties to even, read back as a float
    var a9 = get(A, i, j), bits9 = h.note === 'bfloat16' ? 8 : 11;
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') = ' + vt(A, a9) + ' rounded to ' + h.note + ' (' + bits9 + ' significant bits, to nearest, ties to even), read back as a float: ' + vt(m, v);
    x.lines.push('A relative change of at most 2^\u2212' + bits9 + ' (' + (h.note === 'bfloat16' ? 'float\u2019s range' : 'largest finite 65504; subnormals below 2^\u221214') + '); the arithmetic after it is float32.');
    return x;
  }
  if (h.op === 'online_state' || h.op === 'online_p' || h.op === 'online_output' || h.op === 'online_attention') return explainOnline(x, m, h, A, B, i, j);
  if (h.op === 'softmax_backward') {
    var p7 = get(A, i, j), dp7 = get(B, i, j), D7 = M[h.bias], d7 = get(D7, i, 0);
    if (p7 === undefined || dp7 === undefined || d7 === undefined) { x.lines.push('The row is not on this page (it is summarised); qkv computed ' + vt(m, v) + '.'); return x; }
    if (h.mask && v === 0 && p7 === 0) {
      x.formula = 'masked: ' + h.mask + ', so its weight is 0 and its gradient exactly 0 (nothing flows to a key the query does not see)';
      x.masked = true; return x;
    }
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') \u00d7 (' + B.caption + '(' + rl(B, i) + ', ' + cl(B, j) + ') \u2212 ' + D7.caption + '(' + rl(D7, i) + ')) = ' +
      vt(A, p7) + ' \u00d7 (' + vt(B, dp7) + ' \u2212 ' + vt(D7, d7) + ') (SoftmaxBackward0: the weight times how much its d_weight exceeds the row\u2019s weighted mean D)';
    x.sum = p7 * (dp7 - d7); return x;
  }
  if (h.op === 'add') {
    var a2 = get(A, i, j), b2 = get(B, i, j);
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') + ' + B.caption + '(' + rl(B, i) + ', ' + cl(B, j) + ') = ' + vt(A, a2) + ' + ' + vt(B, b2);
    x.sum = a2 + b2; return x;
  }
  if (h.op === 'block') {
    x.formula = A.caption + '(' + rl(A, h.br + i) + ', ' + cl(A, h.bc + j) + '), a block of ' + A.caption + ' from its row ' + rl(A, h.br) + ' and column ' + cl(A, h.bc);
    x.sum = get(A, h.br + i, h.bc + j); return x;
  }
  if (h.op === 'hconcat') {
    var left = j < A.cols, S8 = left ? A : B, j8 = left ? j : j - A.cols, by = A.caption + '\u2019s ' + A.cols + ' columns, then ' + B.caption + '\u2019s';
    // a scratch operand (page.hpp: the module's working matrix, not embedded) is itself two side by side
    if (A.scratch) {  // the matrices it chains: '12 matrices, 768 columns: head 0's first, head 11's last'
      var n9 = 1, F9 = A; while (F9.scratch && F9.how && F9.how.op === 'hconcat') { ++n9; F9 = M[F9.how.a]; }
      by = (n9 + 1) + ' matrices, ' + m.cols + ' columns: ' + F9.caption + ' first, ' + B.caption + ' last';
    }
    while (S8.scratch && S8.how && S8.how.op === 'hconcat') { var A9 = M[S8.how.a], l9 = j8 < A9.cols; j8 = l9 ? j8 : j8 - A9.cols; S8 = l9 ? A9 : M[S8.how.b]; }
    x.formula = S8.caption + '(' + rl(S8, i) + ', ' + cl(S8, j8) + '), side by side (' + by + ')';
    x.sum = get(S8, i, j8); return x;
  }
  if (h.op === 'transpose') {
    x.formula = A.caption + '(' + rl(A, j) + ', ' + cl(A, i) + '), transposed'; x.sum = get(A, j, i); return x;
  }
  if (h.op === 'colsum') {  // the sum of each column (flat::column_sums)
    var col = []; for (var r7 = 0; r7 < A.rows; ++r7) col.push(get(A, r7, j));
    x.formula = 'the sum of column ' + cl(A, j) + ' of ' + A.caption + ', row 1 first: ' + col.map(function (a7) { return vt(A, a7); }).join(' + ');
    x.sum = col.reduce(function (t7, a7) { return t7 + a7; }, 0); return x;
  }
  if (h.op === 'cross_entropy') {  // -log softmax(logits)(i, target) (flat::cross_entropy_losses)
    var t9 = get(B, 0, i), row9 = [], mx9 = -Infinity, s9 = 0;
    for (var c9 = 0; c9 < A.cols; ++c9) { row9.push(get(A, i, c9)); mx9 = Math.max(mx9, row9[c9]); }
    row9.forEach(function (a9) { s9 += Math.exp(a9 - mx9); });
    x.formula = '\u2212log softmax(' + A.caption + ')(' + rl(A, i) + ', ' + cl(A, t9) + ') = log \u03a3 e^(a \u2212 ' + vt(A, mx9) + ') \u2212 (' + vt(A, row9[t9]) + ' \u2212 ' + vt(A, mx9) + '), over the row [' + row9.map(function (a9) { return vt(A, a9); }).join(', ') + '], target ' + cl(A, t9);
    x.sum = Math.log(s9) - (row9[t9] - mx9); return x;
  }
  if (h.op === 'embedding_backward') {  // the rows of d_out whose id is this row (flat::embedding_backward)
    var terms10 = [];
    for (var k10 = 0; k10 < B.cols; ++k10) if (get(B, 0, k10) === i) terms10.push(get(A, k10, j));
    x.formula = terms10.length ? 'the sum of column ' + cl(A, j) + ' of ' + A.caption + ' over the positions whose token is ' + rl(m, i) + ': ' + terms10.map(function (a10) { return vt(A, a10); }).join(' + ') : 'no position holds token ' + rl(m, i) + ': 0';
    x.sum = terms10.reduce(function (t10, a10) { return t10 + a10; }, 0); return x;
  }
  if (h.op === 'embedding') {  // a row of the table (flat::embedding)
    var id11 = get(B, 0, i);
    x.formula = A.caption + '(' + rl(A, id11) + ', ' + cl(A, j) + '): row ' + rl(A, id11) + ' of ' + A.caption + ', the token at position ' + rl(m, i);
    x.sum = get(A, id11, j); return x;
  }
  if (h.op === 'key_padding_mask') {  // 1 where the key is padding (flat::key_padding_mask)
    var len12 = get(A, 0, i);
    x.formula = (j >= len12 ? '1: key ' + j + ' is padding' : '0: key ' + j + ' is a real token') + ', as ' + A.caption + '(' + cl(A, i) + ') = ' + vt(A, len12) +
      ' (keys from 0; padding where j \u2265 the length)';
    x.sum = j >= len12 ? 1 : 0; return x;
  }
  if (h.op === 'flash_row_max' || h.op === 'flash_row_sum' || h.op === 'flash_weights' || h.op === 'logsumexp' || h.op === 'logsumexp_weights' ||
      h.op === 'flash_over_keys' || h.op === 'flash_over_queries') return explainFlash(x, m, h, A, B, i, j);
  if (h.op === 'sgd') {  // one SGD step (flat::sgd): W - lr g, one rounding
    var w8 = get(A, i, j), g8 = get(B, i, j);
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') \u2212 ' + vt(m, h.scale) + ' \u00d7 ' + B.caption + '(' + rl(B, i) + ', ' + cl(B, j) + ') = ' + vt(A, w8) + ' \u2212 ' + vt(m, h.scale) + ' \u00d7 ' + vt(B, g8) + ' (one rounding: a fused multiply-add, as PyTorch\u2019s SGD)';
    x.sum = w8 - h.scale * g8; return x;
  }
  if (h.op === 'adamw') {  // AdamW's first step from zero moments (flat::adamw, adamw_element)
    var w12 = get(A, i, j), g12 = get(B, i, j), S12 = M[h.bias], s12 = [];
    for (var k12 = 0; k12 < 8; ++k12) s12.push(get(S12, 0, k12));
    var m12 = s12[2] * g12, v12 = s12[4] * g12 * g12;
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') \u00d7 ' + vt(S12, s12[0]) + ' + ' + vt(S12, s12[5]) + ' \u00d7 m / (sqrt(v) / ' + vt(S12, s12[6]) + ' + ' + vt(S12, s12[7]) + '), m = ' + vt(S12, s12[2]) + ' \u00d7 g, v = ' + vt(S12, s12[4]) + ' \u00d7 g \u00d7 g, g = ' + B.caption + '(' + rl(B, i) + ', ' + cl(B, j) + ') = ' + vt(B, g12) + ', ' + A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') = ' + vt(A, w12);
    x.lines.push('AdamW\u2019s first step (its moments start at 0; the scalars are ' + S12.caption + '): about lr against the sign of g, whatever its size; each operation rounded to float as PyTorch\u2019s kernels round it.');
    x.sum = w12 * s12[0] + s12[5] * m12 / (Math.sqrt(v12) / s12[6] + s12[7]); return x;
  }
  if (h.op === 'cast') {  // another type (flat::cast): float32 -> double exactly, a float -> its exact rational
    x.formula = A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') = ' + vt(A, get(A, i, j)) + ' (' + A.dtype + ') as ' + (m.dtype === 'exact' ? 'an exact rational: the float\u2019s exact value' :
      A.dtype === 'float64' && m.dtype === 'float32' ? 'float32, rounded to the nearest float32' :
      A.dtype === 'exact' ? m.dtype + ', rounded to the nearest (ties to even)' : m.dtype + ', exactly');
    x.sum = get(A, i, j); return x;
  }
  if (h.op === 'relu') {
    var a3 = get(A, i, j);
    x.formula = 'max(0, ' + A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ')) = max(0, ' + vt(A, a3) + ')';
    x.sum = Math.max(0, a3); return x;
  }
  if (h.op === 'layernorm') {
    var r4 = [], mean = 0, vr = 0;
    for (var c4 = 0; c4 < A.cols; ++c4) { var a4 = get(A, i, c4); if (a4 === undefined) { x.lines.push('The row is not on this page (it is summarised).'); return x; } r4.push(a4); mean += a4; }
    mean /= r4.length; r4.forEach(function (a5) { vr += (a5 - mean) * (a5 - mean); }); vr /= r4.length;
    var w4 = h.b ? get(M[h.b], 0, j) : 1, b4 = h.bias ? get(M[h.bias], 0, j) : 0;
    x.formula = '(a − mean) / sqrt(variance + ' + full(h.scale) + ') × ' + (h.b ? vt(M[h.b], w4) : '1') + ' + ' + (h.bias ? vt(M[h.bias], b4) : '0') + ', a = ' + A.caption + '(' + rl(A, i) + ', ' + cl(A, j) + ') = ' + vt(A, r4[j]) +
      ', over the ' + r4.length + ' values of its row [' + r4.map(function (a5) { return vt(A, a5); }).join(', ') + ']';
    x.lines.push('mean = ' + full(mean) + ', variance (biased: over n) = ' + full(vr) + ' (both in double, in this page)');
    x.sum = (r4[j] - mean) / Math.sqrt(vr + h.scale) * w4 + b4; return x;
  }
  x.formula = 'given (an input of this step)';
  return x;
}

// flash attention's online softmax (core/flat_steps.hpp's online_state, online_p, online_output,
// online_attention): each cell's formula with its operands, its value recomputed in double
function explainOnline(x, m, h, A, B, i, j) {
  var nm = function (M0, r, c) { return M0.caption + '(' + rl(M0, r) + ', ' + cl(M0, c) + ')'; };
  if (h.op === 'online_p') {
    var s5 = get(A, i, h.ac + j), m5 = get(B, i, 1);
    x.formula = 'e^(' + nm(A, i, h.ac + j) + ' \u2212 m) = e^(' + vt(A, s5) + ' \u2212 ' + vt(B, m5) + '), m the running maximum ' + nm(B, i, 1);
    x.sum = s5 === -Infinity ? 0 : Math.exp(s5 - m5); return x;
  }
  if (h.op === 'online_output') {
    var o5 = get(A, i, j), l5 = get(B, i, 3);
    x.formula = nm(A, i, j) + ' / l = ' + vt(A, o5) + ' / ' + vt(B, l5) + ', l the running sum ' + nm(B, i, 3) + ': the output if the keys ended here';
    x.sum = l5 === 0 ? 0 : o5 / l5; return x;
  }
  if (h.op === 'online_attention') {
    var row5 = [], mx5 = -Infinity;
    for (var k5 = 0; k5 < A.cols; ++k5) { var s6 = get(A, i, k5); if (s6 === undefined) return x; row5.push(s6); if (s6 > mx5) mx5 = s6; }
    x.formula = 'flash attention: the online softmax of row ' + rl(A, i) + ' of ' + A.caption + ' over column ' + cl(B, j) + ' of ' + B.caption + ', ' + h.n + ' keys at a time (m, l and o kept, the weights never written)';
    var t5 = 0, o6 = 0;
    row5.forEach(function (s7, k7) { var e7 = s7 === -Infinity ? 0 : Math.exp(s7 - mx5); t5 += e7; o6 += e7 * get(B, k7, j); });
    x.lines.push('The same value as the materialised \u03a3 softmax(s)\u2096 v\u2096 in exact arithmetic; float32 rounds each block\u2019s steps (step 6 bounds the difference).');
    x.sum = mx5 === -Infinity ? 0 : o6 / t5; return x;
  }
  // online_state: row i is [block max, m, rescale, l, o] after the block of h.n scores
  var P = h.bias ? M[h.bias] : null, sc = [];
  for (var k8 = 0; k8 < h.n; ++k8) sc.push(get(A, i, h.ac + k8));
  var mOld = P ? get(P, i, 1) : -Infinity, lOld = P ? get(P, i, 3) : 0, bm = Math.max.apply(null, sc), mNew = Math.max(mOld, bm);
  var alpha = mOld === -Infinity ? 0 : Math.exp(mOld - mNew), ps = sc.map(function (s8) { return s8 === -Infinity ? 0 : Math.exp(s8 - mNew); });
  var before = P ? ' (before it: ' + P.caption + ')' : ' (the first block: nothing kept yet, m = \u2212\u221e, l = 0, o = 0)';
  var scores = '[' + sc.map(function (s8) { return vt(A, s8); }).join(', ') + ']';
  if (j === 0) { x.formula = 'the block\u2019s maximum: max ' + scores; x.sum = bm; return x; }
  if (j === 1) { x.formula = 'm = max(m_old, block max) = max(' + full(mOld) + ', ' + vt(A, bm) + ')' + before; x.sum = mNew; return x; }
  if (j === 2) { x.formula = 'rescale = e^(m_old \u2212 m) = e^(' + full(mOld) + ' \u2212 ' + vt(A, mNew) + ')' + before + ': how much l and o shrink to the new maximum'; x.sum = alpha; return x; }
  var sp = 0; ps.forEach(function (p8) { sp += p8; });
  if (j === 3) { x.formula = 'l = l_old \u00d7 rescale + \u03a3 e^(s \u2212 m) = ' + full(lOld) + ' \u00d7 ' + full(alpha) + ' + \u03a3 e^(' + scores + ' \u2212 ' + vt(A, mNew) + ')' + before; x.sum = lOld * alpha + sp; return x; }
  var c8 = j - 4, oOld = P ? get(P, i, j) : 0, acc = oOld * alpha;
  ps.forEach(function (p8, k9) { acc += p8 * get(B, h.br + k9, c8); });
  x.formula = 'o = o_old \u00d7 rescale + \u03a3 e^(s\u2096 \u2212 m) \u00d7 ' + B.caption + '(k, ' + cl(B, c8) + ') over the block\u2019s keys ' + rl(B, h.br) + '.. = ' + full(oOld) + ' \u00d7 ' + full(alpha) + ' + \u2026' + before;
  x.sum = acc; return x;
}

// flash attention's m, l and L and its backward's recomputed weights and sums (core/flat_steps.hpp's
// kinds 46-52, example 16): each cell's formula with its operands, its value recomputed in double
function explainFlash(x, m, h, A, B, i, j) {
  // a matrix by the name its caption starts with ('m: each query's ...' is m, 'd_context = dO: ...' d_context)
  var nmOf = function (M0) { return M0.caption.split(/: | = /)[0]; };
  var nm = function (M0, r, c) { return nmOf(M0) + '(' + rl(M0, r) + ', ' + cl(M0, c) + ')'; };
  if (h.op === 'flash_row_max' || h.op === 'flash_row_sum') {
    var row = [], mx = -Infinity;
    for (var k = 0; k < A.cols; ++k) { var s0 = get(A, i, k); row.push(s0); if (s0 > mx) mx = s0; }
    var shown = '[' + row.map(function (s1) { return vt(A, s1); }).join(', ') + ']';
    if (h.op === 'flash_row_max') {
      x.formula = 'm = the running maximum of row ' + rl(A, i) + ' of ' + nmOf(A) + ' after its last block of ' + h.n + ' keys = max ' + shown;
      x.sum = mx; return x;
    }
    var t = 0; row.forEach(function (s2) { t += s2 === -Infinity ? 0 : Math.exp(s2 - mx); });
    x.formula = 'l = \u03a3 e^(s \u2212 m) over row ' + rl(A, i) + ' of ' + nmOf(A) + ', ' + h.n + ' keys at a time, l rescaled by e^(m_old \u2212 m) at each new maximum; m = ' + vt(A, mx) + ', s = ' + shown;
    x.lines.push('The same value as \u03a3 e^(s \u2212 max) at once in exact arithmetic; float rounds each block\u2019s sum and each rescale.');
    x.sum = mx === -Infinity ? 0 : t; return x;
  }
  if (h.op === 'logsumexp') {
    var m3 = get(A, i, 0), l3 = get(B, i, 0);
    x.formula = nm(A, i, 0) + ' + log ' + nm(B, i, 0) + ' = ' + vt(A, m3) + ' + log ' + vt(B, l3) + ' = log \u03a3 e^s of the row: FlashAttention-2 keeps this one number per query instead of m and l';
    x.sum = l3 === 0 ? -Infinity : m3 + Math.log(l3); return x;
  }
  if (h.op === 'flash_weights' || h.op === 'logsumexp_weights') {
    var s4 = get(A, i, j), m4 = get(B, i, 0), L4 = h.op === 'flash_weights' ? M[h.bias] : null, l4 = L4 ? get(L4, i, 0) : 1;
    if (s4 === -Infinity) { x.formula = 'masked: the score is \u2212\u221e, so its weight is 0 and the loop skips the key'; x.masked = true; x.sum = 0; return x; }
    x.formula = L4 ? 'e^(' + nm(A, i, j) + ' \u2212 m) / l = e^(' + vt(A, s4) + ' \u2212 ' + vt(B, m4) + ') / ' + vt(L4, l4) + ', m and l the forward kept (' + nmOf(B) + ', ' + nmOf(L4) + ')'
                   : 'e^(' + nm(A, i, j) + ' \u2212 L) = e^(' + vt(A, s4) + ' \u2212 ' + vt(B, m4) + '), L = ' + nm(B, i, 0) + ': one exp, no division';
    x.lines.push('The weight flash\u2019s backward recomputes for this query and key when it reaches their block, and drops: no T \u00d7 S matrix is kept (this hidden matrix is the page\u2019s, to show its numbers).');
    x.sum = Math.exp(s4 - m4) / l4; return x;
  }
  // the backward's sums in its loop's order: over the keys (dQ) or over the queries (dK, dV)
  var keys = h.op === 'flash_over_keys', S5 = M[h.bias], n5 = keys ? A.cols : A.rows, terms = [], skipped = 0;
  for (var t5 = 0; t5 < n5; ++t5) {
    var r5 = keys ? i : t5, c5 = keys ? t5 : i;
    if (get(S5, r5, c5) === -Infinity) { ++skipped; continue; }
    terms.push([get(A, r5, c5), get(B, t5, j)]);
  }
  x.formula = keys ? '\u03a3 over the keys k of ' + nmOf(A) + '(' + rl(A, i) + ', k) \u00d7 ' + nmOf(B) + '(k, ' + cl(B, j) + '), summed as flash\u2019s loop sums it: block by block, keys ascending'
                   : '\u03a3 over the queries q of ' + nmOf(A) + '(q, ' + cl(A, i) + ') \u00d7 ' + nmOf(B) + '(q, ' + cl(B, j) + '), summed as flash\u2019s loop sums it: each block\u2019s keys against every query, queries ascending';
  if (skipped) x.lines.push(skipped + ' term' + (skipped > 1 ? 's' : '') + ' skipped: ' + (keys ? 'a key' : 'a query') + ' whose score in ' + nmOf(S5) + ' is \u2212\u221e (masked) sends nothing.');
  var s6 = 0; terms.forEach(function (p6) { s6 += p6[0] * p6[1]; });
  x.terms = terms; x.sum = s6; x.A = A; x.B = B;
  return x;
}

function explanationNode(x) {
  var m = M[x.id], box = document.createDocumentFragment();
  box.appendChild(el('div', {'class': 'x-title'}, x.title));
  if (x.formula) box.appendChild(el('div', {'class': 'x-formula'}, '= ' + x.formula));
  if (x.terms) {
    var t = el('div', {'class': 'x-terms'}), shown = Math.min(x.terms.length, 64);
    t.appendChild(document.createTextNode('= '));
    for (var k = 0; k < shown; ++k) {
      if (k) t.appendChild(document.createTextNode(' + '));
      var ta = vt(x.A, x.terms[k][0]), tb = vt(x.B, x.terms[k][1]);
      t.appendChild(el('span', {'class': 'term', 'data-a': ta.replace('\u2212', '-'), 'data-b': tb.replace('\u2212', '-')}, ta + ' \u00d7 ' + tb));
    }
    if (shown < x.terms.length) t.appendChild(document.createTextNode(' + \u2026 (' + x.terms.length + ' terms in all)'));
    if (x.bias !== undefined) { t.appendChild(document.createTextNode(' + ')); var tbias = vt(x.Bias, x.bias); t.appendChild(el('span', {'class': 'bias', 'data-b': tbias.replace('\u2212', '-')}, tbias)); }
    box.appendChild(t);
  }
  if (x.softmax && x.softmax.exps) {
    var sm = x.softmax, f = el('div', {'class': 'x-terms'});
    var ex1 = function (s1) { return sm.naive ? 'e^(' + vt(x.A, s1) + ')' : 'e^(' + vt(x.A, s1) + ' \u2212 ' + vt(x.A, sm.max) + ')'; };
    var ns = sm.row.map(function (s1) { return s1 === -Infinity ? 'masked' : ex1(s1); });
    var shownK = Math.min(ns.length, 24);
    f.textContent = '= ' + ex1(sm.s) + ' / (' + ns.slice(0, shownK).join(' + ') + (shownK < ns.length ? ' + \u2026' : '') + ')' +
      ' = ' + short(sm.exps[sm.k !== undefined ? sm.k : x.j]) + ' / ' + short(sm.total);
    box.appendChild(f);
  }
  if (x.sum !== undefined) box.appendChild(el('div', {'class': 'x-sum', 'data-sum': String(x.sum)}, '= ' + full(x.sum) + (m.dtype === 'exact' ? '' : ' (computed in double, in this page, from the operands\u2019 exact values)')));
  if (m.dtype !== 'exact' && x.value !== undefined) box.appendChild(el('div', {'class': 'x-value'}, 'qkv computed it in ' + m.dtype + ': ' + vt(m, x.value)));
  x.lines.forEach(function (l) { box.appendChild(el('div', {'class': 'x-note'}, l)); });
  var key = x.i + ',' + x.j;
  if (editor) editor.note(box, x);
  if (m.exact && m.exact[key] !== undefined) box.appendChild(el('div', {'class': 'x-sum'}, 'exactly ' + m.exact[key]));
  // after an edit the truth is the editor's, recomputed for the learner's inputs (null: none for
  // them); undefined: the page's own (no edit, or no truth module: then a cell an edit changed has
  // none, the page's truth being for the example's inputs)
  var tr = editor && editor.truth && m.truth ? editor.truth(x.id, x.i, x.j) : undefined;
  if (tr) {
    box.appendChild(el('div', {'class': 'x-note x-truth', 'data-ulps': String(tr.ulps)}, 'Error against the truth (' + m.truth.name + ' = ' + tr.text + '): ' +
      short(tr.ulps) + ' ulp of ' + m.dtype + '.'));
  } else if (tr === undefined && m.truth && m.truth.ulps[key] !== undefined && !(editor && editor.changed(x.id, x.i, x.j))) {
    var tt = m.truth.ulps[key + 't'];
    box.appendChild(el('div', {'class': 'x-note x-truth', 'data-ulps': String(m.truth.ulps[key])}, 'Error against the truth (' + m.truth.name + (tt !== undefined ? ' = ' + tt : '') + '): ' +
      short(m.truth.ulps[key]) + ' ulp of ' + m.dtype + '.'));
  }
  if (m.expected || m.proofs) {
    var p = el('div', {'class': 'x-proof'});
    if (m.expected && m.expected.values[key] !== undefined) {
      var e = m.expected.values[key], tol = m.expected.tolerance, err = x.value - e;
      var line = 'Proven at compile time: ' + m.caption + ' = ' + m.expected.name + ' (' + full(e) + ') ' +
        (tol === 0 ? 'exactly' : tol < 0 ? 'within the bound its static_assert derives' : 'within ' + full(tol)) + (m.expected.tolerance_text ? ' (' + m.expected.tolerance_text + ')' : '') + '.';
      p.appendChild(el('div', null, line));
      if (m.dtype === 'float32' || m.dtype === 'float64') {
        var u = ulpOf(e, m.dtype);
        // err: the float's exact value minus the expected double (exact in double when they are
        // close, Sterbenz); u: the ulp of m.dtype at the expected value, a power of two
        p.appendChild(el('div', {'class': 'x-note x-error', 'data-err': String(err), 'data-ulps': String(err / u)}, 'Error against ' + m.expected.name + ': ' + full(err) +
          (isNaN(u) ? '' : ' = ' + short(err / u) + ' ulp of ' + m.dtype + ' at ' + full(e))));
      }
    }
    (m.proofs || []).forEach(function (k) {
      var pr = D.proofs[k];
      p.appendChild(el('div', {'class': 'x-note'}, pr.file + ':' + pr.line));
      p.appendChild(el('pre', null, (pr.comment ? pr.comment + '\n' : '') + pr.text));
    });
    box.appendChild(p);
  }
  return box;
}

// ---- the tooltip ------------------------------------------------------------------------------
var tip = document.getElementById('qkv-tip'), pinned = null;
function showTip(target, node) {
  tip.textContent = ''; tip.appendChild(node); tip.hidden = false; tip.style.maxHeight = '';
  var r = target.getBoundingClientRect(), w = tip.offsetWidth, h = tip.offsetHeight;
  var left = Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - w - 8);
  tip.style.left = Math.max(window.scrollX + 4, left) + 'px';
  // on screen, and never over its cell (the mouse would leave the cell for the tooltip): below
  // the cell when it fits in the window, else above it, else on the roomier side with the
  // height of that side, scrolling inside (the title and formula first, the proofs below)
  var vh = window.innerHeight, below = vh - r.bottom - 10, above = r.top - 10, top;
  if (h <= below) top = r.bottom + 6;
  else if (h <= above) top = r.top - h - 6;
  else if (below >= above) { tip.style.maxHeight = Math.max(below, 60) + 'px'; top = r.bottom + 6; }
  else { tip.style.maxHeight = above + 'px'; top = r.top - tip.offsetHeight - 6; }
  tip.style.top = (window.scrollY + top) + 'px';
}
function tipFor(target) {
  if (target.hasAttribute('data-m')) return explanationNode(explain(target.getAttribute('data-m'), +target.getAttribute('data-i'), +target.getAttribute('data-j')));
  if (target.hasAttribute('data-block')) { var f = document.createDocumentFragment(); f.appendChild(el('div', {'class': 'x-title'}, target.getAttribute('data-block'))); return f; }
  return null;
}
function onEnter(ev) {
  var t = ev.target.closest ? ev.target.closest('[data-m],[data-block]') : null;
  if (!t || (pinned && pinned !== t)) return;
  var n = tipFor(t); if (n) showTip(t, n);
}
function onLeave(ev) {
  var t = ev.target.closest ? ev.target.closest('[data-m],[data-block]') : null;
  if (t && !pinned && ev.type === 'mouseout') tip.hidden = true;
}
document.addEventListener('mouseover', onEnter);
document.addEventListener('focusin', function (ev) { if (pinned) { pinned.classList.remove('pinned'); pinned = null; } onEnter(ev); });
document.addEventListener('mouseout', onLeave);
document.addEventListener('focusout', function () { if (!pinned) tip.hidden = true; });
document.addEventListener('click', function (ev) {
  var t = ev.target.closest ? ev.target.closest('[data-m],[data-block]') : null;
  if (pinned) pinned.classList.remove('pinned');
  if (!t || t === pinned) { pinned = null; tip.hidden = true; return; }
  pinned = t; t.classList.add('pinned'); var n = tipFor(t); if (n) showTip(t, n);
});
document.addEventListener('keydown', function (ev) {
  if (ev.key === 'Escape') { if (pinned) pinned.classList.remove('pinned'); pinned = null; tip.hidden = true; }
});

// ---- tables -----------------------------------------------------------------------------------
function withGaps(idx) { var out = []; idx.forEach(function (v, k) { if (k && v !== idx[k - 1] + 1) out.push(-1); out.push(v); }); return out; }
function table(id) {
  var m = M[id], fig = el('figure', {'class': 'matrix', 'id': 'm-' + id});
  var cap = el('figcaption');
  cap.appendChild(el('code', null, m.caption));
  cap.appendChild(document.createTextNode(' (' + m.rows + ', ' + m.cols + ') '));
  cap.appendChild(el('span', {'class': 'dt'}, m.dtype === 'exact' ? 'exact rationals' : m.dtype));
  if (m.proofs || m.expected) cap.appendChild(el('span', {'class': 'dt'}, ' \u00b7 proven'));
  fig.appendChild(cap);
  var rows = withGaps(m.shown_rows), cols = withGaps(m.shown_cols);
  if (m.shown_rows.length < m.rows || m.shown_cols.length < m.cols)
    fig.appendChild(el('div', {'class': 'summary'}, 'Summarised: ' + m.shown_rows.length + ' of ' + m.rows + ' rows and ' +
      m.shown_cols.length + ' of ' + m.cols + ' columns shown (the first and last ' + D.limits.edge + ' of a dimension above ' + D.limits.whole_side +
      '), because the page holds more than ' + D.limits.full_numbers + ' numbers.'));
  var sc = el('div', {'class': 'scroll'}), t = el('table', {'class': 'm'}), tr = el('tr');
  tr.appendChild(el('th'));
  cols.forEach(function (j) { tr.appendChild(j < 0 ? el('th', {'class': 'gap'}, '\u2026') : el('th', {scope: 'col'}, cl(m, j))); });
  t.appendChild(tr);
  rows.forEach(function (i) {
    var r = el('tr');
    if (i < 0) { r.appendChild(el('th', {'class': 'gap'}, '\u22ee')); cols.forEach(function () { r.appendChild(el('td', {'class': 'gap'}, '')); }); t.appendChild(r); return; }
    r.appendChild(el('th', {scope: 'row'}, rl(m, i)));
    cols.forEach(function (j) {
      if (j < 0) { r.appendChild(el('td', {'class': 'gap'}, '\u2026')); return; }
      var v = get(m, i, j), key = i + ',' + j;
      // a float32 in full (its shortest text, at most 9 digits: 7.7999997 is not 7.8); a double to 6 digits
      var text = m.exact && m.exact[key] !== undefined ? m.exact[key] : m.dtype === 'float32' ? text32(v) : short(v);
      var td = el('td', {tabindex: '0', 'data-m': id, 'data-i': String(i), 'data-j': String(j)}, text);
      if (v === -Infinity && m.how && m.how.op === 'scale') td.className = 'masked';
      if (m.expected || m.proofs) td.classList.add('proven');
      r.appendChild(td);
    });
    t.appendChild(r);
  });
  sc.appendChild(t); fig.appendChild(sc);
  return fig;
}

// ---- heatmaps ---------------------------------------------------------------------------------
var BLUES = [[247,251,255],[222,235,247],[198,219,239],[158,202,225],[107,174,214],[66,146,198],[33,113,181],[8,81,156],[8,48,107]];
function colour(t) {
  if (isNaN(t)) return '#bdbdbd';
  t = Math.min(1, Math.max(0, t)) * 8; var i = Math.min(7, Math.floor(t)), f = t - i, c = [0, 1, 2].map(function (k) { return Math.round(BLUES[i][k] + (BLUES[i + 1][k] - BLUES[i][k]) * f); });
  return '#' + c.map(function (k) { return (k < 16 ? '0' : '') + k.toString(16); }).join('');
}
function wrap(text, n) { var words = text.split(' '), lines = [''], k; for (k = 0; k < words.length; ++k) { var l = lines[lines.length - 1]; if (l && (l + ' ' + words[k]).length > n) lines.push(words[k]); else lines[lines.length - 1] = l ? l + ' ' + words[k] : words[k]; } return lines; }
var heatmaps = [];
function drawHeatmap(hm, head) {
  var ids = hm.ids, m0 = M[ids[0]], blocks = hm.blocks, R = hm.grid[0], C = hm.grid[1];
  var value = function (i, j) { return blocks ? blocks[head].mean[i * C + j] : get(M[ids[head]], i, j); };
  var lo = Infinity, hi = -Infinity, i, j;
  for (i = 0; i < R; ++i) for (j = 0; j < C; ++j) { var v0 = num(value(i, j)); if (isFinite(v0)) { lo = Math.min(lo, v0); hi = Math.max(hi, v0); } }
  // weights (all in [0, 1]): from 0 to the head's largest weight, so that a head that spreads
  // its weight over many keys still shows its pattern; the legend gives the range
  if (lo >= 0 && hi <= 1) { lo = 0; if (!(hi > 0)) hi = 1; } else if (!(lo < hi)) { lo = 0; hi = 1; }
  var rowL = function (i) { return blocks ? hm.block_rows[i] : rl(m0, i); }, colL = function (j) { return blocks ? hm.block_cols[j] : cl(m0, j); };
  var cs = Math.max(8, Math.min(44, Math.floor(520 / Math.max(R, C))));
  var lw = 0, ch = 0; for (i = 0; i < R; ++i) lw = Math.max(lw, rowL(i).length); for (j = 0; j < C; ++j) ch = Math.max(ch, colL(j).length);
  var fs = cs >= 14 ? 12 : 9, cw = fs * 0.62;
  var titleLines = wrap(hm.text + (ids.length > 1 ? ' \u2014 ' + hm.names[head] : ''), Math.max(30, Math.floor((C * cs + lw * cw + 120) / 7.5)));
  var top = 10 + titleLines.length * 18, left = 10 + Math.ceil(lw * cw) + 6, gridTop = top + Math.ceil(ch * cw * 0.72) + 12;
  var lh = Math.min(160, Math.max(80, R * cs - 60));
  var W = Math.max(left + C * cs + 110, 20 + Math.ceil(Math.max.apply(null, titleLines.map(function (l) { return l.length; })) * 8.6)), H = Math.max(gridTop + R * cs + 34, gridTop + lh + 56);
  var svg = sel('svg', {xmlns: NS, width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'font-family': 'sans-serif', 'font-size': fs, role: 'img'});
  var hid = 'hatch-' + hm.k;
  var defs = sel('defs'), pat = sel('pattern', {id: hid, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)'});
  pat.appendChild(sel('rect', {width: 6, height: 6, fill: '#ffffff'}));
  pat.appendChild(sel('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#9a9a9a', 'stroke-width': 2.5}));
  defs.appendChild(pat);
  var grad = sel('linearGradient', {id: 'grad-' + hm.k, x1: 0, y1: 1, x2: 0, y2: 0});
  BLUES.forEach(function (c, k) { grad.appendChild(sel('stop', {offset: (k / 8).toFixed(3), 'stop-color': colour(k / 8)})); });
  defs.appendChild(grad); svg.appendChild(defs);
  svg.appendChild(sel('title', null, titleLines.join(' ')));
  svg.appendChild(sel('rect', {width: W, height: H, fill: '#ffffff'}));
  titleLines.forEach(function (l, k) { svg.appendChild(sel('text', {x: 10, y: 22 + k * 18, 'font-size': 14, 'font-weight': 'bold'}, l)); });
  var every = Math.max(1, Math.ceil(fs * 1.2 / cs));  // labels that fit: every k-th when cells are small
  for (j = 0; j < C; j += every) {
    var x = left + j * cs + cs / 2, y = gridTop - 6;
    svg.appendChild(sel('text', {x: x, y: y, transform: 'rotate(-45 ' + x + ' ' + y + ')', 'text-anchor': 'start'}, colL(j)));
  }
  var showValues = !blocks && cs >= 30;
  for (i = 0; i < R; ++i) {
    if (i % every === 0) svg.appendChild(sel('text', {x: left - 6, y: gridTop + i * cs + cs / 2 + fs * 0.35, 'text-anchor': 'end'}, rowL(i)));
    for (j = 0; j < C; ++j) {
      var v = num(value(i, j)), mk = hm.mask ? hm.mask.charAt(i * C + j) : '0', t = (v - lo) / (hi - lo);
      var attrs = {'class': 'c', x: left + j * cs, y: gridTop + i * cs, width: cs, height: cs, stroke: '#ffffff', 'stroke-width': 0.5, tabindex: 0,
        fill: mk === '1' ? 'url(#' + hid + ')' : colour(t)};
      if (blocks) attrs['data-block'] = 'queries ' + rowL(i) + ' \u00d7 keys ' + colL(j) + ': mean weight ' + short(v) + ' (2 digits)' +
        (mk === '1' ? ' (every entry masked)' : mk === '2' ? ' (some entries masked)' : '') + ' \u2014 downsampled to ' + R + ' \u00d7 ' + C + ' blocks of ' + hm.block[0] + ' \u00d7 ' + hm.block[1];
      else { attrs['data-m'] = ids[head]; attrs['data-i'] = i; attrs['data-j'] = j; }
      var r = sel('rect', attrs);
      r.appendChild(sel('title', null, (blocks ? attrs['data-block'] : 'query ' + rowL(i) + ', key ' + colL(j) + ' = ' + (mk === '1' ? 'masked (0)' : vt(M[ids[head]], v)))));
      svg.appendChild(r);
      if (showValues && mk !== '1') svg.appendChild(sel('text', {x: left + j * cs + cs / 2, y: gridTop + i * cs + cs / 2 + 4, 'text-anchor': 'middle', 'font-size': 10,
        fill: t > 0.55 ? '#ffffff' : '#1d2329', 'pointer-events': 'none'}, v === 0 ? '0' : v.toFixed(2)));
    }
  }
  // the legend: the scale (its bottom, white, is the smallest value: 0 for weights) and a hatched
  // swatch for masked (only when something is masked, as --svg draws it)
  var lx = left + C * cs + 22, ly = gridTop, sy = ly + lh + 12;
  svg.appendChild(sel('rect', {x: lx, y: ly, width: 14, height: lh, fill: 'url(#grad-' + hm.k + ')', stroke: '#888', 'stroke-width': 0.5}));
  [[hi, 0], [(lo + hi) / 2, 0.5], [lo, 1]].forEach(function (p) { svg.appendChild(sel('text', {x: lx + 19, y: ly + p[1] * lh + 4, 'font-size': 10}, short(Number(p[0].toPrecision(3))))); });
  if (anyMasked(hm)) {
    svg.appendChild(sel('rect', {x: lx, y: sy, width: 14, height: 14, fill: 'url(#' + hid + ')', stroke: '#888', 'stroke-width': 0.5}));
    svg.appendChild(sel('text', {x: lx + 19, y: sy + 11, 'font-size': 10}, 'masked'));
    sy += 20;
  }
  svg.appendChild(sel('text', {x: left, y: gridTop + R * cs + 20, 'font-size': 10, fill: '#5b6670'}, 'rows: queries, columns: keys' + (blocks ? ' (downsampled)' : '')));
  return svg;
}
function svgText(svg) {
  var s = new XMLSerializer().serializeToString(svg);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + s;
}
// true when some cell of the heatmap is masked ('1': masked; '2': a block partly masked)
function anyMasked(hm) { return !!hm.mask && /[12]/.test(hm.mask); }
function heatmap(hm, k) {
  hm.k = k;
  var fig = el('figure', {'class': 'heatmap', 'id': 'heatmap-' + k}), ctl = el('div', {'class': 'controls'});
  fig.setAttribute('aria-label', hm.text);  // the title is drawn in the picture (a download carries it): not captioned twice
  var holder = el('div', {'class': 'scroll'}), state = {head: 0};
  var select = null;
  if (hm.ids.length > 1) {
    select = el('select', {'class': 'head-select', 'aria-label': 'head'});
    hm.names.forEach(function (n, h) { select.appendChild(el('option', {value: String(h)}, n)); });
    select.addEventListener('change', function () { show(+select.value); });
    ctl.appendChild(el('label', null, 'head ')); ctl.appendChild(select);
  }
  var btn = el('button', {type: 'button', 'class': 'svg-download'}, 'Download SVG');
  btn.addEventListener('click', function () {
    var blob = new Blob([svgText(holder.firstChild)], {type: 'image/svg+xml'});
    var a = el('a', {href: URL.createObjectURL(blob), download: (hm.text + (hm.ids.length > 1 ? ' ' + hm.names[state.head] : '')).replace(/[^A-Za-z0-9_.-]+/g, '_') + '.svg'});
    document.body.appendChild(a); a.click(); a.remove();
  });
  ctl.appendChild(btn);
  ctl.appendChild(el('span', {'class': 'hint legend-note'}, 'Hover, click or tab to a cell for how it was computed. ' +
    (anyMasked(hm) ? 'Hatched: masked (no weight); white: weight 0.' : 'White: weight 0.')));
  fig.appendChild(ctl); fig.appendChild(holder);
  if (hm.blocks) fig.appendChild(el('div', {'class': 'summary'}, 'Downsampled: each cell is the mean of a block of ' + hm.block[0] + ' \u00d7 ' + hm.block[1] +
    ' weights (at most ' + D.limits.heatmap_side + ' \u00d7 ' + D.limits.heatmap_side + ' cells per head when the page holds more than ' + D.limits.full_numbers + ' numbers).'));
  function show(h) {
    state.head = h; if (select) select.value = String(h); holder.textContent = ''; fig.setAttribute('data-head', String(h));
    // a summarised editable page's blocks (page::pack_numbers' rows): the module's weights, drawn when it has run
    if (hm.blocks && !hm.blocks[h].mean.length) { holder.appendChild(el('p', {'class': 'hint'}, 'Drawn from the weights this page\u2019s WebAssembly module computes, when it has loaded.')); return; }
    holder.appendChild(drawHeatmap(hm, h));
  }
  show(0);
  heatmaps.push({fig: fig, show: show, holder: holder, hm: hm, state: state});
  return fig;
}

// ---- the page ---------------------------------------------------------------------------------
var main = document.getElementById('qkv-main');
if (D.intro) main.appendChild(el('p', {'class': 'intro'}, D.intro));
if (D.source) main.appendChild(el('p', {'class': 'meta'}, 'Source: ' + D.source + '. Each step\u2019s text is the example\u2019s own comment; every cell explains itself on hover, click or keyboard focus; cells underlined in green are proven by a static_assert.'));
// how this page counts (issue 28: one convention per screen, said on the screen)
main.appendChild(el('p', {'class': 'meta', id: 'numbering'}, 'Numbering: the rows and columns of this page\u2019s tables count from 1 (q1, input 1 and row 1 are the first), ' +
  'as the tutorials do; C++ indices (m(0, 0)), compiler messages and qkv attend\u2019s text trace count from 0, and so do heads (head 0).'));
if (D.summarised) main.appendChild(el('div', {'class': 'banner', 'id': 'summary-banner'}, 'This page is summarised: its matrices hold ' + D.numbers +
  ' numbers, more than the ' + D.limits.full_numbers + ' that keep a page light. Tables show their first and last ' + D.limits.edge +
  ' rows and columns (all of them up to ' + D.limits.whole_side + '); heatmaps are downsampled to at most ' + D.limits.heatmap_side + ' \u00d7 ' + D.limits.heatmap_side + ' cells per head.'));
// the steps' sections, drawn from D.steps; drawn again (in place, after the editor's panel) when an
// attend page's editor rebuilds its per-head steps for another number of heads
function renderSteps() {
  var old = [].slice.call(main.querySelectorAll('section.step')), anchor = old.length ? old[old.length - 1].nextSibling : null, hk = 0;
  old.forEach(function (o) { o.remove(); });
  heatmaps.length = 0;
  D.steps.forEach(function (st, n) {
    var sec = el('section', {'class': 'step', id: 'step-' + (n + 1), 'data-step': String(n + 1)});
    if (st.title) sec.appendChild(el('h2', null, st.title));
    if (st.where) sec.appendChild(el('div', {'class': 'where'}, st.where));
    if (st.prose) sec.appendChild(el('p', {'class': 'prose'}, st.prose));
    var items = el('div', {'class': 'items'});
    st.items.forEach(function (it) {
      if (it.kind === 'text') items.appendChild(el('p', {'class': 'prose wide'}, it.text));
      else if (it.kind === 'matrix') { if (!M[it.text].hidden) items.appendChild(table(it.text)); }
      else if (it.kind === 'heatmap') items.appendChild(heatmap(it, hk++));
    });
    sec.appendChild(items);
    main.insertBefore(sec, anchor);
  });
}
renderSteps();
// ---- editing (docs/pages.md, "Editing a page") --------------------------------------------------
// D.edit: {why} when the page cannot be edited; else the module (base64), the sizes, the options
// and which matrices are its inputs and outputs. An edit writes the inputs into the module's
// memory, runs qkv_attend_f32/f64 (wasm/qkv_wasm.cpp: the core's arithmetic) and writes every step
// back into the page's data, so every table, heatmap and explanation shows the recomputed numbers.
var editor = null;
// @@edit@@: page_script::edit_js goes here on a page with a module (page.hpp)
if (D.edit) {
  var panel = el('div', {'class': D.edit.why ? 'banner' : 'edit-panel', id: 'edit-panel'}), status = el('div', {'class': 'edit-status', id: 'edit-status'});
  panel.appendChild(status);
  main.insertBefore(panel, main.querySelector('section.step'));
  if (D.edit.why) { status.textContent = D.edit.why; document.documentElement.setAttribute('data-qkv-editable', '0'); }
  else {
    status.textContent = 'Loading qkv\u2019s WebAssembly module\u2026';
    (D.edit.kind === 'steps' ? startStepsEditor : startEditor)(D.edit, panel, status).catch(function (err) {
      status.textContent = 'This page is not editable: this browser did not run its WebAssembly module (' + err + ').';
      document.documentElement.setAttribute('data-qkv-editable', '0');
    });
  }
}
window.qkvPage = {
  explain: explain,
  // the tooltip of cells [[id, i, j], ...] as the learner reads it: per cell, its lines [class, text]
  // (tests/browser/page_exact_test.py checks every number in them against exact arithmetic)
  tips: function (cells) {
    return cells.map(function (c) {
      var d = el('div'); d.appendChild(explanationNode(explain(c[0], c[1], c[2])));
      return [].slice.call(d.querySelectorAll('div')).map(function (n) { return [n.className, n.textContent]; });
    });
  },
  svgText: function (k) { return svgText(heatmaps[k].holder.firstChild); },
  showHead: function (k, h) { heatmaps[k].show(h); },
  editor: function () { return editor; },
  data: D,
  ready: true
};
document.documentElement.setAttribute('data-qkv-ready', '1');
})();
)JS";

/// the editor (docs/pages.md, "Editing a page"): only on a page whose "edit" object holds a
/// WebAssembly module; io/page.hpp puts it where js says "@@edit@@", inside the script's scope
inline constexpr const char* edit_js = R"JS(
// f() in module X (its exports) as a guarded call: '' or the message of the error it trapped on
// (failure: instantiateModule's); the trapped calls' frames are never popped otherwise, so the
// stack pointer is put back
function trapGuard(X, failure) {
  return function (f) {
    var sp = X.__stack_pointer.value; failure();
    try { f(); return ''; } catch (err) {
      X.__stack_pointer.value = sp;
      var w = failure().replace(/^qkv: /, '').trim();
      return w || 'the module stopped (' + err + ')';
    }
  };
}

function parseNumber(text, f32) {
  var t = text.trim().replace('\u2212', '-').replace('\u221e', 'inf').toLowerCase();
  var v = /^[-+]?(inf|infinity)$/.test(t) ? (t.charAt(0) === '-' ? -Infinity : Infinity) : t === 'nan' ? NaN :
    /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/.test(t) ? Number(t) : undefined;
  return v === undefined ? undefined : f32 ? Math.fround(v) : v;
}
function cellText(m, v, key) { return m.exact && key !== undefined && m.exact[key] !== undefined ? m.exact[key] : m.dtype === 'float32' ? text32(v) : short(v); }
// the module (E.module, base64) instantiated with what it imports: WASI's fd_write, through which
// core/fail.hpp writes an error's message before it traps (an exact page's overflow, a zero
// denominator: wasm/qkv_wasm.cpp); it is kept here for failure() to return, and every other WASI
// function the C library links (fd_close, fd_seek) answers ENOSYS, unused. Resolves to
// {instance, failure}: failure() is what the module wrote since the last call, "" when nothing.
function instantiateModule(base64) {
  var bytes = Uint8Array.from(atob(base64), function (c) { return c.charCodeAt(0); }), written = '', mem = null;
  return WebAssembly.compile(bytes).then(function (mod) {
    var wasi = {};
    WebAssembly.Module.imports(mod).forEach(function (im) { if (im.module === 'wasi_snapshot_preview1') wasi[im.name] = function () { return 52; }; });
    wasi.fd_write = function (fd, iovs, n, nwritten) {
      var v = new DataView(mem.buffer), total = 0;
      for (var k = 0; k < n; ++k) {
        var p = v.getUint32(iovs + 8 * k, true), len = v.getUint32(iovs + 8 * k + 4, true);
        written += new TextDecoder().decode(new Uint8Array(mem.buffer, p, len)); total += len;
      }
      v.setUint32(nwritten, total, true); return 0;
    };
    return WebAssembly.instantiate(mod, {wasi_snapshot_preview1: wasi}).then(function (instance) {
      mem = instance.exports.memory;
      return {instance: instance, failure: function () { var w = written; written = ''; return w; }};
    });
  });
}
// the editors' look (both kinds): the panel, input cells, edited (yellow), changed (orange), stale (grey)
function editorStyle() {
  var style = document.createElement('style');
  style.textContent = '.edit-panel{background:#f3f8ee;border:1px solid #b5d69c;border-radius:4px;padding:.5em .8em;margin:.8em 0;font-size:.92em}.edit-panel .row{display:flex;gap:.5em 1.2em;flex-wrap:wrap;align-items:center;margin:.3em 0}.edit-panel input[type=text]{width:8em;font:inherit}.edit-panel input#edit-sentence{width:24em}.edit-panel input[type=number]{width:4.5em;font:inherit}.edit-status{color:var(--muted)}table.m td.editable{text-decoration:underline dotted #6a8f4e}table.m td.edited{background:#fff1b8}table.m td.changed{background:#ffe3cc;box-shadow:inset 3px 0 0 #d94801}table.m td.stale{color:#888;background:repeating-linear-gradient(135deg,#fff,#fff 4px,#f1f1f1 4px,#f1f1f1 8px)}table.m td input.cell-input{width:7em;font:inherit;text-align:right}table.m td input.bad{outline:2px solid #c00}table.m td.edit-error{outline:2px solid #c00}.x-changed{color:#a33b00}';
  document.head.appendChild(style);
}
// typing into an input's cell (both kinds): the cells of `inputs` are marked editable; double-click,
// or Enter on a focused one, opens a field; Enter commits (editor.set), Escape cancels (refresh)
// the cells an editor redraws (edit_steps_js, edit_exact_js): paint(dirty) redraws the cells of
// the matrices in `dirty` (every matrix when dirty is null: Reset, a new sentence's labels) and the
// heatmaps that show one of them. Each cell remembers the value and the classes it shows, so a
// cell whose value did not change is not formatted again and the DOM is written only where
// something changed (from_scratch: ~3,000 cells). o: has(id) (the editor keeps matrix id),
// stale(id) (grey now), changed(id, i, j), value(m, i, j) (what the cell shows, compared with
// Object.is), text(m, i, j, value); paint.changedCells() counts the orange cells.
function cellPainter(inputs, o) {
  var cellsOf = null, unset = {}, changedCells = 0;
  function paint(dirty) {
    if (!cellsOf) {
      cellsOf = {};
      [].forEach.call(document.querySelectorAll('td[data-m]'), function (td) {
        var id = td.getAttribute('data-m');
        (cellsOf[id] = cellsOf[id] || []).push({td: td, i: +td.getAttribute('data-i'), j: +td.getAttribute('data-j'), v: unset, state: -1});  // -1: classes not written yet
      });
    }
    Object.keys(cellsOf).forEach(function (id) {
      var m = M[id]; if (!o.has(id) || (dirty && !dirty[id])) return;
      var inp = inputs.indexOf(id) >= 0, stale = o.stale(id), scale = !!m.how && m.how.op === 'scale';
      cellsOf[id].forEach(function (c) {
        var td = c.td;
        if (td.firstChild && td.firstChild.nodeName === 'INPUT') { c.v = unset; return; }  // drawn again when the input closes
        var v = o.value(m, c.i, c.j);
        if (!Object.is(v, c.v)) { var text = o.text(m, c.i, c.j, v); if (td.textContent !== text) td.textContent = text; c.v = v; }
        var state = (scale && v === -Infinity ? 1 : 0) | (o.changed(id, c.i, c.j) ? 2 : 0) | (stale ? 4 : 0);
        if (state === c.state) return;
        td.classList.toggle('masked', (state & 1) !== 0);
        td.classList.toggle(inp ? 'edited' : 'changed', (state & 2) !== 0);
        td.classList.toggle('stale', (state & 4) !== 0);
        if (!inp) changedCells += ((state & 2) >> 1) - (c.state > 0 ? (c.state & 2) >> 1 : 0);
        c.state = state;
      });
    });
    heatmaps.forEach(function (hmap) { if (!dirty || hmap.hm.ids.some(function (id) { return dirty[id]; })) hmap.show(hmap.state.head); });
  }
  paint.changedCells = function () { return changedCells; };
  return paint;
}
function cellEditing(inputs, isF32, refresh) {
  inputs.forEach(function (id) { [].forEach.call(document.querySelectorAll('td[data-m="' + id.replace(/"/g, '\\"') + '"]'), function (td) { td.classList.add('editable'); }); });
  function openInput(td) {
    var id = td.getAttribute('data-m'), i = +td.getAttribute('data-i'), j = +td.getAttribute('data-j'), m = M[id];
    var inp = el('input', {type: 'text', 'class': 'cell-input', value: cellText(m, get(m, i, j), i + ',' + j), 'aria-label': cellName(m, i, j)});
    td.textContent = ''; td.appendChild(inp); inp.focus(); inp.select();
    var done = false;
    function commit(keep) {
      if (done) return;
      if (keep && m.dtype === 'exact') {  // an exact number: the module's C++ parses it (editor.set: '' or why not)
        var why = editor.set(id, i, j, inp.value);
        if (why) { inp.classList.add('bad'); inp.title = why; return; }
        done = true; td.removeChild(inp); refresh(); td.focus(); return;
      }
      if (keep && parseNumber(inp.value, isF32(id)) === undefined) { inp.classList.add('bad'); inp.title = 'not a number (NaN, inf and -inf are numbers here)'; return; }
      done = true; td.removeChild(inp);
      var refused = keep ? editor.set(id, i, j, inp.value) : (refresh(), false);
      if (typeof refused === 'string') { td.classList.add('edit-error'); td.title = refused; }
      td.focus();
    }
    inp.addEventListener('keydown', function (ev) { ev.stopPropagation(); if (ev.key === 'Enter') commit(true); else if (ev.key === 'Escape') commit(false); });
    inp.addEventListener('blur', function () { commit(true); if (!done) commit(false); });
  }
  document.addEventListener('dblclick', function (ev) { var td = ev.target.closest ? ev.target.closest('td.editable') : null; if (td) openInput(td); });
  document.addEventListener('keydown', function (ev) { var td = document.activeElement; if (ev.key === 'Enter' && td && td.classList && td.classList.contains('editable')) { ev.preventDefault(); openInput(td); } });
}
)JS";

/// the editor of a `qkv attend` page (tools/attend_page.hpp's edit object): after edit_js
inline constexpr const char* edit_attend_js = R"JS(
function startEditor(E, panel, status) {
  editorStyle();
  return instantiateModule(E.module).then(function (res) {
    var X = res.instance.exports; if (X._initialize) X._initialize();
    var f32 = E.dtype === 'float32', size = f32 ? 4 : 8, Arr = f32 ? Float32Array : Float64Array;
    // t queries, s keys (a context's rows, else t), H query heads, HK key/value heads (kv_heads)
    var t = E.t, s = E.s || E.t, H = E.heads, HK = E.kv_heads || H, dvh = E.dv / H, dkv = HK * E.dq / H, dvkv = HK * dvh;
    var off = E.mask_offset || 0, names = ['x', 'context', 'wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'wo', 'bo'];
    var inputs = names.filter(function (n) { return E.inputs[n]; }).map(function (n) { return E.inputs[n]; });
    // a summarised page (tools/attend_page.hpp's summarised_choice): editable in full, or from its
    // queries, keys and values (E.projected: the module's qkv_attend_projected_*, no output projection)
    var proj = E.projected || null, dout = proj ? 0 : E.dout;
    if (proj) inputs = proj.slice();
    var original = {}, ptr = {}, total = 0, parts;
    // the module's steps (qkv::flat::steps_layout), named by `outputs`: with RoPE, the projections
    // before it come last; H heads (the page's, or the learner's: setHeads below)
    function layoutParts(outputs) {
      parts = [['queries', t * E.dq], ['keys', s * dkv], ['values', s * dvkv]];
      for (var h = 0; h < H; ++h) parts.push(['', t * s], ['', t * s], ['', t * s], ['', t * dvh]);
      parts.push(['', t * E.dv]); if (dout) parts.push(['', t * dout]);
      if (E.rotary_dim) parts.push(['', t * E.dq], ['', s * dkv]);
      parts.forEach(function (p, k) { p[0] = outputs[k] || ''; });
    }
    layoutParts(E.outputs);
    inputs.concat(parts.map(function (p) { return p[0]; })).forEach(function (id) { if (id && M[id] && M[id].data) original[id] = M[id].data.slice(); });
    inputs.forEach(function (id) { ptr[id] = X.qkv_alloc(M[id].data.length * size); });
    // what the module adds and rotates with, copied in once: the bias rows, ALiBi's slopes, RoPE's cos and sin
    var fixed = {};
    [E.bias, E.slopes].concat(E.rope || []).forEach(function (id) {
      if (!id) return; var n = M[id].data.length; fixed[id] = X.qkv_alloc(n * size); new Arr(X.memory.buffer, fixed[id], n).set(M[id].data);
    });
    var zPtr = X.qkv_alloc(13 * 4), pPtr = X.qkv_alloc(16 * 4);  // the sizes and the pointers of qkv_attend_case_*
    var nOut, outPtr, outs = {}, maskPtr = X.qkv_alloc(t * s);
    function setSizes() {  // z for H heads (kv_heads 0: as many as the heads), and the output's buffer (one per number of heads)
      new Uint32Array(X.memory.buffer, zPtr, 13).set([t, E.d, s, E.dc || 0, E.dq, E.dv, H, HK === H ? 0 : HK, E.dout, E.out_in ? 1 : 0,
        E.bias_heads || 0, E.rotary_dim || 0, E.interleaved ? 1 : 0]);
      nOut = (proj ? X.qkv_projected_output_size : X.qkv_case_output_size)(zPtr);
      outPtr = outs[H] || (outs[H] = X.qkv_alloc(nOut * size));
    }
    setSizes();
    var baseline = {};  // the module's own numbers for the original inputs (the first run)
    // the case's own mask cells (E.masked "": none)
    function maskCells() { var c = E.masked ? E.masked.split('').map(Number) : []; while (c.length < t * s) c.push(0); return c; }
    var runBackward = E.grad_outputs ? backwardEditor() : null;  // a case with d_output: the gradients too
    var opts = {scale: f32 ? Math.fround(E.scale) : E.scale, causal: E.causal, window: E.window, cells: maskCells(), heads: H, kv_heads: HK, scaleTyped: false};
    // the cells a -inf of the bias masks in every head: hatched on the heatmap with the others, as the page was written
    var biasAll = null;
    if (E.bias) {
      var B = M[E.bias].data; biasAll = [];
      for (var k = 0; k < t * s; ++k) { var all = true; for (var b = 0; b < E.bias_heads; ++b) all = all && B[b * t * s + k] === -Infinity; biasAll.push(all); }
    }
    // ---- the number of heads (issue 30: "add a head"; docs/pages.md, "Changing the heads"): the
    // learner's H'. The projections do not depend on it (the queries, keys and values keep their
    // numbers); head h reads d_q / H' columns of them from h d_q / H'. kv_heads follows in the
    // case's ratio: wk and wv are written for key/value heads that each serve G = heads / kv_heads
    // query heads (d_q / G outputs, whatever the heads), so H' heads have H' / G key/value heads.
    // The scale: the case's or the learner's when given, else 1/sqrt(d_q / H'), as qkv attend makes
    // it for a case with H' heads. The per-head steps are made from the page's own head 0 (its
    // matrices, captions and how each cell is computed, renamed and moved as tools/attend_page.hpp
    // writes head h: ids with [h] when there is more than one head, columns from h d_head), and
    // drawn again; the page's own steps come back for its own heads (and with Reset)
    var H0 = H, HK0 = HK, G = H0 / HK0, fresh = {}, saved = null;
    var headsWhy = E.slopes ? 'ALiBi\u2019s slopes are per head (Press et al.\u2019s m_h for ' + H0 + ' heads) and this page holds its ' + H0 + ' heads\u2019 slopes only' :
      E.bias_heads > 1 ? 'the case\u2019s bias has one block of rows per head (' + H0 + ' heads)' :
      E.rotary_dim ? 'RoPE rotates each head\u2019s columns with this page\u2019s cos and sin tables, made for heads of ' + E.dq / H0 + ' columns' :
      E.grad_outputs ? 'the gradients\u2019 tables are laid out for the case\u2019s ' + H0 + ' heads (write the case with other heads for them)' : '';
    var hid = function (base, n, h) { return base + (n > 1 ? '[' + h + ']' : ''); }, bases = ['scores', 'added', 'scaled', 'weights', 'context'];
    var stepNo = function (st) { var r = /^Step (\d+)/.exec(st.title || ''); return r ? +r[1] : 0; };
    var s3 = -1; D.steps.forEach(function (st, k) { if (s3 < 0 && stepNo(st) === 3) s3 = k; });
    if (!headsWhy && (s3 < 0 || !D.steps[s3 + 2] || stepNo(D.steps[s3 + 1]) !== 4 || stepNo(D.steps[s3 + 2]) !== 5 || !M[hid('weights', H0, 0)]))
      headsWhy = 'its steps are not the per-head steps qkv attend writes';
    function defaultScale(dk) { return f32 ? Math.fround(1 / Math.fround(Math.sqrt(dk))) : 1 / Math.sqrt(dk); }  // T(1) / sqrt(T(dk)), each correctly rounded
    function scaleNote() {  // as the trace says it (cmd_attend.hpp): the number, and where it came from
      if (opts.scaleTyped) return (f32 ? text32 : full)(opts.scale) + ' (yours)';
      var m0 = (saved ? saved.M : M)[hid('scaled', H0, 0)];
      return E.scale_given ? m0.how.note : String(Number(opts.scale.toPrecision(6))) + ' = 1/sqrt(' + E.dq / H + ')';
    }
    function perHead(n) { var ids = []; for (var h = 0; h < n; ++h) bases.forEach(function (b) { if (M[hid(b, n, h)]) ids.push(hid(b, n, h)); }); return ids; }
    function outputsFor(n) {  // edit_spec's "outputs" for n heads
      var o = E.outputs.slice(0, 3);
      for (var h = 0; h < n; ++h) o.push(hid('scores', n, h), hid('scaled', n, h), hid('weights', n, h), hid('context', n, h));
      return o.concat([n > 1 ? 'concat' : ''], E.outputs.slice(3 + 4 * H0 + 1));
    }
    function shownOf(c) {  // the columns a table shows (page.hpp: all up to whole_side on a summarised page, else the first and last edge)
      var all = []; for (var k = 0; k < c; ++k) all.push(k);
      return !D.summarised || c <= D.limits.whole_side ? all : all.slice(0, D.limits.edge).concat(all.slice(c - D.limits.edge));
    }
    // D.steps for n heads (n != the page's), the matrices they show made in M (fresh: no number of the case's)
    function headSteps(n) {
      var steps = saved.steps, SM = saved.M, nk = n / G, dk = E.dq / n, dh = E.dv / n, out = [], h, k;
      var head = function (h) { return n > 1 ? ' of head ' + h : ''; };
      var make = function (id0, h, cols, how) {  // head h's matrix, from head 0's
        var m0 = SM[id0], base = id0.replace(/\[0\]$/, ''), id = hid(base, n, h), m = {};
        Object.keys(m0).forEach(function (key) { if (!/^(data|row_data|col_data|rpos|cpos|row_index|col_index|row_b85|col_b85)$/.test(key)) m[key] = m0[key]; });
        m.id = id; m.cols = cols; m.caption = (H0 > 1 ? m0.caption.replace(/\[0\]$/, '') : m0.caption) + (n > 1 ? '[' + h + ']' : '');
        if (cols !== m0.cols) m.shown_cols = shownOf(cols);
        if (how) { m.how = {}; Object.keys(m0.how).forEach(function (key) { m.how[key] = key in how ? how[key] : m0.how[key]; }); }
        if (base === 'added') { m.data = m0.data.slice(); original[id] = m.data.slice(); }  // the bias, the same in every head: not recomputed
        else { m.data = new Array(m.rows * cols).fill(0); fresh[id] = true; }
        M[id] = m; return id;
      };
      var hm0 = null; steps.forEach(function (st) { st.items.forEach(function (it) { if (it.kind === 'heatmap') hm0 = it; }); });
      var gqa = function (it) { return it.kind === 'text' && /^Grouped-query attention:/.test(it.text); };
      for (k = 0; k < s3; ++k) {  // Steps 1 and 2; the grouped-query text says the new heads
        var st0 = steps[k];
        out.push(st0.items.some(gqa) ? {title: st0.title, prose: st0.prose, where: st0.where, items: st0.items.map(function (it) {
          return gqa(it) ? {kind: 'text', text: 'Grouped-query attention: ' + n + ' query heads share ' + nk + (nk === 1 ? ' key/value head' : ' key/value heads') +
            ' (kv_heads); query head h reads key/value head h / ' + G + ', columns ' + dk + ' \u00d7 (h / ' + G + ') onwards of keys and values.'} : it; })} : st0);
      }
      var weightIds = [];
      for (h = 0; h < n; ++h) {
        var g = Math.floor(h / G), items3 = [], items4 = [], items5 = [];
        steps[s3].items.forEach(function (it) {
          if (it.kind === 'matrix') items3.push({kind: 'matrix', text: make(it.text, h, s, {ac: h * dk, bc: g * dk, n: dk})});
          else if (/^Query head/.test(it.text)) items3.push({kind: 'text', text: 'Query head ' + h + ' reads key/value head ' + g + '.'});
        });
        steps[s3 + 1].items.forEach(function (it) {
          if (it.kind === 'text') { if (h === 0) items4.push(it); return; }
          if (it.kind !== 'matrix') return;
          var op = SM[it.text].how ? SM[it.text].how.op : '';
          var id = make(it.text, h, s, op === 'scale' ? {a: hid('scores', n, h), b: SM[it.text].how.b ? hid('added', n, h) : ''} : op === 'softmax' ? {a: hid('scaled', n, h)} : null);
          items4.push({kind: 'matrix', text: id});
          if (op === 'softmax') weightIds.push(id);
        });
        if (h === n - 1 && hm0) {
          var hm = {}; Object.keys(hm0).forEach(function (key) { hm[key] = hm0[key]; });
          hm.text = hm0.text.replace(/^attention weights( per head)?/, 'attention weights' + (n > 1 ? ' per head' : ''));
          hm.ids = weightIds; hm.names = weightIds.map(function (_, q) { return 'head ' + q; });
          if (hm0.blocks) hm.blocks = weightIds.map(function () { return {mean: []}; });
          items4.push(hm);
        }
        steps[s3 + 2].items.forEach(function (it) { if (it.kind === 'matrix') items5.push({kind: 'matrix', text: make(it.text, h, dh, {a: hid('weights', n, h), bc: g * dh})}); });
        var t3 = steps[s3].title.replace(/^Step 3: scores( of head \d+)?/, 'Step 3: scores' + head(h));
        var t4 = steps[s3 + 1].title.replace(/^Step 4: weights( of head \d+)?/, 'Step 4: weights' + head(h)).replace(/\(scale .*?, mask /, E.scale_given && !opts.scaleTyped ? '$&' : '(scale ' + scaleNote() + ', mask ')
          .replace(/\), (each row sums to 1|every row NaN).*$/, '), each row sums to 1 (a row with every key masked is 0)');
        var t5 = 'Step 5: context' + head(h) + ' = weights \u00b7 values' + (G > 1 ? ' of key/value head ' + g : n > 1 ? ' of head ' + h : '') + ', ' + t + 'x' + dh;  // the shape as the trace prints it
        out.push({title: t3, prose: steps[s3].prose, where: steps[s3].where, items: items3}, {title: t4, prose: '', where: '', items: items4}, {title: t5, prose: '', where: '', items: items5});
      }
      var rest = steps.slice(s3 + 3 * H0);
      if (H0 > 1) rest = rest.filter(function (st) { return stepNo(st) !== 6 || !st.items.some(function (it) { return it.text === 'concat'; }); });
      if (n > 1) {  // the heads side by side (Step 6); a one-head page has none: made from its context (T x d_v)
        var cst = steps.filter(function (st) { return stepNo(st) === 6 && st.items.some(function (it) { return it.text === 'concat'; }); })[0];
        if (!cst) {
          var c0 = SM.context, cm = {}; Object.keys(c0).forEach(function (key) { if (!/^(data|row_data|col_data|rpos|cpos|row_index|col_index|how)$/.test(key)) cm[key] = c0[key]; });
          cm.id = cm.caption = 'concat'; cm.data = new Array(t * E.dv).fill(0); M.concat = cm; fresh.concat = true;
          cst = {title: 'Step 6: the heads side by side, concat ' + t + 'x' + E.dv, prose: '', where: '', items: [{kind: 'matrix', text: 'concat'}]};
        }
        out.push(cst);
      }
      rest.forEach(function (st) {  // the output projection: Step 7 after the heads side by side, else 6
        out.push(stepNo(st) >= 6 ? {title: st.title.replace(/^Step \d+/, 'Step ' + (n > 1 ? 7 : 6)), prose: st.prose, where: st.where, items: st.items} : st);
      });
      if (M.output && M.output.how) M.output.how.a = n > 1 ? 'concat' : 'context';
      return out;
    }
    // '' when the page now has n heads (recomputed, its per-head steps drawn again), else why not
    function setHeads(text) {
      if (headsWhy) return 'The heads cannot change on this page: ' + headsWhy;
      var n = /^\s*\d+\s*$/.test(String(text)) ? parseInt(text, 10) : NaN;
      if (!(n >= 1)) return '\u201c' + text + '\u201d is not a number of heads (a whole number, 1 or more)';
      if (E.dq % n || E.dv % n) return n + (n === 1 ? ' head does' : ' heads do') + ' not divide d_q = ' + E.dq + ' and d_v = ' + E.dv + ' (each head takes d_q / heads columns of the queries and keys, d_v / heads of the values)';
      if (n % G) return 'kv_heads follows the heads: each of this case\u2019s ' + HK0 + ' key/value heads serves ' + G + ' query heads (wk and wv are written for that), so the heads must be a multiple of ' + G + ', and ' + n + ' is not';
      if (n * t * s > 16777216) return n + ' heads would need ' + n + ' \u00d7 ' + t + ' \u00d7 ' + s + ' attention weights, above the 2^24 qkv attend draws on a page';
      if (n === H) { syncPanel(); return ''; }  // the same number: nothing to recompute, a red field cleared
      var t0 = performance.now();
      if (!saved) { saved = {steps: D.steps, M: {}, out: M.output && M.output.how ? M.output.how.a : ''}; perHead(H0).concat(['concat']).forEach(function (id) { if (M[id]) saved.M[id] = M[id]; }); }
      perHead(H).forEach(function (id) { delete M[id]; delete fresh[id]; });
      if (fresh.concat) { delete M.concat; delete fresh.concat; }
      H = n; HK = n / G; dvh = E.dv / n; opts.heads = H; opts.kv_heads = HK;
      if (!opts.scaleTyped && !E.scale_given) opts.scale = defaultScale(E.dq / n);
      if (n === H0) { D.steps = saved.steps; Object.keys(saved.M).forEach(function (id) { M[id] = saved.M[id]; }); if (M.output && M.output.how) M.output.how.a = saved.out; }
      else D.steps = headSteps(n);
      layoutParts(outputsFor(n)); setSizes();
      renderSteps();
      inputs.forEach(function (id) { [].forEach.call(document.querySelectorAll('td[data-m="' + id.replace(/"/g, '\\"') + '"]'), function (td) { td.classList.add('editable'); }); });
      syncPanel(); run();
      editor.last.rebuild_ms = performance.now() - t0;
      return '';
    }
    // query i sits at position i + off (causal aligned lower_right with s != t: off = s - t)
    function masked(i, j) { return opts.cells[i * s + j] === 1 || (opts.causal && j > i + off) || (opts.window > 0 && j < i + off - opts.window + 1); }
    function run() {
      var t0 = performance.now(), mem = X.memory.buffer;
      inputs.forEach(function (id) { new Arr(mem, ptr[id], M[id].data.length).set(M[id].data); });
      var mk = new Uint8Array(mem, maskPtr, t * s);
      for (var i = 0; i < t; ++i) for (var j = 0; j < s; ++j) mk[i * s + j] = masked(i, j) ? 1 : 0;
      var p = function (n) { return E.inputs[n] && !proj ? ptr[E.inputs[n]] : 0; }, rope = E.rope || [];
      new Uint32Array(mem, pPtr, 16).set(names.map(p).concat([E.bias ? fixed[E.bias] : 0, E.slopes ? fixed[E.slopes] : 0],
        [0, 1, 2, 3].map(function (k) { return rope[k] ? fixed[rope[k]] : 0; })));
      var rc = proj ? (f32 ? X.qkv_attend_projected_f32 : X.qkv_attend_projected_f64)(pPtr, zPtr, off, opts.scale, maskPtr, ptr[proj[0]], ptr[proj[1]], ptr[proj[2]], outPtr)
        : (f32 ? X.qkv_attend_case_f32 : X.qkv_attend_case_f64)(pPtr, zPtr, off, opts.scale, maskPtr, outPtr);
      var out = new Arr(X.memory.buffer, outPtr, nOut), at = 0;
      // a cell the edit does not reach (the module gives it the bits it gives for the original
      // inputs) keeps the number qkv computed for the page; a cell it reaches takes the module's
      parts.forEach(function (q) {
        if (fresh[q[0]]) M[q[0]].data = Array.prototype.slice.call(out, at, at + q[1]);  // made for the learner's heads: no number of the case's
        else if (q[0] && M[q[0]] && !M[q[0]].data) summarisedOutput(M[q[0]], out, at, q[1]);
        else if (q[0] && M[q[0]]) {
          var d = M[q[0]].data, o = original[q[0]], b = baseline[q[0]];
          for (var k = 0; k < q[1]; ++k) d[k] = !b || Object.is(out[at + k], b[k]) ? o[k] : out[at + k];
          if (!b) baseline[q[0]] = Array.prototype.slice.call(out, at, at + q[1]);
        }
        at += q[1];
      });
      if (runBackward) runBackward(p);
      Object.keys(fresh).forEach(function (id) { var hw = M[id].how; if (hw && hw.op === 'scale') { hw.scale = opts.scale; hw.note = scaleNote(); } });
      edited = !first; first = false;
      var t1 = performance.now();
      refresh();
      if (pinned && !tip.hidden) { var pn = tipFor(pinned); if (pn) showTip(pinned, pn); }  // a pinned explanation follows the numbers
      var t2 = performance.now();
      editor.last = {compute_ms: t1 - t0, total_ms: t2 - t0, rc: rc};
      var changed = document.querySelectorAll('td.changed').length;
      status.textContent = 'Recomputed every step in ' + (t1 - t0).toFixed(2) + ' ms by qkv\u2019s C++ core (WebAssembly, ' +
        Math.round(E.module_bytes / 1024) + ' KB, in this page), the page redrawn in ' + (t2 - t1).toFixed(1) + ' ms; ' + changed +
        ' shown cells differ from the ' + (D.source ? 'example\u2019s proven values' : 'values qkv attend computed for the case') + ' (marked orange)' +
        (stale.length && edited ? '; not recomputed (grey): ' + stale.map(function (st) { return st[0]; }).join(', ') : '') + '.';
    }
    // the backward (docs/pages.md, "Gradients on a page"): d_output is an input too; after the
    // forward, qkv_attend_backward_* on the forward's steps, and every gradient matrix of the page
    // (and each hidden operand of their explanations) taken from E.grad_outputs' views:
    // [id, [[source, start, row stride, column stride, first row, first column, rows, columns], ...]],
    // source "#g" the gradients, "#f" the forward's steps, else an input matrix; the forward's rule:
    // a cell the edit does not reach (the module's bits for the original inputs) keeps the page's number
    function backwardEditor() {
      var G = E.grad_outputs, dO = E.grad_input, nG = X.qkv_case_gradients_size(zPtr);
      var gPtr = X.qkv_alloc(nG * size), base = {};
      inputs.push(dO); ptr[dO] = X.qkv_alloc(M[dO].data.length * size);  // run() copies it in with the other inputs
      [dO].concat(G.map(function (v) { return v[0]; })).forEach(function (id) { original[id] = M[id].data.slice(); });
      return function (p) {
        (f32 ? X.qkv_attend_case_backward_f32 : X.qkv_attend_case_backward_f64)(pPtr, zPtr, off, opts.scale, maskPtr, outPtr, ptr[dO], gPtr);
        var src = {'#g': new Arr(X.memory.buffer, gPtr, nG), '#f': new Arr(X.memory.buffer, outPtr, nOut)};
        G.forEach(function (v) {
          var m = M[v[0]], d = m.data, o = original[v[0]], b = base[v[0]], now = b ? null : d.slice();
          v[1].forEach(function (k) {
            var a = src[k[0]] || M[k[0]].data;
            for (var i = 0; i < k[6]; ++i) for (var j = 0; j < k[7]; ++j) {
              var at = (k[4] + i) * m.cols + k[5] + j, val = a[k[1] + i * k[2] + j * k[3]];
              if (b) d[at] = Object.is(val, b[at]) ? o[at] : val; else now[at] = val;
            }
          });
          if (!b) base[v[0]] = now;
        });
      };
    }
    function refresh() {
      [].forEach.call(document.querySelectorAll('td[data-m]'), function (td) {
        var id = td.getAttribute('data-m'), m = M[id]; if (!original[id] && !fresh[id]) return;
        var i = +td.getAttribute('data-i'), j = +td.getAttribute('data-j'), v = get(m, i, j);
        if (td.firstChild && td.firstChild.nodeName === 'INPUT') return;
        td.textContent = cellText(m, v);
        td.classList.toggle('masked', v === -Infinity && !!m.how && m.how.op === 'scale');
        var ch = editor.changed(id, i, j);
        td.classList.toggle(inputs.indexOf(id) >= 0 ? 'edited' : 'changed', ch);
      });
      heatmaps.forEach(function (hmap) {
        var ms = ''; for (var i = 0; i < t; ++i) for (var j = 0; j < s; ++j) ms += masked(i, j) || (biasAll && biasAll[i * s + j]) ? '1' : '0';
        if (hmap.hm.blocks) reblock(hmap.hm, ms); else hmap.hm.mask = ms;
        hmap.show(hmap.state.head);
      });
      markStale();
    }
    editor = {
      note: function (box, x) {  // a changed cell's explanation says so (a matrix not recomputed: why)
        var st = staleWhy(x.id);
        if (st && edited) box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Not recomputed for your edit: ' + st + '; this is the number qkv attend computed for the case\u2019s inputs.'));
        if (!editor.changed(x.id, x.i, x.j)) return;
        var m = M[x.id];
        if (fresh[x.id]) { box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Recomputed for your ' + H + (H === 1 ? ' head' : ' heads') + ' by qkv\u2019s C++ core (WebAssembly, in this page): the case has ' +
          H0 + ', so qkv attend computed no such matrix for it; the lines below are from the numbers shown. Reset brings back the case\u2019s heads.')); return; }
        // an input the learner typed (a summarised page's queries, keys and values have a how too)
        if (inputs.indexOf(x.id) >= 0) { box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Your number: an input of this page\u2019s module. qkv attend computed ' +
          vt(m, editor.original(x.id, x.i, x.j)) + ' for the case\u2019s inputs; the lines below are about those. Reset brings them back.')); return; }
    box.appendChild(el('div', {'class': 'x-note x-changed'}, (D.source ? 'Proven for the example\u2019s inputs: ' : 'Computed by qkv attend for the case\u2019s inputs: ') +
      vt(m, editor.original(x.id, x.i, x.j)) + '; recomputed for yours by qkv\u2019s C++ core (WebAssembly, in this page). ' +
      'The lines below are about the ' + (D.source ? 'example\u2019s' : 'case\u2019s') + ' inputs; Reset brings them back.'));
      },
      changed: function (id, i, j) { if (fresh[id]) return true; var o = original[id]; if (!o) return false; return !Object.is(o[i * M[id].cols + j], M[id].data[i * M[id].cols + j]); },
      original: function (id, i, j) { return original[id][i * M[id].cols + j]; },
      set: function (id, i, j, text) {
        var v = typeof text === 'number' ? (f32 ? Math.fround(text) : text) : parseNumber(String(text), f32);
        if (v === undefined || inputs.indexOf(id) < 0) return false;
        // a 16-bit case: rounded to its type as stored, by the tool's own rounding (core/half.hpp, in the module)
        if (E.round && id !== E.grad_input) v = X['qkv_round_' + E.round](v);
        M[id].data[i * M[id].cols + j] = v; run(); return true;
      },
      options: function (o) {
        if (o.scale !== undefined) { var s1 = typeof o.scale === 'number' ? o.scale : parseNumber(String(o.scale), f32); if (s1 === undefined || !isFinite(s1)) return false; opts.scale = f32 ? Math.fround(s1) : s1; opts.scaleTyped = true; }
        if (o.heads !== undefined) return !setHeads(o.heads);
        if (o.causal !== undefined) opts.causal = !!o.causal;
        if (o.window !== undefined) opts.window = Math.max(0, Math.floor(+o.window) || 0);
        syncPanel(); run(); return true;
      },
      toggleMask: function (i, j) { opts.cells[i * s + j] = opts.cells[i * s + j] ? 0 : 1; run(); },
      reset: function () {
        opts.scaleTyped = false; if (H !== H0) setHeads(H0);
        Object.keys(original).forEach(function (id) { M[id].data = original[id].slice(); });
        opts.scale = f32 ? Math.fround(E.scale) : E.scale; opts.causal = E.causal; opts.window = E.window; opts.cells = maskCells();
        edited = false; syncPanel(); refresh(); status.textContent = 'Reset: every number is the ' + (D.source ? 'example\u2019s proven value' : 'value qkv attend computed for the case') + ' again.';
      },
      heads: function (n) { return setHeads(n); },  // '' when the page now has n heads, else why not
      inputs: inputs, state: opts, last: null
    };
    var first = true, edited = false, stale = E.stale || [];
    // a summarised matrix (page.hpp embeds only its shown rows): on the first run it takes the
    // module's numbers whole, which must be the page's own where it has them (counted: E.loadDiffers)
    function summarisedOutput(m, out, at, n) {
      m.data = Array.prototype.slice.call(out, at, at + n); original[m.id] = m.data.slice(); baseline[m.id] = m.data.slice();
      var differs = 0;
      if (m.row_data) m.row_index.forEach(function (r, k) { for (var j = 0; j < m.cols; ++j) if (!Object.is(m.row_data[k * m.cols + j], m.data[r * m.cols + j]) && !(isNaN(m.data[r * m.cols + j]) && isNaN(m.row_data[k * m.cols + j]))) ++differs; });
      if (m.col_data) m.col_index.forEach(function (c, k) { for (var i = 0; i < m.rows; ++i) if (!Object.is(m.col_data[k * m.rows + i], m.data[i * m.cols + c]) && !(isNaN(m.data[i * m.cols + c]) && isNaN(m.col_data[k * m.rows + i]))) ++differs; });
      loadDiffers += differs;
    }
    var loadDiffers = 0;
    // a downsampled heatmap (a summarised page): its blocks' means (2 digits, as page.hpp writes
    // them) and masks ('1' every entry masked, '2' some) from the recomputed weights and mask ms
    function reblock(hm, ms) {
      var fr = hm.block[0], fc = hm.block[1], R = hm.grid[0], C = hm.grid[1], mk = '';
      hm.ids.forEach(function (id, h) {
        var m = M[id], mean = [];
        for (var bi = 0; bi < R; ++bi) for (var bj = 0; bj < C; ++bj) {
          var sum = 0, n = 0;
          for (var i = bi * fr; i < Math.min(t, (bi + 1) * fr); ++i) for (var j = bj * fc; j < Math.min(s, (bj + 1) * fc); ++j, ++n) sum += get(m, i, j);
          mean.push(Number((n ? sum / n : 0).toPrecision(2)));
        }
        hm.blocks[h].mean = mean;
      });
      for (var bi = 0; bi < R; ++bi) for (var bj = 0; bj < C; ++bj) {
        var k = 0, n = 0;
        for (var i = bi * fr; i < Math.min(t, (bi + 1) * fr); ++i) for (var j = bj * fc; j < Math.min(s, (bj + 1) * fc); ++j, ++n) k += ms.charAt(i * s + j) === '1' ? 1 : 0;
        mk += k === 0 ? '0' : k === n ? '1' : '2';
      }
      hm.mask = mk;
    }
    function staleWhy(id) { for (var k = 0; k < stale.length; ++k) if (stale[k][0] === id) return stale[k][1]; return ''; }
    // the matrices not recomputed (E.stale): grey after an edit, as the steps editor marks them
    function markStale() {
      stale.forEach(function (st) {
        [].forEach.call(document.querySelectorAll('td[data-m="' + st[0].replace(/"/g, '\\"') + '"]'), function (td) { td.classList.toggle('stale', edited); });
      });
    }
    run();  // the baseline: the module on the page's own inputs (every cell keeps its number)
    editor.loadDiffers = loadDiffers;
    var scaleIn = el('input', {type: 'text', id: 'edit-scale', 'aria-label': 'scale'}), causalIn = el('input', {type: 'checkbox', id: 'edit-causal'});
    var windowIn = el('input', {type: 'number', min: '0', id: 'edit-window', 'aria-label': 'window'}), resetB = el('button', {type: 'button', id: 'edit-reset'}, 'Reset');
    var headsIn = el('input', {type: 'number', min: '1', id: 'edit-heads', 'aria-label': 'heads'}), headsNote = el('span', {'class': 'edit-status', id: 'edit-heads-why'});
    function syncPanel() {
      scaleIn.value = f32 ? text32(opts.scale) : full(opts.scale); causalIn.checked = opts.causal; windowIn.value = String(opts.window); headsIn.value = String(H);
      headsIn.classList.remove('bad');
      headsNote.textContent = headsWhy ? 'The heads are fixed on this page: ' + headsWhy + '.' : H === H0 ? '' :
        H + (H === 1 ? ' head' : ' heads') + ' of ' + E.dq / H + ' columns' + (G > 1 ? ', ' + HK + ' key/value ' + (HK === 1 ? 'head' : 'heads') + ' (each serves ' + G + ', as in the case)' : '') +
        '; scale ' + scaleNote() + ' (the case has ' + H0 + '; Reset brings them back).';
    }
    scaleIn.addEventListener('change', function () { if (!editor.options({scale: scaleIn.value})) scaleIn.classList.add('bad'); else scaleIn.classList.remove('bad'); });
    causalIn.addEventListener('change', function () { editor.options({causal: causalIn.checked}); });
    windowIn.addEventListener('change', function () { editor.options({window: windowIn.value}); });
    if (headsWhy) { headsIn.disabled = true; headsIn.title = headsWhy; }
    headsIn.addEventListener('change', function () {  // refused: the field turns red and says why
      var why = setHeads(headsIn.value); if (why) { headsIn.classList.add('bad'); headsIn.title = headsNote.textContent = why + '.'; }
    });
    resetB.addEventListener('click', function () { editor.reset(); });
    var row = el('div', {'class': 'row'});
    var lab = function (text, input) { var l = el('label', null, text + ' '); l.appendChild(input); return l; };
    row.appendChild(lab('scale', scaleIn)); row.appendChild(lab('causal', causalIn)); row.appendChild(lab('window (0: none)', windowIn)); row.appendChild(lab('heads', headsIn)); row.appendChild(resetB);
    panel.insertBefore(row, status); panel.insertBefore(headsNote, status);
    syncPanel();
    cellEditing(inputs, function () { return f32; }, refresh);
    // Alt+click on a scaled score or a weight masks its key for that query (in every head), or unmasks it
    document.addEventListener('click', function (ev) {
      if (!ev.altKey) return; var c = ev.target.closest ? ev.target.closest('[data-m]') : null; if (!c) return;
      var m = M[c.getAttribute('data-m')]; if (!m.how || (m.how.op !== 'scale' && m.how.op !== 'softmax')) return;
      editor.toggleMask(+c.getAttribute('data-i'), +c.getAttribute('data-j'));
    }, true);
    if (E.note) panel.insertBefore(el('div', {'class': 'edit-status', id: 'edit-summarised'}, E.note + (loadDiffers ? ' (' + loadDiffers + ' of its numbers differ from the module\u2019s on load)' : '')), status);
    status.textContent = 'Editable: double-click an input cell (' + (proj ? 'the queries, keys or values' + (E.rotary_dim ? ' before RoPE' : '') : 'x' + (E.inputs.context ? ', the context' : '') + ', the weights' + (E.grad_outputs ? ', d_output' : '')) + ')' + (E.round ? ' (a typed number is rounded to ' + E.round + ', as the case stores it; the arithmetic is float32)' : '') + ', or change the options; every step below is recomputed by qkv\u2019s C++ core, compiled to WebAssembly (' +
      Math.round(E.module_bytes / 1024) + ' KB, in this page). Alt+click a scaled score or a weight to mask its key. Cells that differ from the ' +
      (D.source ? 'example\u2019s proven values' : 'case\u2019s') + ' turn orange.';
    document.documentElement.setAttribute('data-qkv-editable', '1');
  });
}
)JS";

/// the editor of a `qkv explain` page (io/page_recompute.hpp's edit object): after edit_js
inline constexpr const char* edit_steps_js = R"JS(
// a `qkv explain` page (E.kind "steps", io/page_recompute.hpp): each step of E.steps is one call of
// the module's qkv_step_f32/f64 (core/flat_steps.hpp), in the page's order, on the matrices'
// numbers; E.stale lists the matrices it does not recompute, with why
function startStepsEditor(E, panel, status) {
  editorStyle();
  return instantiateModule(E.module).then(function (res) {
    var X = res.instance.exports; if (X._initialize) X._initialize();
    // an exact page with a step over 128-bit rationals (03b's scores) carries the wide module too
    if (E.exact) return (E.wide_module ? instantiateModule(E.wide_module) : Promise.resolve(null)).then(function (w) {
      return startExactStepsEditor(E, panel, status, X, res.failure, w);
    });
    var f32of = function (id) { return M[id].dtype === 'float32'; };
    var ptr = {}, original = {}, baseline = {}, staleWhy = {}, isStep = {};
    E.stale.forEach(function (st) { staleWhy[st.id] = st.why; });
    var need = function (id) {  // a buffer in the module's memory for matrix id
      if (!id || ptr[id] !== undefined) return;
      ptr[id] = X.qkv_alloc(M[id].rows * M[id].cols * (f32of(id) ? 4 : 8));
    };
    var calls = E.steps.map(function (st) {
      isStep[st.id] = true;
      [st.a, st.b, st.c, st.id].forEach(need);
      var sz = X.qkv_alloc(8 * 4), mk = 0;
      new Uint32Array(X.memory.buffer, sz, 8).set(st.sizes);  // size_t is 32 bits in wasm32
      if (st.masked) { mk = X.qkv_alloc(st.masked.length); new Uint8Array(X.memory.buffer, mk, st.masked.length).set(st.masked.split('').map(Number)); }
      return {st: st, sizes: sz, mask: mk};
    });
    Object.keys(ptr).forEach(function (id) { if (M[id].scratch) M[id].data = new Array(M[id].rows * M[id].cols); });  // the first run fills it
    Object.keys(ptr).forEach(function (id) { original[id] = M[id].data.slice(); });
    Object.keys(staleWhy).forEach(function (id) { if (M[id]) original[id] = M[id].data.slice(); });
    var operands = Object.keys(ptr).filter(function (id) { return !isStep[id]; });
    var anyEdit = false, lastInputs = {};
    var guarded = trapGuard(X, res.failure);  // f() in the module; '' or the message it trapped on
    var truth = stepTruths(E, isStep, staleWhy);  // the 50-digit truth for the learner's inputs, on hover
    function run() {
      truth.invalidate();
      var t0 = performance.now(), dirty = {};  // the matrices whose numbers this run changes: only their cells are redrawn
      operands.forEach(function (id) {
        var d = M[id].data, last = lastInputs[id];
        if (!last || d.some(function (v, k) { return !Object.is(v, last[k]); })) { dirty[id] = true; lastInputs[id] = d.slice(); }
        new (f32of(id) ? Float32Array : Float64Array)(X.memory.buffer, ptr[id], d.length).set(d);
      });
      var rc = 0;
      calls.forEach(function (c) {
        var st = c.st, p = function (id) { return id ? ptr[id] : 0; };
        if (st.kind === 40) rc |= X.qkv_cast(f32of(st.a) ? 0 : 1, f32of(st.id) ? 0 : 1, p(st.a), M[st.id].data.length, p(st.id));  // a cast: float32 -> float64
        else rc |= (f32of(st.id) ? X.qkv_step_f32 : X.qkv_step_f64)(st.kind, p(st.a), p(st.b), p(st.c), c.mask, c.sizes, st.scalar, p(st.id));
      });
      calls.forEach(function (c) {  // as on a qkv attend page: a cell the edit does not reach keeps the page's number
        var id = c.st.id, n = M[id].data.length, out = new (f32of(id) ? Float32Array : Float64Array)(X.memory.buffer, ptr[id], n);
        var d = M[id].data, o = original[id], b = baseline[id];
        if (M[id].scratch) {  // a scratch matrix holds the module's numbers (the first run's are its original)
          for (var k1 = 0; k1 < n; ++k1) d[k1] = out[k1];
          if (!b) { baseline[id] = d.slice(); original[id] = d.slice(); }
          return;
        }
        for (var k = 0; k < n; ++k) { var nv = !b || Object.is(out[k], b[k]) ? o[k] : out[k]; if (!Object.is(d[k], nv)) { d[k] = nv; dirty[id] = true; } }
        if (!b) baseline[id] = Array.prototype.slice.call(out);
      });
      var t1 = performance.now();
      var wasEdit = anyEdit;
      anyEdit = optionsChanged() || E.inputs.some(function (id) { return M[id].data.some(function (v, k) { return !Object.is(v, original[id][k]); }); });
      if (wasEdit !== anyEdit) Object.keys(staleWhy).forEach(function (id) { dirty[id] = true; });  // grey, or not any more
      refresh(dirty);
      if (pinned && !tip.hidden) { var pn = tipFor(pinned); if (pn) showTip(pinned, pn); }
      var t2 = performance.now();
      editor.last = {compute_ms: t1 - t0, total_ms: t2 - t0, rc: rc};
      var changed = refresh.changedCells();
      status.textContent = 'Recomputed ' + calls.length + ' steps in ' + (t1 - t0).toFixed(2) + ' ms by qkv\u2019s C++ core (WebAssembly, ' + Math.round(E.module_bytes / 1024) +
        ' KB, in this page), the page redrawn in ' + (t2 - t1).toFixed(1) + ' ms; ' + changed + ' shown cells differ from the example\u2019s proven values (orange)' +
        (anyEdit && E.stale.length ? '; ' + E.stale.length + ' ' + (E.stale.length === 1 ? 'matrix is' : 'matrices are') + ' not recomputed (grey: they keep the example\u2019s numbers; hover one for why)' : '') + '.';
    }
    var refresh = cellPainter(E.inputs, {
      has: function (id) { return !!original[id]; },
      stale: function (id) { return anyEdit && staleWhy[id] !== undefined; },
      changed: function (id, i, j) { return editor.changed(id, i, j); },
      value: get,
      text: function (m, i, j, v) { return cellText(m, v); }
    });
    editor = {
      note: function (box, x) {
        if (anyEdit && staleWhy[x.id] !== undefined) {
          box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Not recomputed for your inputs: ' + staleWhy[x.id] + '. This is the example\u2019s number for its own inputs; Reset brings the page back to them.'));
          return;
        }
        if (!editor.changed(x.id, x.i, x.j)) return;
        box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Proven for the example\u2019s inputs: ' + vt(M[x.id], editor.original(x.id, x.i, x.j)) +
          '; recomputed for yours by qkv\u2019s C++ core (WebAssembly, in this page). ' + (truth.ready() && M[x.id].truth ? 'Its error against the 50-digit truth is for your inputs (qkv\u2019s reference, ' +
          'recomputed in this page); the proof lines are about the example\u2019s inputs' : 'The lines below are about the example\u2019s inputs') + '; Reset brings them back.'));
      },
      changed: function (id, i, j) { var o = original[id]; if (!o || staleWhy[id] !== undefined) return false; return !Object.is(o[i * M[id].cols + j], M[id].data[i * M[id].cols + j]); },
      original: function (id, i, j) { return original[id][i * M[id].cols + j]; },
      // true when taken; false for text that is not a number; the message of a step that refused
      // the number (a length outside 0..N: core/fail.hpp traps after writing it), the cell's last
      // good value then restored and the steps run again, so the page keeps its numbers
      set: function (id, i, j, text) {
        var f32 = f32of(id), v = typeof text === 'number' ? (f32 ? Math.fround(text) : text) : parseNumber(String(text), f32);
        if (v === undefined || E.inputs.indexOf(id) < 0) return false;
        var k = i * M[id].cols + j, old = M[id].data[k];
        M[id].data[k] = v;
        var why = guarded(run);
        if (!why) {
          [].forEach.call(document.querySelectorAll('td.edit-error'), function (td) { td.classList.remove('edit-error'); td.removeAttribute('title'); });
          return true;
        }
        M[id].data[k] = old; guarded(run); status.textContent = 'Refused: ' + why;
        return why;
      },
      reset: function () {
        Object.keys(original).forEach(function (id) { M[id].data = original[id].slice(); });
        anyEdit = false; refresh(); status.textContent = 'Reset: every number is the example\u2019s proven value again.';
      },
      inputs: E.inputs, steps: E.steps.map(function (st) { return st.id; }), stale: staleWhy, last: null,
      // the truth of a cell for the learner's inputs ({ulps, text}, or null: none), or undefined
      // before any edit (the page's own) and on a grey matrix (the example's, as its number)
      truth: function (id, i, j) { return anyEdit && staleWhy[id] === undefined && truth.ready() ? truth.cell(id, i, j) : undefined; }
    };
    // a learner's own sentence (D.sentence, page::sentence_input): the dictionary rule gives each
    // word a row of the embedding table; the words become the labels the example's words were
    var S = D.sentence, labelled = [], exampleWords = null;
    if (S) {
      // labels are objects, index -> text (page.hpp writes only the shown rows' on a summarised page)
      exampleWords = []; for (var q0 = 0; q0 < M[S.x].rows; ++q0) exampleWords.push(rl(M[S.x], q0));
      Object.keys(M).forEach(function (id) {
        ['row_labels', 'col_labels'].forEach(function (k) {
          var l = M[id][k]; if (!l || Object.keys(l).length !== exampleWords.length) return;
          if (exampleWords.every(function (w, q) { return l[q] === w; })) labelled.push(l);
        });
      });
    }
    function codePoints(a, b) {
      var x = Array.from(a), y = Array.from(b);
      for (var k = 0; k < Math.min(x.length, y.length); ++k) { var d = x[k].codePointAt(0) - y[k].codePointAt(0); if (d) return d; }
      return x.length - y.length;
    }
    function relabel(words) {
      labelled.forEach(function (l) { words.forEach(function (w, q) { l[q] = w; }); });
      [].forEach.call(document.querySelectorAll('table.m'), function (t) {
        var td0 = t.querySelector('td[data-m]'); if (!td0) return;
        var m = M[td0.getAttribute('data-m')], js = [].map.call(td0.parentNode.querySelectorAll('td[data-j]'), function (td) { return +td.getAttribute('data-j'); });
        [].forEach.call(t.querySelectorAll('th[scope=col]'), function (th, k) { if (js[k] !== undefined) th.textContent = cl(m, js[k]); });
        [].forEach.call(t.querySelectorAll('th[scope=row]'), function (th) { var td = th.parentNode.querySelector('td[data-i]'); if (td) th.textContent = rl(m, +td.getAttribute('data-i')); });
      });
    }
    editor.sentence = function (text) {  // '' when the page now shows it, else why not
      var X = M[S.x], Tb = M[S.table];
      var words = String(text).replace(/,/g, '').split(/\s+/).filter(function (w) { return w; });
      if (words.length !== X.rows) return 'A sentence of ' + X.rows + ' words, please (' + words.length + ' given): the example\u2019s tensors have ' + X.rows + ' rows.';
      var dict = words.filter(function (w, k) { return words.indexOf(w) === k; }).sort(codePoints);
      if (dict.length > Tb.rows) return 'At most ' + Tb.rows + ' different words: nn.Embedding(' + Tb.rows + ', ' + Tb.cols + ') has ' + Tb.rows + ' rows.';
      words.forEach(function (w, i) { var r = dict.indexOf(w); for (var c = 0; c < X.cols; ++c) X.data[i * X.cols + c] = Tb.data[r * Tb.cols + c]; });
      relabel(words); run(); refresh(null);  // every heatmap's labels, the grey ones' too
      sentenceNote.textContent = 'Your dictionary: {' + dict.map(function (w, k) { return '\u2018' + w + '\u2019: ' + k; }).join(', ') + '}; each word\u2019s row of ' + S.table + ' is its row of ' + S.x + '.';
      return '';
    };
    var resetEditor = editor.reset;
    editor.reset = function () { if (S) { relabel(exampleWords); sentenceNote.textContent = ''; sIn.value = exampleWords.join(' '); } resetEditor(); heatmaps.forEach(function (hmap) { hmap.show(hmap.state.head); }); };
    run();  // the baseline: the module on the example's own inputs (every cell keeps its number)
    var resetB = el('button', {type: 'button', id: 'edit-reset'}, 'Reset'), row = el('div', {'class': 'row'}), sentenceNote = el('div', {'class': 'edit-status', id: 'edit-sentence-note'});
    resetB.addEventListener('click', function () { editor.reset(); });
    if (S) {
      var sIn = el('input', {type: 'text', id: 'edit-sentence', 'aria-label': 'your sentence', size: '40', value: exampleWords.join(' ')});
      var sB = el('button', {type: 'button', id: 'edit-sentence-go'}, 'Use my sentence');
      var go = function () { var why = editor.sentence(sIn.value); sIn.classList.toggle('bad', !!why); sIn.title = why; if (why) sentenceNote.textContent = why; };
      sB.addEventListener('click', go);
      sIn.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') go(); });
      var lab = el('label', null, 'Your sentence '); lab.appendChild(sIn); row.appendChild(lab); row.appendChild(sB);
      sIn.title = S.rule;
      sentenceNote.textContent = 'Or type a sentence of ' + M[S.x].rows + ' words: ' + S.rule + '.';
    }
    row.appendChild(resetB); panel.insertBefore(row, status); panel.insertBefore(sentenceNote, status);
    // the inputs that a full page would compute (page_recompute.hpp's cut: an operand is not on this summarised page)
    if (E.cut && E.cut.length) {  // one item per input that a full page would compute (a summarised page's)
      var cutList = el('ul', {'class': 'edit-status', id: 'edit-cut'});
      E.cut.forEach(function (c) { cutList.appendChild(el('li', null, c.id + ' is an input here: ' + c.why + '.')); });
      panel.appendChild(cutList);
    }
    // The options (issue 30: "scale by 1 instead of 1/sqrt(d_k)", "mask a token"): each scale or
    // division's factor, one field per distinct factor (a page's heads share theirs), and a scaled
    // score's mask (Alt+click it, or its weight; M on a focused one): the step's own `scalar` and
    // `masked`, which the module reads on the next run (and E.steps shows, as a native run reads them)
    var scaleGroups = [], maskOf = {};
    calls.forEach(function (c) {
      var st = c.st; if (st.kind !== 4 && st.kind !== 5 && st.kind !== 54) return;  // flat::kind::scale, divide, padded_divide
      var gk = st.kind === 54 ? 5 : st.kind;  // a padded division shares its divisor's field
      var g = scaleGroups.filter(function (q) { return q.kind === gk && q.example === st.scalar; })[0];
      if (!g) scaleGroups.push(g = {kind: gk, example: st.scalar, value: st.scalar, calls: [], note: M[st.id].how.note});
      g.calls.push(c);
      var n = st.sizes[0] * st.sizes[1];
      if (!c.mask) { c.mask = X.qkv_alloc(n); new Uint8Array(X.memory.buffer, c.mask, n).fill(0); }
      c.exampleMask = st.masked;
      maskOf[st.id] = c;
    });
    calls.forEach(function (c) {  // a weight's cell masks its scaled score's
      if ((c.st.kind === 6 || c.st.kind === 14) && maskOf[c.st.a]) maskOf[c.st.id] = maskOf[c.st.a];
    });
    function optionsChanged() {  // (false for the first run, before the options exist)
      if (!scaleGroups) return false;
      return scaleGroups.some(function (g) { return !Object.is(g.value, g.example); }) ||
        Object.keys(maskOf).some(function (id) { return maskOf[id].st.masked !== maskOf[id].exampleMask; });
    }
    function setScale(g, v) {
      g.value = v;
      g.calls.forEach(function (c) {
        c.st.scalar = v; var h = M[c.st.id].how;
        if (c.st.kind !== 4) h.divisor = v; else h.scale = v;
        h.note = Object.is(v, g.example) ? g.note : undefined;  // the hover names the example's scale, or shows yours
      });
    }
    function setMask(c, text) {
      c.st.masked = text.indexOf('1') < 0 ? '' : text;
      var n = c.st.sizes[0] * c.st.sizes[1], bytes = new Uint8Array(X.memory.buffer, c.mask, n);
      for (var k = 0; k < n; ++k) bytes[k] = text.charAt(k) === '1' ? 1 : 0;
    }
    var scaleInputs = scaleGroups.map(function (g, k) {
      var ids = g.calls.map(function (c) { return c.st.id; });
      var inp = el('input', {type: 'text', id: 'edit-scale-' + k, 'aria-label': (g.kind === 5 ? 'divisor of ' : 'scale of ') + ids.join(', ')});
      inp.value = full(g.value);
      inp.addEventListener('change', function () { inp.classList.toggle('bad', !editor.setScale(k, inp.value)); });
      var l = el('label', {title: ids.join(', ')}, (g.kind === 5 ? 'divide ' : 'scale ') + (ids.length > 2 ? ids.slice(0, 2).join(', ') + ' and ' + (ids.length - 2) + ' more' : ids.join(', ')) + (g.kind === 5 ? ' by ' : ' by \u00d7 '));
      l.appendChild(inp); row.insertBefore(l, resetB);
      return inp;
    });
    editor.scales = function () { return scaleGroups.map(function (g) { return {kind: g.kind === 5 ? 'divide' : 'scale', ids: g.calls.map(function (c) { return c.st.id; }), value: g.value, example: g.example}; }); };
    editor.setScale = function (k, text) {  // true when set (a number, NaN and infinities included)
      var v = typeof text === 'number' ? text : parseNumber(String(text), false), g = scaleGroups[k];
      if (v === undefined || !g) return false;
      setScale(g, v); scaleInputs[k].value = full(v); run(); return true;
    };
    // a heatmap of one weights matrix hatches the keys its scaled scores mask (-inf) now
    var hatched = heatmaps.filter(function (hmap) { var b = hmap.hm.block; return hmap.hm.ids.length === 1 && (!b || b[0] * b[1] === 1) && maskOf[hmap.hm.ids[0]]; });
    var exampleHatch = hatched.map(function (hmap) { return hmap.hm.mask; });
    function rehatch() {
      hatched.forEach(function (hmap) {
        var sm = M[maskOf[hmap.hm.ids[0]].st.id];
        hmap.hm.mask = sm.data.map(function (v) { return v === -Infinity ? '1' : '0'; }).join(''); hmap.show(hmap.state.head);
      });
    }
    editor.toggleMask = function (id, i, j) {  // true when (id, i, j) is a maskable score or weight
      var c = maskOf[id]; if (!c) return false;
      var n = c.st.sizes[0] * c.st.sizes[1], C = c.st.sizes[1], t = (c.st.masked || new Array(n + 1).join('0')).split('');
      t[i * C + j] = t[i * C + j] === '1' ? '0' : '1'; setMask(c, t.join('')); run(); rehatch(); return true;
    };
    editor.maskedByYou = function (id, i, j) { var c = maskOf[id]; if (!c) return false; var C = c.st.sizes[1]; return (c.st.masked || '').charAt(i * C + j) === '1' && (c.exampleMask || '').charAt(i * C + j) !== '1'; };
    var resetInputs = editor.reset;
    editor.reset = function () {
      scaleGroups.forEach(function (g, k) { setScale(g, g.example); scaleInputs[k].value = full(g.example); });
      Object.keys(maskOf).forEach(function (id) { if (maskOf[id].st.id === id) setMask(maskOf[id], maskOf[id].exampleMask); });
      hatched.forEach(function (hmap, k) { hmap.hm.mask = exampleHatch[k]; });
      resetInputs();
    };
    document.addEventListener('click', function (ev) {
      if (!ev.altKey) return; var td = ev.target.closest ? ev.target.closest('td[data-m]') : null; if (!td) return;
      if (editor.toggleMask(td.getAttribute('data-m'), +td.getAttribute('data-i'), +td.getAttribute('data-j'))) ev.preventDefault();
    }, true);
    document.addEventListener('keydown', function (ev) {
      var td = document.activeElement; if ((ev.key !== 'm' && ev.key !== 'M') || !td || !td.getAttribute || !td.getAttribute('data-m')) return;
      if (editor.toggleMask(td.getAttribute('data-m'), +td.getAttribute('data-i'), +td.getAttribute('data-j'))) ev.preventDefault();
    });
    cellEditing(E.inputs, f32of, refresh);
    status.textContent = 'Editable: double-click a cell of ' + E.inputs.join(', ') + ' (or Tab to it and press Enter) and type a number' +
      (scaleGroups.length ? ', change a scale above, or Alt+click a scaled score or its weight to mask it (M on a focused one; again to unmask)' : '') + '; the ' + calls.length +
      ' steps that qkv\u2019s C++ core computes (compiled to WebAssembly, ' + Math.round(E.module_bytes / 1024) + ' KB, in this page) are recomputed. Cells that differ from the example\u2019s proven values turn orange' +
      (E.stale.length ? '; ' + E.stale.length + (E.stale.length === 1 ? ' matrix is not recomputed and turns' : ' matrices are not recomputed and turn') + ' grey after an edit (' + E.stale.map(function (st) { return st.id; }).join(', ') + ')' : '') + '.';
    document.documentElement.setAttribute('data-qkv-editable', '1');
  });
}
// The 50-digit truth for the learner's inputs (E.truth_module, wasm/qkv_truth.cpp: the same C++
// as the page's own truth, reference/step_truth.hpp), computed when a cell's explanation asks for
// it: a matrix's truth from its operands' (an input's: its number exactly), step by step as the
// page computes it, kept until the next edit. ready() is false until the module is compiled (it
// loads beside the editor, not before it) and on a page without one.
function stepTruths(E, isStep, staleWhy) {
  var X = null, memo = {}, bufs = {}, steps = {}, sizes = {};
  E.steps.forEach(function (st) { steps[st.id] = st; });
  if (E.truth_module) instantiateModule(E.truth_module).then(function (res) { X = res.instance.exports; if (X._initialize) X._initialize(); });
  function buf(id, bytes) { return bufs[id] !== undefined ? bufs[id] : (bufs[id] = X.qkv_alloc(bytes)); }
  function doubles(id) {  // the matrix's numbers as doubles in the module (exact: a float is a double)
    var d = M[id].data, p = buf('d:' + id, 8 * d.length);
    new Float64Array(X.memory.buffer, p, d.length).set(d);
    return p;
  }
  function of(id) {  // the pointer to matrix id's truths, or 0: none (its chain reaches a grey matrix)
    if (!id) return 0;
    if (memo[id] !== undefined) return memo[id];
    memo[id] = 0;  // (a cycle would give none)
    var m = M[id], n = m.rows * m.cols, st = steps[id], out = 0;
    if (staleWhy[id] !== undefined || !m.data) return 0;
    if (!st) {  // an input: its number, exactly
      if (isStep[id]) return 0;
      out = buf('t:' + id, n * X.qkv_truth_size());
      X.qkv_truth_of(doubles(id), n, out);
      return (memo[id] = out);
    }
    var a = of(st.a), b = of(st.b), c = of(st.c);
    if ((st.a && !a) || (st.b && !b) || (st.c && !c)) return 0;
    if (!sizes[id]) { sizes[id] = X.qkv_alloc(8 * 4); new Uint32Array(X.memory.buffer, sizes[id], 8).set(st.sizes); }
    out = buf('t:' + id, n * X.qkv_truth_size());
    if (X.qkv_truth_step(st.kind, a, b, c, sizes[id], st.scalar, doubles(id), out)) return 0;
    return (memo[id] = out);
  }
  return {
    ready: function () { return !!X; },
    invalidate: function () { memo = {}; },
    cell: function (id, i, j) {
      var p = of(id); if (!p) return null;
      var k = i * M[id].cols + j, v = buf('v', 8), u = buf('u', 8), txt = buf('s', 64), TS = X.qkv_truth_size();
      new Float64Array(X.memory.buffer, v, 1)[0] = M[id].data[k];
      X.qkv_truth_ulps(p + k * TS, v, 1, M[id].dtype === 'float32' ? 24 : 53, u);
      var len = X.qkv_truth_text(p + k * TS, txt);
      return {ulps: new Float64Array(X.memory.buffer, u, 1)[0], text: new TextDecoder().decode(new Uint8Array(X.memory.buffer, txt, len))};
    }
  };
}
)JS";

/// the exact part of a `qkv explain` page's editor (an edit object with "exact": 01b, 15): after
/// edit_steps_js, which calls startExactStepsEditor; only on the pages that need it (10 KB)
inline constexpr const char* edit_exact_js = R"JS(
// an exact page (E.exact "q64", io/page_recompute.hpp: 01b, 15): every number of its steps is a
// qkv::exact::rational<long long> in the module's memory, 16 bytes (numerator, then denominator
// > 0: two int64, read here as BigInt and never written by this script): a learner's text is
// parsed by the module's C++ (qkv_q64_parse: rational::parse, the native tool's grammar and
// messages), each step is one call of qkv_step_q64 (flat::exact_step), and each cell shows its
// fraction. An error (a zero denominator, malformed text, a sum or product that overflows 64-bit
// integers) traps in the module after writing the native message (core/fail.hpp, through
// fd_write: instantiateModule); the trap is caught here, the module's stack pointer put back, the
// cell's last good value restored and the steps run again, so the page keeps its numbers and
// stays usable, and the message is shown on the cell and in the status line.
//
// A page whose steps mix types (03b: float32, float64 and exact; kind 40, a cast from one type to
// another, flat::cast) holds its float matrices here too: each matrix has its own type's buffer
// (float32 4 bytes, float64 8, exact 16), each step is one call of its own type's entry
// (qkv_step_f32, qkv_step_f64, qkv_step_q64; a cast: qkv_cast), in the page's order, and each
// cell shows its own format (a float's shortest text, a fraction).
function startExactStepsEditor(E, panel, status, X, failure, wide) {
  var QS = 16, ptr = {}, isStep = {}, staleWhy = {}, originalText = {}, originalData = {}, maxCells = 1;
  // the wide module (wasm/qkv_wide.cpp): a step whose fractions overflow 64-bit integers, over
  // Boost's 128-bit rationals; its operands are copied in from this module's q64 values, its
  // result read back as fraction texts. No other step reads a wide step's result (io/page_recompute.hpp)
  var WX = wide ? wide.instance.exports : null, W = {};
  if (WX && WX._initialize) WX._initialize();
  E.stale.forEach(function (st) { staleWhy[st.id] = st.why; });
  var isQ = function (id) { return M[id].dtype === 'exact'; }, f32of = function (id) { return M[id].dtype === 'float32'; };
  var bytesOf = function (id) { return isQ(id) ? QS : f32of(id) ? 4 : 8; }, typeCode = function (id) { return isQ(id) ? 2 : f32of(id) ? 0 : 1; };
  var floatsOf = function (id) { return new (f32of(id) ? Float32Array : Float64Array)(X.memory.buffer, ptr[id], M[id].rows * M[id].cols); };
  var need = function (id) {
    if (!id || ptr[id] !== undefined) return;
    ptr[id] = X.qkv_alloc(M[id].rows * M[id].cols * bytesOf(id)); maxCells = Math.max(maxCells, M[id].rows * M[id].cols);
  };
  var calls = E.steps.map(function (st) {
    isStep[st.id] = true;
    [st.a, st.b, st.c, st.id].forEach(need);
    var sz = X.qkv_alloc(8 * 4), mk = 0;
    new Uint32Array(X.memory.buffer, sz, 8).set(st.sizes);  // size_t is 32 bits in wasm32
    if (st.masked) { mk = X.qkv_alloc(st.masked.length); new Uint8Array(X.memory.buffer, mk, st.masked.length).set(st.masked.split('').map(Number)); }
    return {st: st, sizes: sz, mask: mk};
  });
  var textAt = X.qkv_alloc(256), doubles = X.qkv_alloc(8 * maxCells);
  if (WX) {  // per wide step: its operands and result in q128, its sizes; one q64 staging buffer
    var WQ = WX.qkv_q128_size();
    W.stage = WX.qkv_alloc(QS * maxCells); W.text = WX.qkv_alloc(96); W.doubles = WX.qkv_alloc(8 * maxCells);
    calls.forEach(function (c) {
      if (!c.st.wide) return;
      c.w = {sizes: WX.qkv_alloc(8 * 4)};
      new Uint32Array(WX.memory.buffer, c.w.sizes, 8).set(c.st.sizes);
      ['a', 'b', 'c', 'id'].forEach(function (r) { var id = c.st[r]; if (id) c.w[r] = WX.qkv_alloc(WQ * M[id].rows * M[id].cols); });
      W[c.st.id] = c.w;
    });
  }
  // the wide module's guarded call: '' or the message of the error it trapped on (its own WASI output)
  var guardedWide = WX ? trapGuard(WX, wide.failure) : null;
  function wideStep(c) {  // the operands' q64 values into q128, then the step; '' or why
    if (!c.w) return 'this page does not carry the module of 128-bit rationals this step needs';
    var rc = 0, why = guardedWide(function () {
      ['a', 'b', 'c'].forEach(function (r) {
        var id = c.st[r]; if (!id) return;
        var n = M[id].rows * M[id].cols;
        new Uint8Array(WX.memory.buffer, W.stage, QS * n).set(new Uint8Array(X.memory.buffer, ptr[id], QS * n));
        WX.qkv_q128_from_q64(W.stage, n, c.w[r]);
      });
      rc = WX.qkv_step_q128(c.st.kind, c.w.a || 0, c.w.b || 0, c.w.c || 0, c.w.sizes, c.w.id);
    });
    return why || (rc ? 'the module has no exact form of this step' : '');
  }
  // f() in the module; '' or the message of the error it trapped on
  var guarded = trapGuard(X, failure);
  function parseInto(text, at) {
    var b = new TextEncoder().encode(text);
    if (b.length > 255) return 'qkv::exact::rational: the value does not fit the integer type';
    var t = new Uint8Array(X.memory.buffer, textAt, b.length + 1); t.set(b); t[b.length] = 0;
    return guarded(function () { X.qkv_q64_parse(textAt, at); });
  }
  function load(id, texts) {  // a matrix's fractions (a float matrix: its numbers) into its buffer
    var m = M[id];
    if (!isQ(id)) { floatsOf(id).set(m.data); return; }
    for (var k = 0; k < m.rows * m.cols; ++k) {
      var why = parseInto(texts[Math.floor(k / m.cols) + ',' + k % m.cols], ptr[id] + k * QS);
      if (why) throw new Error(id + ': ' + why);
    }
  }
  function readBack(id, dirty) {  // the buffer into the page's data: fraction texts and nearest doubles
    var m = M[id], n = m.rows * m.cols;
    if (!isQ(id)) {  // a float matrix: its numbers
      var fv = floatsOf(id);
      for (var k1 = 0; k1 < n; ++k1) if (!Object.is(m.data[k1], fv[k1])) { m.data[k1] = fv[k1]; dirty[id] = true; }
      return;
    }
    if (W[id]) {  // a wide step's result: its fractions as text, from the wide module
      WX.qkv_q128_to_f64(W[id].id, n, W.doubles);
      var wd = new Float64Array(WX.memory.buffer, W.doubles, n), WQ2 = WX.qkv_q128_size();
      for (var k2 = 0; k2 < n; ++k2) {
        var len = WX.qkv_q128_text(W[id].id + k2 * WQ2, W.text), key2 = Math.floor(k2 / m.cols) + ',' + k2 % m.cols;
        var t2 = new TextDecoder().decode(new Uint8Array(WX.memory.buffer, W.text, len));
        if (m.exact[key2] !== t2) { m.exact[key2] = t2; m.data[k2] = wd[k2]; dirty[id] = true; }
      }
      return;
    }
    X.qkv_q64_to_f64(ptr[id], n, doubles);
    var q = new BigInt64Array(X.memory.buffer, ptr[id], 2 * n), d = new Float64Array(X.memory.buffer, doubles, n);
    for (var k = 0; k < n; ++k) {
      var key = Math.floor(k / m.cols) + ',' + k % m.cols, t = q[2 * k + 1] === 1n ? String(q[2 * k]) : q[2 * k] + '/' + q[2 * k + 1];
      if (m.exact[key] !== t) { m.exact[key] = t; m.data[k] = d[k]; dirty[id] = true; }
    }
  }
  function runSteps() {  // every step in the page's order; '' or {step, why}
    for (var c = 0; c < calls.length; ++c) {
      var st = calls[c].st, p = function (id) { return id ? ptr[id] : 0; }, rc = 0, cl1 = calls[c];
      if (st.wide) {  // over 128-bit rationals, in the wide module
        var whyW = wideStep(cl1);
        if (whyW) return {step: st.id, why: whyW};
        continue;
      }
      var why = guarded(function () {
        if (st.kind === 40) rc = X.qkv_cast(typeCode(st.a), typeCode(st.id), p(st.a), M[st.id].rows * M[st.id].cols, p(st.id));
        else if (isQ(st.id)) rc = X.qkv_step_q64(st.kind, p(st.a), p(st.b), p(st.c), cl1.sizes, p(st.id));
        else rc = (f32of(st.id) ? X.qkv_step_f32 : X.qkv_step_f64)(st.kind, p(st.a), p(st.b), p(st.c), cl1.mask, cl1.sizes, st.scalar, p(st.id));
      });
      if (!why && rc) why = 'the module has no exact form of this step';
      if (why) return {step: st.id, why: why};
    }
    return '';
  }
  Object.keys(ptr).forEach(function (id) { if (!isStep[id]) load(id, M[id].exact); });
  Object.keys(ptr).concat(Object.keys(staleWhy)).forEach(function (id) {
    if (M[id] && !originalData[id]) { originalText[id] = Object.assign({}, M[id].exact || {}); originalData[id] = M[id].data.slice(); }
  });
  var anyEdit = false;
  var refresh = cellPainter(E.inputs, {
    has: function (id) { return !!originalData[id]; },
    stale: function (id) { return anyEdit && staleWhy[id] !== undefined; },
    changed: function (id, i, j) { return editor.changed(id, i, j); },
    value: function (m, i, j) { return m.exact ? m.exact[i + ',' + j] : get(m, i, j); },  // a fraction's text, or a float
    text: function (m, i, j) { return cellText(m, get(m, i, j), i + ',' + j); }
  });
  function report(t0, t1) {
    var t2 = performance.now(), changed = refresh.changedCells();
    editor.last = {compute_ms: t1 - t0, total_ms: t2 - t0, rc: 0};
    var mixed = calls.some(function (c) { return !isQ(c.st.id); });  // float steps too (03b)
    status.textContent = 'Recomputed ' + calls.length + (mixed ? ' steps, each in its own type,' : ' steps exactly') + ' in ' + (t1 - t0).toFixed(2) + ' ms by qkv\u2019s C++ (' + (mixed ? 'float32, float64 and ' : '') + 'rationals of 64-bit integers, WebAssembly, ' + Math.round(E.module_bytes / 1024) +
      ' KB, in this page), the page redrawn in ' + (t2 - t1).toFixed(1) + ' ms; ' + changed + ' shown cells differ from the example\u2019s proven values (orange)' +
      (anyEdit && E.stale.length ? '; ' + E.stale.length + ' ' + (E.stale.length === 1 ? 'matrix is' : 'matrices are') + ' not recomputed (grey: they keep the example\u2019s numbers; hover one for why)' : '') + '.';
  }
  editor = {
    note: function (box, x) {
      if (anyEdit && staleWhy[x.id] !== undefined) {
        box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Not recomputed for your inputs: ' + staleWhy[x.id] + '. This is the example\u2019s number for its own inputs; Reset brings the page back to them.'));
        return;
      }
      if (editor.error && editor.error.id === x.id && editor.error.i === x.i && editor.error.j === x.j)
        box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Your ' + editor.error.text + ' was not taken: ' + editor.error.why + '.'));
      if (!editor.changed(x.id, x.i, x.j)) return;
      var o = editor.original(x.id, x.i, x.j);
      box.appendChild(el('div', {'class': 'x-note x-changed'}, 'Proven for the example\u2019s inputs: ' + (typeof o === 'number' ? vt(M[x.id], o) : o) +
        '; recomputed for yours' + (isQ(x.id) ? ', exactly,' : ' in ' + M[x.id].dtype + ',') + ' by qkv\u2019s C++ (WebAssembly, in this page). The lines below are about the example\u2019s inputs; Reset brings them back.'));
    },
    changed: function (id, i, j) {
      if (!originalData[id] || staleWhy[id] !== undefined) return false;
      return isQ(id) ? originalText[id][i + ',' + j] !== M[id].exact[i + ',' + j] : !Object.is(originalData[id][i * M[id].cols + j], M[id].data[i * M[id].cols + j]);
    },
    original: function (id, i, j) { return isQ(id) ? originalText[id][i + ',' + j] : originalData[id][i * M[id].cols + j]; },
    // the learner's text for input id's cell (i, j): '' when taken, else why not (the module's message)
    set: function (id, i, j, text) {
      if (E.inputs.indexOf(id) < 0) return id + ' is not an input of this page';
      text = String(text).trim().replace(/\u2212/g, '-');
      var t0 = performance.now(), k = i * M[id].cols + j, at = ptr[id] + k * bytesOf(id);
      var before = new Uint8Array(X.memory.buffer, at, bytesOf(id)).slice();
      var fail = function (why, step) {
        editor.error = {id: id, i: i, j: j, text: text, why: why, step: step || ''};
        var td = document.querySelector('td[data-m="' + id.replace(/"/g, '\\"') + '"][data-i="' + i + '"][data-j="' + j + '"]');
        if (td) { td.classList.add('edit-error'); td.title = why; }
        status.textContent = 'Not taken: ' + id + '(' + (i + 1) + ', ' + (j + 1) + ') = ' + text + ': ' + why + (step ? ' (in the step ' + step + ')' : '') +
          '. The page keeps its numbers; type another value, or Reset.';
        return why;
      };
      var why = '';
      if (isQ(id)) why = parseInto(text, at);
      else { var v = parseNumber(text, f32of(id)); if (v === undefined) why = 'not a number (NaN, inf and -inf are numbers here)'; else floatsOf(id)[k] = v; }
      if (why) return fail(why);
      var r = runSteps();
      if (r) {  // the last good value back, and its steps again (they ran before: they fit)
        new Uint8Array(X.memory.buffer, at, bytesOf(id)).set(before);
        runSteps();
        return fail(r.why, r.step);
      }
      editor.error = null;
      [].forEach.call(document.querySelectorAll('td.edit-error'), function (td) { td.classList.remove('edit-error'); td.removeAttribute('title'); });
      var dirty = {};
      readBack(id, dirty);
      calls.forEach(function (c) { readBack(c.st.id, dirty); });
      var t1 = performance.now(), wasEdit = anyEdit;
      anyEdit = E.inputs.some(function (id2) { return isQ(id2) ? Object.keys(originalText[id2]).some(function (key) { return originalText[id2][key] !== M[id2].exact[key]; }) : M[id2].data.some(function (v2, k2) { return !Object.is(v2, originalData[id2][k2]); }); });
      if (wasEdit !== anyEdit) Object.keys(staleWhy).forEach(function (id2) { dirty[id2] = true; });
      refresh(dirty);
      if (pinned && !tip.hidden) { var pn = tipFor(pinned); if (pn) showTip(pinned, pn); }
      report(t0, t1);
      return '';
    },
    reset: function () {
      Object.keys(originalData).forEach(function (id) { if (isQ(id)) M[id].exact = Object.assign({}, originalText[id]); M[id].data = originalData[id].slice(); });
      Object.keys(ptr).forEach(function (id) { if (!isStep[id]) load(id, M[id].exact); });
      runSteps();
      editor.error = null;
      [].forEach.call(document.querySelectorAll('td.edit-error'), function (td) { td.classList.remove('edit-error'); td.removeAttribute('title'); });
      anyEdit = false; refresh(); heatmaps.forEach(function (hmap) { hmap.show(hmap.state.head); });
      status.textContent = 'Reset: every number is the example\u2019s proven value again.';
    },
    inputs: E.inputs, steps: E.steps.map(function (st) { return st.id; }), stale: staleWhy, last: null, error: null
  };
  var t0 = performance.now(), first = runSteps();  // the baseline: the module on the example's own inputs
  if (first) throw new Error(first.step + ': ' + first.why);
  var dirty0 = {}; calls.forEach(function (c) { readBack(c.st.id, dirty0); });
  report(t0, performance.now());
  var resetB = el('button', {type: 'button', id: 'edit-reset'}, 'Reset'), row = el('div', {'class': 'row'});
  resetB.addEventListener('click', function () { editor.reset(); });
  row.appendChild(resetB); panel.insertBefore(row, status);
  cellEditing(E.inputs, f32of, refresh);
  var kinds = {}; calls.forEach(function (c) { kinds[M[c.st.id].dtype === 'exact' ? 'exact rationals' : M[c.st.id].dtype] = true; });
  var wideIds = calls.filter(function (c) { return c.st.wide; }).map(function (c) { return c.st.id; });
  if (!E.inputs.some(isQ)) {  // a page whose inputs are floats and whose steps mix types (03b)
    status.textContent = 'Editable: double-click a cell of ' + E.inputs.join(', ') + ' (or Tab to it and press Enter) and type a number; the ' + calls.length +
      ' steps, each in its own type (' + Object.keys(kinds).join(', ') + ': a float\u2019s exact value is a rational, then sums and products of rationals of 64-bit integers' +
      (wideIds.length ? ', and of 128-bit ones for ' + wideIds.join(', ') + ' (a second module, ' + Math.round(E.wide_module_bytes / 1024) + ' KB)' : '') +
      '), are recomputed by qkv\u2019s C++ (compiled to WebAssembly, ' +
      Math.round(E.module_bytes / 1024) + ' KB, in this page). A number without an exact value (NaN, inf) or whose exact steps do not fit ' + (wideIds.length ? 'their' : '64-bit') + ' integers is refused with the native tool\u2019s message. Cells that differ from the example\u2019s proven values turn orange' +
      (E.stale.length ? '; ' + E.stale.length + (E.stale.length === 1 ? ' matrix is not recomputed and turns' : ' matrices are not recomputed and turn') + ' grey after an edit (' + E.stale.map(function (st) { return st.id; }).join(', ') + ')' : '') + '.';
    document.documentElement.setAttribute('data-qkv-editable', '1');
    return;
  }
  status.textContent = 'Editable, exactly: double-click a cell of ' + E.inputs.join(', ') + ' (or Tab to it and press Enter) and type a number: a fraction (3/2), a decimal (0.9) or one with an exponent (-1.5e-3), each an exact rational; the ' + calls.length +
    ' steps are recomputed exactly by qkv\u2019s C++ (rationals of 64-bit integers; compiled to WebAssembly, ' + Math.round(E.module_bytes / 1024) + ' KB, in this page), and a sum or product that does not fit 64-bit integers is refused with the native tool\u2019s message. Cells that differ from the example\u2019s proven values turn orange' +
    (E.stale.length ? '; ' + E.stale.length + (E.stale.length === 1 ? ' matrix is not recomputed and turns' : ' matrices are not recomputed and turn') + ' grey after an edit (' + E.stale.map(function (st) { return st.id; }).join(', ') + ')' : '') + '.';
  document.documentElement.setAttribute('data-qkv-editable', '1');
}
)JS";

}  // namespace qkv::io::page_script
