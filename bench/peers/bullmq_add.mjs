// bullmq_add.mjs — figure 18's denominator for durable pushes: BullMQ's Queue.add from
// --producers concurrent producers in this one node process, for --duration seconds.
//
//   node bullmq_add.mjs --port P [--producers 64] [--duration 10] [--delay 3600000] [--queue bench]
//
// One Queue (one ioredis connection, as an application would hold) on the private Redis at
// 127.0.0.1:P; each producer awaits queue.add("job", data, { delay }) and adds the next, data
// being a 98-character string (100 bytes of JSON, as bench/push.lua's bodies), delay one hour
// as push.lua's so no job moves during the run. adds/s = adds answered within the duration ÷
// the duration (the adds in flight at its end do not count, as wrk does). Prints key=value
// lines (bench/run.sh records them as peers_bmqaddN_*); exit status 3 when any add failed.
import { Queue } from "bullmq";
import { parseArgs, pct, printKV } from "./args.mjs";

const o = parseArgs(process.argv.slice(2), {
  port: 6379, producers: 64, duration: 10, delay: 3600000, queue: "bench",
});
const queue = new Queue(o.queue, { connection: { host: "127.0.0.1", port: o.port } });
await queue.waitUntilReady();
const data = "x".repeat(98);
let adds = 0, errors = 0, firstError = "";
const lat = [];
const t0 = performance.now();
const end = t0 + o.duration * 1000;

async function producer() {
  while (performance.now() < end) {
    const s = performance.now();
    try {
      await queue.add("job", data, { delay: o.delay });
      const now = performance.now();
      if (now <= end) {
        adds++;
        lat.push(now - s);
      }
    } catch (e) {
      errors++;
      firstError ||= String(e && e.message ? e.message : e);
    }
  }
}

await Promise.all(Array.from({ length: o.producers }, producer));
const counts = await queue.getJobCounts("delayed", "wait");
await queue.close();
lat.sort((a, b) => a - b);
if (firstError) console.error(`bullmq_add: ${errors} adds failed; the first: ${firstError}`);
printKV({
  producers: o.producers, duration: o.duration, delay_ms: o.delay, body_bytes: JSON.stringify(data).length,
  adds, add_errors: errors, rate: adds / o.duration, delayed_in_redis: counts.delayed,
  add_ms_p50: pct(lat, 0.5), add_ms_p99: pct(lat, 0.99), add_ms_max: lat.length ? lat[lat.length - 1] : NaN,
  ok: errors === 0 && adds > 0 ? 1 : 0,
});
process.exit(errors === 0 && adds > 0 ? 0 : 3);
