// args.mjs — the options bullmq_add.mjs and bullmq_worker.mjs share: `--name value` pairs
// into an object of numbers (or strings where a default is a string); anything unknown is an
// error, so a typo in bench/run.sh fails loudly instead of measuring something else.
export function parseArgs(argv, defaults) {
  const out = { ...defaults };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in defaults) || i + 1 >= argv.length) {
      throw new Error(`unknown option or missing value: ${argv[i]} (know: ${Object.keys(defaults).join(", ")})`);
    }
    const v = argv[i + 1];
    if (typeof defaults[key] === "number") {
      const x = Number(v);
      if (!Number.isFinite(x) || x < 0) throw new Error(`--${key}: '${v}' is not a number >= 0`);
      out[key] = x;
    } else {
      out[key] = v;
    }
  }
  return out;
}

// Nearest-rank percentile of a sorted array (as bench/lateness.c's pct).
export function pct(sorted, q) {
  if (sorted.length === 0) return NaN;
  const k = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[k - 1];
}

export function printKV(obj) {
  for (const [k, v] of Object.entries(obj)) {
    console.log(`${k}=${typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : v}`);
  }
}
