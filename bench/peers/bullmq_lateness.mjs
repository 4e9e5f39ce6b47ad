// bullmq_lateness.mjs — figure 18's BullMQ lateness (information): delayed jobs added at a steady
// rate while a Worker in the same node process takes them as they come due.
//
//   node bullmq_lateness.mjs --port P [--rate 1000] [--duration 30] [--delay-min 1000] [--delay-max 3000]
//                            [--concurrency 64] [--grace 10] [--queue lat]
//
// Figure 2's schedule (bench/lateness.c steady): job k is added at t0 + k/rate (open loop: an add
// does not wait for the one before), with a delay spread uniformly over [delay-min, delay-max] ms
// (BullMQ's delays are milliseconds, as hourglass's), its data ~100 bytes of JSON carrying its due
// time = the wall clock when the add is issued + the delay. A Worker of --concurrency (no-op
// processor, removeOnComplete) runs alongside; lateness = the wall clock when the processor is
// called − the due time, in ms, sampled for jobs due in figure 2's steady window [t0 + delay-max,
// t0 + duration + delay-min]. Every added job must be processed once (a second call for a job id
// is a duplicate, counted). Prints bench/lateness.c's keys (rate_target, pushed, push_rate,
// received, lat_ms_p99...), which bench/run.sh records as bmqlat1k_*; exit status 3 when jobs were
// lost or failed.
import { Queue, Worker } from "bullmq";
import { parseArgs, pct, printKV } from "./args.mjs";

const o = parseArgs(process.argv.slice(2), {
  port: 6379, rate: 1000, duration: 30, "delay-min": 1000, "delay-max": 3000, concurrency: 64, grace: 10,
  queue: "lat",
});
const connection = { host: "127.0.0.1", port: o.port };
const now = () => performance.timeOrigin + performance.now(); // wall clock, sub-millisecond
const queue = new Queue(o.queue, { connection });
await queue.waitUntilReady();
const seen = new Set();
const lat = [];
let received = 0, duplicates = 0, failed = 0, firstError = "";
let t0 = 0;
const lo = () => t0 + o["delay-max"], hi = () => t0 + o.duration * 1000 + o["delay-min"];
const worker = new Worker(o.queue, async (job) => {
  const at = now();
  if (seen.has(job.id)) {
    duplicates++;
    return;
  }
  seen.add(job.id);
  received++;
  const due = job.data.due;
  if (due >= lo() && due <= hi()) lat.push(at - due);
}, { connection, concurrency: o.concurrency, removeOnComplete: { count: 0 } });
worker.on("failed", (job, e) => {
  failed++;
  firstError ||= String(e && e.message ? e.message : e);
});
await worker.waitUntilReady();
await new Promise((r) => setTimeout(r, 200)); // the Worker waits for jobs before the first add

const total = Math.round(o.rate * o.duration);
let issued = 0, pushed = 0, pushErrors = 0, lastAddDone = 0;
t0 = now();
const m0 = performance.now();
await new Promise((resolve) => {
  function tick() {
    const due = Math.min(total, Math.floor((performance.now() - m0) / 1000 * o.rate) + 1);
    while (issued < due) {
      const delay = o["delay-min"] + Math.floor(Math.random() * (o["delay-max"] - o["delay-min"] + 1));
      const data = { due: now() + delay, seq: issued, p: "" };
      data.p = "x".repeat(Math.max(0, 100 - JSON.stringify(data).length)); // 100 bytes of JSON
      issued++;
      queue.add("job", data, { delay }).then(() => {
        pushed++;
        lastAddDone = performance.now();
      }, (e) => {
        pushErrors++;
        firstError ||= String(e && e.message ? e.message : e);
      });
    }
    if (issued >= total) resolve();
    else setTimeout(tick, 1);
  }
  tick();
});
const deadline = performance.now() + o["delay-max"] + (o.grace + o.duration) * 1000;
while ((pushed + pushErrors < total || received + failed < pushed) && performance.now() < deadline) {
  await new Promise((r) => setTimeout(r, 20));
}
await worker.close();
await queue.close();
lat.sort((a, b) => a - b);
const pushSecs = (lastAddDone - m0) / 1000;
const ok = received >= pushed && pushErrors === 0 && failed === 0 && duplicates === 0;
if (!ok) {
  console.error(`bullmq_lateness: FAILED: ${received} of ${pushed} added jobs processed, ${pushErrors} add errors, ` +
    `${failed} failed, ${duplicates} duplicates${firstError ? `; ${firstError}` : ""}`);
}
printKV({
  rate_target: o.rate, duration: o.duration, pushed, push_errors: pushErrors,
  push_rate: pushSecs > 0 ? pushed / pushSecs : 0, received, finished: received, finish_errors: failed,
  get_errors: 0, duplicates,
  lat_ms_n: lat.length, lat_ms_p50: pct(lat, 0.5), lat_ms_p90: pct(lat, 0.9), lat_ms_p99: pct(lat, 0.99),
  lat_ms_p999: pct(lat, 0.999), lat_ms_max: lat.length ? lat[lat.length - 1] : NaN, ok: ok ? 1 : 0,
});
process.exit(ok ? 0 : 3);
