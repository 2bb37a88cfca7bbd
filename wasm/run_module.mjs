// run_module.mjs: the page's WebAssembly module under node (no WASI runtime needed: the module
// imports only fd_write, supplied below, and two C library stubs), on a case in
// tests/wasm/module_test.py's binary form on stdin; every step's bytes on stdout (then every
// gradient's, when the case has a d_output), as `qkv_wasm_check run` writes them natively.
//   node run_module.mjs qkv_wasm.wasm < case.bin
// With `case` after the module: qkv_attend_case_* (the second form: a context, kv_heads, a bias,
// ALiBi, RoPE) on a case in `qkv_wasm_check run_case`'s binary form (wasm/qkv_wasm_check.cpp).
import { readFileSync, writeSync } from 'node:fs';

// the module imports WASI's fd_write (and the C library's fd_close, fd_seek) for core/fail.hpp's
// message before a trap: written to stderr here, the others answer ENOSYS (unused)
const mod = await WebAssembly.compile(readFileSync(process.argv[2]));
const wasi = {};
for (const im of WebAssembly.Module.imports(mod)) wasi[im.name] = () => 52;
let memory = null;
wasi.fd_write = (fd, iovs, n, nwritten) => {
  const v = new DataView(memory.buffer);
  let total = 0;
  for (let k = 0; k < n; ++k) {
    const p = v.getUint32(iovs + 8 * k, true), len = v.getUint32(iovs + 8 * k + 4, true);
    writeSync(2, new Uint8Array(memory.buffer, p, len));
    total += len;
  }
  v.setUint32(nwritten, total, true);
  return 0;
};
const instance = await WebAssembly.instantiate(mod, { wasi_snapshot_preview1: wasi });
memory = instance.exports.memory;
const e = instance.exports;
if (e._initialize) e._initialize();
const input = readFileSync(0);
if (process.argv[3] === 'case') {
  runCase(input);
  process.exit(0);
}
const h = new Uint32Array(input.buffer.slice(input.byteOffset, input.byteOffset + 64));
const [dtype, t, d, dq, dv, dout, heads, outIn, hasBq, hasBk, hasBv, hasWo, hasBo, hasMask, hasDOutput] = h;
const at = e.qkv_alloc(input.length);
new Uint8Array(e.memory.buffer, at, input.length).set(input);
let p = at + 64;  // 16 words: the header above and one unused, so the numbers stay 8-aligned
const scaleBytes = new Uint8Array(e.memory.buffer, p, dtype).slice();
const scale = dtype === 8 ? new Float64Array(scaleBytes.buffer)[0] : new Float32Array(scaleBytes.buffer)[0];
p += dtype;
const take = (present, n) => { if (!present) return 0; const r = p; p += n * dtype; return r; };
const x = take(1, t * d), wq = take(1, dq * d), bq = take(hasBq, dq), wk = take(1, dq * d), bk = take(hasBk, dq);
const wv = take(1, dv * d), bv = take(hasBv, dv), wo = take(hasWo, dout * dv), bo = take(hasBo, dout);
const mask = hasMask ? p : 0;
const n = e.qkv_output_size(t, dq, dv, heads, hasWo ? dout : 0);
const out = e.qkv_alloc(n * dtype);
const f = dtype === 8 ? e.qkv_attend_f64 : e.qkv_attend_f32;
const rc = f(x, t, d, wq, bq, wk, bk, wv, bv, dq, dv, wo, bo, dout, heads, outIn, scale, mask, out);
if (rc !== 0) process.exit(2);
writeSync(1, new Uint8Array(e.memory.buffer, out, n * dtype));
if (hasDOutput) {  // d_output after the mask: every gradient too (qkv::flat::gradients_layout)
  const nd = t * (hasWo ? dout : dv), dOutput = e.qkv_alloc(nd * dtype);  // aligned: after the mask it may not be
  const from = p + (hasMask ? t * t : 0);
  new Uint8Array(e.memory.buffer, dOutput, nd * dtype).set(new Uint8Array(e.memory.buffer, from, nd * dtype));
  const g = e.qkv_gradients_size(t, d, dq, dv, heads, hasWo ? dout : 0);
  const gout = e.qkv_alloc(g * dtype);
  const b = dtype === 8 ? e.qkv_attend_backward_f64 : e.qkv_attend_backward_f32;
  if (b(x, t, d, wq, wk, wv, dq, dv, wo, dout, heads, outIn, scale, out, dOutput, gout) !== 0) process.exit(2);
  writeSync(1, new Uint8Array(e.memory.buffer, gout, g * dtype));
}

