#!/usr/bin/env node
// bench_ort.js -- ONNX Runtime (onnxruntime-node 1.30, CPU execution provider, float32) peers for
// the attention workloads W1..W5; a command-style implementation (see README.md and bench_torch.py,
// whose protocol and RESULT line this follows):
//
//   RESULT wid impl threads t_min t_med t_max flops heap_peak_bytes cores_used
//          frac_adj_peak probe_gflops bg_cores check calls_per_rep reps note
//
// Models, inputs and float64 references come from ort_models.py (Debian python3-onnx + numpy),
// built on first use into $ORT_MODEL_DIR (default .ort/models beside this file) and rebuilt when
// ort_models.py changes. The inputs are the harness's own (harness.cpp make_data, bit for bit),
// so the rows check against the same reference as the C++ rows (sampled rows, tolerance 2e-4 of
// max |ref|). Weights are initializers of the model (constant; ORT prepacks them at session
// creation, untimed).
//
// Implementations (W = workloads where they run):
//   ort                 W3: X -> com.microsoft.Attention(num_heads 12) with packed [Wq|Wk|Wv] weights
//                       [768, 2304] and bias (one GEMM for Q/K/V; unfused attention, n = 128) ->
//                       MatMul+Add (ORT rewrites it to Gemm). Chosen over `ort-mha`: 5-15 % faster at
//                       1 thread in quick interleaved runs (2026-11-23, loaded machine).
//                       W4/W5: Q, K, V [1, n, heads*64] -> com.microsoft.MultiHeadAttention(heads)
//                       (CPU kernel: MLAS flash attention for fp32 without mask/past/attention bias)
//   ort-mha             W3, diagnostic: MatMul+Add x3 -> com.microsoft.MultiHeadAttention(12)
//                       (MLAS flash) -> MatMul+Add
//   ort-onnx-attention  W3/W4/W5, diagnostic: the standard ONNX Attention op (opset 23) in place
//                       of MultiHeadAttention (unfused CPU kernel in 1.30)
//                       W4c/W5c: the same with unidirectional = 1 (causal; the ONNX Attention rows is_causal = 1)
//   ort-mha-noflash     W4/W5, diagnostic: `ort` with ORT_DISABLE_FLASH_ATTENTION=1 set while its
//                       session is created (the unfused MultiHeadAttention path): shows the flash
//                       path is what `ort` runs
//   ort (W1/W2)         diagnostic: MatMul x3 -> MultiHeadAttention(1); node -> N-API call overhead
//                       dominates
// Session options: intraOpNumThreads = threads, interOpNumThreads = 1, executionMode sequential,
// graphOptimizationLevel 'all', everything else default (CPU arena, memory pattern, spinning
// intra-op pool). One session per (workload, implementation, threads), created untimed. A timed
// call is `await session.run(feeds)` (one N-API call, output tensor allocated per call).
// heap_peak_bytes = -1: node cannot call libmemtrack (no FFI); instead one DIAG line per row gives
// the node process's peak RSS growth over session creation + 2 calls (VmHWM after resetting it;
// approximate, includes mmap'd memory): it shows which paths hold the n x n scores.
// The FMA probe runs in a small python3/ctypes coprocess that loads $BENCH_PROBE_LIB (same probe,
// same thread count, run right before each repetition; the coprocess sleeps on a pipe otherwise).
//
// usage: node bench_ort.js [--workloads W1,..] [--impls a,b] [--threads 1,2] [--reps N>=5]
//        [--rep-ms 40] [--gap-ms 100] [--probe-ms 20] [--quiet-cores 0.3] [--quiet-max-ms 1000]
//        [--quiet-budget-s S] [--models DIR] [--rebuild] [--info]
// Defaults from the environment run.sh exports: BENCH_WORKLOADS, BENCH_THREADS, BENCH_REPS,
// BENCH_QUIET_BUDGET, BENCH_PROBE_LIB. onnxruntime-node is taken from require() or from
// $ORT_NODE_DIR/node_modules (default .ort beside this file).
'use strict';

const fs = require('fs');
const path = require('path');
const cp = require('child_process');
const crypto = require('crypto');
const readline = require('readline');

const HERE = __dirname;
const PY = '/usr/bin/python3';

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    const dir = process.env.ORT_NODE_DIR || require('path').join(__dirname, '.ort');
    return require(path.join(dir, 'node_modules', 'onnxruntime-node'));
  }
}
const ort = loadOrt();

// ---------------------------------------------------------------- arguments
function parseArgs() {
  const env = process.env;
  const a = {
    workloads: env.BENCH_WORKLOADS || 'W1,W2,W3,W4,W5,W4c,W5c',
    impls: '',
    threads: env.BENCH_THREADS || '1,2',
    reps: Number(env.BENCH_REPS || 7),
    repMs: 40, gapMs: 100, probeMs: 20, quietCores: 0.3, quietMaxMs: 1000,
    quietBudgetS: Number(env.BENCH_QUIET_BUDGET || 20),
    models: env.ORT_MODEL_DIR || require('path').join(__dirname, '.ort', 'models'),
    rebuild: false, info: false,
  };
  const keys = {
    '--workloads': 'workloads', '--impls': 'impls', '--threads': 'threads', '--reps': 'reps',
    '--rep-ms': 'repMs', '--gap-ms': 'gapMs', '--probe-ms': 'probeMs', '--quiet-cores': 'quietCores',
    '--quiet-max-ms': 'quietMaxMs', '--quiet-budget-s': 'quietBudgetS', '--models': 'models',
  };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    if (k === '--rebuild') a.rebuild = true;
    else if (k === '--info') a.info = true;
    else if (keys[k] && i + 1 < argv.length) {
      const v = argv[++i];
      a[keys[k]] = typeof a[keys[k]] === 'number' ? Number(v) : v;
    } else {
      process.stderr.write(`usage: see the header of ${path.basename(__filename)} (bad argument ${k})\n`);
      process.exit(2);
    }
  }
  a.reps = Math.max(5, a.reps | 0);
  a.workloadList = a.workloads.split(',').filter(Boolean);
  a.implList = a.impls.split(',').filter(Boolean);
  a.threadList = a.threads.split(',').filter(Boolean).map(Number);
  return a;
}

// ---------------------------------------------------------------- models
function ensureModels(a) {
  const builder = path.join(HERE, 'ort_models.py');
  const sha1 = crypto.createHash('sha1').update(fs.readFileSync(builder)).digest('hex');
  const mf = path.join(a.models, 'manifest.json');
  let m = null;
  try {
    m = JSON.parse(fs.readFileSync(mf, 'utf8'));
  } catch (e) { /* build below */ }
  if (a.rebuild || !m || m.builder_sha1 !== sha1) {
    process.stderr.write(`# bench_ort: building models into ${a.models}\n`);
    const r = cp.spawnSync(PY, ['-B', builder, '--out', a.models], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) throw new Error(`ort_models.py failed (exit ${r.status}); needs Debian python3-onnx`);
    m = JSON.parse(fs.readFileSync(mf, 'utf8'));
  }
  return m;
}