// the second form: 32 header words (qkv_wasm_check.cpp's run_case), the numbers, the mask, d_output
function runCase(input) {
  const h = new Uint32Array(input.buffer.slice(input.byteOffset, input.byteOffset + 128));
  const [size, t, d, s, dc, dq, dv, heads, kvHeads, dout, outIn, biasHeads, rotary, interleaved, offsetBits,
    hasContext, hasBq, hasBk, hasBv, hasWo, hasBo, hasSlopes, hasMask, hasDOutput] = h;
  const offset = offsetBits | 0, keys = hasContext ? s : t, din = hasContext ? dc : d, hk = kvHeads || heads;
  const dkv = hk * (dq / heads), dvkv = hk * (dv / heads), half = rotary / 2;
  const at = e.qkv_alloc(input.length);
  new Uint8Array(e.memory.buffer, at, input.length).set(input);
  let p = at + 128;
  const scaleBytes = new Uint8Array(e.memory.buffer, p, size).slice();
  const scale = size === 8 ? new Float64Array(scaleBytes.buffer)[0] : new Float32Array(scaleBytes.buffer)[0];
  p += size;
  const take = (present, n) => { if (!present) return 0; const r = p; p += n * size; return r; };
  const x = take(1, t * d), context = take(hasContext, s * dc), wq = take(1, dq * d), bq = take(hasBq, dq);
  const wk = take(1, dkv * din), bk = take(hasBk, dkv), wv = take(1, dvkv * din), bv = take(hasBv, dvkv);
  const wo = take(hasWo, dout * dv), bo = take(hasBo, dout), bias = take(biasHeads, biasHeads * t * keys);
  const slopes = take(hasSlopes, heads);
  const cosQ = take(rotary, t * half), sinQ = take(rotary, t * half), cosK = take(rotary, keys * half);
  const sinK = take(rotary, keys * half);
  const mask = hasMask ? p : 0;
  const ptrs = e.qkv_alloc(16 * 4), z = e.qkv_alloc(13 * 4);
  new Uint32Array(e.memory.buffer, ptrs, 16).set([x, context, wq, bq, wk, bk, wv, bv, wo, bo, bias, slopes, cosQ, sinQ,
    cosK, sinK]);
  new Uint32Array(e.memory.buffer, z, 13).set([t, d, hasContext ? s : 0, hasContext ? dc : 0, dq, dv, heads, kvHeads,
    dout, outIn, biasHeads, rotary, interleaved]);
  const n = e.qkv_case_output_size(z), out = e.qkv_alloc(n * size);
  const f = size === 8 ? e.qkv_attend_case_f64 : e.qkv_attend_case_f32;
  if (f(ptrs, z, offset, scale, mask, out) !== 0) process.exit(2);
  writeSync(1, new Uint8Array(e.memory.buffer, out, n * size));
  if (hasDOutput) {
    const nd = t * (hasWo ? dout : dv), dOutput = e.qkv_alloc(nd * size);
    const from = p + (hasMask ? t * keys : 0);
    new Uint8Array(e.memory.buffer, dOutput, nd * size).set(new Uint8Array(e.memory.buffer, from, nd * size));
    const g = e.qkv_case_gradients_size(z), gout = e.qkv_alloc(g * size);
    const b = size === 8 ? e.qkv_attend_case_backward_f64 : e.qkv_attend_case_backward_f32;
    if (b(ptrs, z, offset, scale, mask, out, dOutput, gout) !== 0) process.exit(2);
    writeSync(1, new Uint8Array(e.memory.buffer, gout, g * size));
  }
}