// name -> [graph, note, validate, env for the session]
function variantsFor(wid) {
  const cfg = 'ORT 1.30 CPU EP (onnxruntime-node), intra=T inter=1 sequential, opt all';
  if (wid === 'W1' || wid === 'W2')
    return [['ort', 'mha', `diagnostic: MatMul x3 -> com.microsoft.MultiHeadAttention(1); ${cfg}; node call overhead dominates`, true, null]];
  if (wid === 'W3')  // com.microsoft.Attention measured 5-15 % faster than the MHA graph at 1 thread (2026-11-23)
    return [
      ['ort', 'attn', `com.microsoft.Attention(12), packed [Wq|Wk|Wv] weights + bias (unfused attention) -> MatMul+Add; ${cfg}`, true, null],
      ['ort-mha', 'mha', `diagnostic: MatMul+Add x3 -> com.microsoft.MultiHeadAttention(12) (MLAS flash) -> MatMul+Add; ${cfg}`, true, null],
      ['ort-onnx-attention', 'onnx', `diagnostic: MatMul+Add x3 -> ONNX Attention-23 (unfused) -> MatMul+Add; ${cfg}`, true, null],
    ];
  const causal = wid.endsWith('c') ? ', unidirectional=1 (causal)' : '';  // W4c, W5c (ort_models.py)
  return [
    ['ort', 'mha', `com.microsoft.MultiHeadAttention(Q,K,V)${causal} (MLAS flash attention); ${cfg}`, true, null],
    ['ort-onnx-attention', 'onnx', `diagnostic: ONNX Attention-23 op, 3-D Q/K/V (unfused CPU kernel); ${cfg}`, true, null],
    ['ort-mha-noflash', 'mha', `diagnostic: ort with ORT_DISABLE_FLASH_ATTENTION=1 (unfused MultiHeadAttention path); ${cfg}`, true,
      { ORT_DISABLE_FLASH_ATTENTION: '1' }],
  ];
}

// ---------------------------------------------------------------- machine
const CLK_TCK = (() => {
  try {
    return Number(cp.execSync('getconf CLK_TCK').toString().trim()) || 100;
  } catch (e) {
    return 100;
  }
})();
function machineBusyS() {
  const v = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1, 9).map(Number);
  return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / CLK_TCK;
}
function cpuS() {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1e-6;
}
function nowS() {
  return Number(process.hrtime.bigint()) * 1e-9;
}
// peak RSS: VmHWM after resetting it (clear_refs 5, Linux >= 4.0); memory ORT mmaps counts too
function vmKiB(field) {
  const m = new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : NaN;
}
function resetPeakRss() {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch (e) {
    return false;
  }
}
const sleep = (s) => new Promise((r) => setTimeout(r, Math.max(0, s * 1e3)));

class QuietGate {  // same as harness.cpp / bench_torch.py
  constructor(minGap, quietCores, maxWait, budget) {
    Object.assign(this, { minGap, quietCores, maxWait, budget, waitedTotal: 0 });
  }
  async wait() {
    const win = 0.1;
    await sleep(this.minGap - win);
    let waited = 0;
    for (;;) {
      const m0 = machineBusyS(), c0 = cpuS(), t0 = nowS();
      await sleep(win);
      const m1 = machineBusyS(), c1 = cpuS(), t1 = nowS();
      const others = ((m1 - m0) - (c1 - c0)) / (t1 - t0);
      if (others < this.quietCores || waited >= this.maxWait || this.waitedTotal >= this.budget) return;
      waited += win;
      this.waitedTotal += win;
    }
  }
}

// FMA probe: a python3 ctypes coprocess around $BENCH_PROBE_LIB's bench_fma_probe(threads, seconds)
class Probe {
  constructor() {
    this.ok = false;
    const lib = process.env.BENCH_PROBE_LIB || '/tmp/bench/build/libbenchprobe.so';
    if (!fs.existsSync(lib)) {
      process.stderr.write(`# no FMA probe (${lib}); frac_adj/probe columns = nan\n`);
      return;
    }
    const code = [
      'import ctypes, sys',
      'f = ctypes.CDLL(sys.argv[1]).bench_fma_probe',
      'f.restype = ctypes.c_double',
      'f.argtypes = [ctypes.c_int, ctypes.c_double]',
      'for line in sys.stdin:',
      '    t, s = line.split()',
      '    print(repr(f(int(t), float(s))), flush=True)',
    ].join('\n');
    this.proc = cp.spawn(PY, ['-B', '-c', code, lib], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.waiting = [];
    readline.createInterface({ input: this.proc.stdout }).on('line', (l) => {
      const r = this.waiting.shift();
      if (r) r(Number(l));
    });
    this.proc.on('exit', () => {
      this.ok = false;
      for (const r of this.waiting.splice(0)) r(NaN);
    });
    this.ok = true;
  }
  run(threads, seconds) {
    if (!this.ok) return Promise.resolve(NaN);
    return new Promise((res) => {
      this.waiting.push(res);
      this.proc.stdin.write(`${threads} ${seconds}\n`);
    });
  }
  close() {
    if (this.proc) this.proc.stdin.end();
  }
}

// ---------------------------------------------------------------- protocol
// printf's %.<d>e: two-digit exponent (7.7e-08), as the C++ and Python runners print
const cExp = (x, d) => (Number.isFinite(x) ? x.toExponential(d).replace(/e([+-])(\d)$/, 'e$10$2')
  : Number.isNaN(x) ? 'nan' : x > 0 ? 'inf' : '-inf');
const median = (v) => {
  const s = [...v].sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]);
};

function sessionOptions(T) {
  return {
    executionProviders: ['cpu'],
    intraOpNumThreads: T,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
}

async function createSession(file, T, env) {
  const saved = {};
  for (const [k, v] of Object.entries(env || {})) {
    saved[k] = process.env[k];
    process.env[k] = v;  // setenv: read by the kernels' constructors during session creation
  }
  try {
    return await ort.InferenceSession.create(file, sessionOptions(T));
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

async function benchWorkload(wid, T, a, man, gate, probe) {
  const w = man.workloads[wid];
  if (!w) throw new Error(`workload ${wid} not in the manifest (rebuild with --rebuild)`);
  const inBuf = fs.readFileSync(path.join(a.models, `${wid}.in.bin`));
  const inF = new Float32Array(inBuf.buffer, inBuf.byteOffset, inBuf.byteLength / 4);
  const refBuf = fs.readFileSync(path.join(a.models, `${wid}.ref.bin`));
  const ref = new Float64Array(refBuf.buffer.slice(refBuf.byteOffset, refBuf.byteOffset + refBuf.byteLength));
  let refMax = 1e-30;
  for (const x of ref) refMax = Math.max(refMax, Math.abs(x));
  const feeds = {};
  for (const i of w.inputs)
    feeds[i.name] = new ort.Tensor('float32', Float32Array.from(inF.subarray(i.offset, i.offset + i.count)), i.dims);
  const oc = w.out_cols;

  const slots = [];
  for (const [name, graph, note, validate, env] of variantsFor(wid)) {
    if (a.implList.length && !a.implList.includes(name)) continue;
    if (!w.models[graph]) continue;
    const rssOk = resetPeakRss(), rss0 = vmKiB('VmRSS');
    let sess;
    try {
      sess = await createSession(path.join(a.models, w.models[graph]), T, env);
    } catch (e) {
      process.stderr.write(`# bench_ort: ${wid} ${name}: session creation failed: ${e.message}\n`);
      continue;
    }
    const outName = sess.outputNames[0];
    const fn = () => sess.run(feeds);
    await fn();  // warm-up (lazy init, arena)
    const y = (await fn())[outName].data;
    const rssGrowth = rssOk ? (vmKiB('VmHWM') - rss0) / 1024 : NaN;  // MiB
    let check = 'n/a';
    if (validate) {
      let err = 0;
      w.rows.forEach((r, k) => {
        for (let c = 0; c < oc; ++c) {
          const v = y[r * oc + c];
          err = Number.isFinite(v) ? Math.max(err, Math.abs(v - ref[k * oc + c])) : Infinity;
        }
      });
      const rel = err / refMax;
      check = (rel < 2e-4 ? 'ok ' : 'FAIL ') + cExp(rel, 1);
    }
    // calibrate calls per repetition
    let t0 = nowS();
    await fn();
    let one = Math.max(nowS() - t0, 1e-9), calls = 1;
    for (let it = 0; it < 6; ++it) {
      calls = Math.max(1, Math.ceil(a.repMs * 1e-3 / one));
      const m = Math.min(calls, 64);
      t0 = nowS();
      for (let i = 0; i < m; ++i) await fn();
      const est = (nowS() - t0) / m;
      if (est > 0.7 * one && est < 1.4 * one) break;
      one = est;
    }
    slots.push({ name, note, sess, fn, calls, check, rssGrowth, t: [], cpu: [], frac: [], probe: [], bg: [] });
  }
  for (let r = 0; r < a.reps; ++r) {
    for (let k = 0; k < slots.length; ++k) {
      const s = slots[(k + r) % slots.length];
      await gate.wait();
      const pr = await probe.run(T, a.probeMs * 1e-3);
      const warm = s.calls > 1 ? Math.max(1, Math.floor(s.calls / 8)) : 0;  // none if one call fills a rep
      for (let i = 0; i < warm; ++i) await s.fn();
      const m0 = machineBusyS(), c0 = cpuS(), t0 = nowS();
      for (let i = 0; i < s.calls; ++i) await s.fn();
      const t1 = nowS(), c1 = cpuS(), m1 = machineBusyS();
      const per = (t1 - t0) / s.calls;
      s.t.push(per);
      s.cpu.push((c1 - c0) / (t1 - t0));
      s.bg.push(Math.max(0, ((m1 - m0) - (c1 - c0)) / (t1 - t0)));
      s.probe.push(pr);
      s.frac.push(w.flops / per * 1e-9 / pr);
    }
  }
  for (const s of slots) {
    const e = (x) => cExp(x, 6);
    const f = (x, d) => (Number.isFinite(x) ? x.toFixed(d) : 'nan');
    console.log(['RESULT', wid, s.name, T, e(Math.min(...s.t)), e(median(s.t)), e(Math.max(...s.t)), e(w.flops), -1,
      f(median(s.cpu), 3), f(median(s.frac), 4), f(median(s.probe), 2), f(median(s.bg), 2), s.check, s.calls, a.reps,
      s.note].join('\t'));
  }
  for (const s of slots) {
    console.log(['DIAG', `${wid} ${s.name}, ${T} thread${T > 1 ? 's' : ''}: memory (ORT, node process)`,
      'peak RSS growth over session creation + 2 calls (VmHWM, approximate; the heap column is - for ORT)',
      `${Number.isFinite(s.rssGrowth) ? s.rssGrowth.toFixed(1) : 'n/a'} MiB`].join('\t'));
    await s.sess.release();
  }
}

async function main() {
  const a = parseArgs();
  const man = ensureModels(a);
  console.log(`# onnxruntime-node ${ort.env.versions.node} (common ${ort.env.versions.common}), node ${process.version}, ` +
    `models ${a.models} (onnx ${man.onnx}), probe via ${process.env.BENCH_PROBE_LIB || '(default path)'}`);
  console.log(['META', 'onnxruntime', `onnxruntime-node ${ort.env.versions.node} (npm; its bundled CPU libonnxruntime), ` +
    `node ${process.version}; models built by ort_models.py with onnx ${man.onnx}, numpy ${man.numpy}`].join('\t'));
  if (a.info) return;
  // ORT's one-time process setup (environment, kernel registries), untimed, outside every memory window
  const w1 = man.workloads.W1;
  if (w1 && w1.models.mha) {
    const s = await createSession(path.join(a.models, w1.models.mha), 1, null);
    await s.run({ X: new ort.Tensor('float32', new Float32Array(12), [1, 3, 4]) });
    await s.release();
  }
  const gate = new QuietGate(a.gapMs * 1e-3, a.quietCores, a.quietMaxMs * 1e-3, a.quietBudgetS);
  const probe = new Probe();
  try {
    for (const T of a.threadList)
      for (const wid of a.workloadList) await benchWorkload(wid, T, a, man, gate, probe);
  } finally {
    probe.close();
  }
  console.log(`# quiet-gate: waited ${gate.waitedTotal.toFixed(1)} s extra for other processes (< ${a.quietCores.toFixed(2)} cores)`);
}

main().catch((e) => {
  process.stderr.write(`bench_ort.js: ${e.stack || e}\n`);
  process.exit(1);
});
