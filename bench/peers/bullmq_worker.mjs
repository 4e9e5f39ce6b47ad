// bullmq_worker.mjs — figure 18's denominator for deliveries: a BullMQ Worker of --concurrency
// with a no-op processor, in this one node process, working off --jobs ready jobs.
//
//   node bullmq_worker.mjs --port P [--jobs 50000] [--concurrency 64] [--queue work] [--max-seconds 600]
//
// First the queue is filled with --jobs jobs (Queue.addBulk in chunks of 1,000, delay 0,
// data a 98-character string as bullmq_add.mjs's, removeOnComplete so a completed job leaves
// Redis as a finished hourglass job does), then a Worker starts on it. jobs/s = (completed − 1)
// ÷ the time from the first completion to the last (the first job's fetch is not in it); also
// printed from the Worker's start. Prints key=value lines (bench/run.sh records them as
// peers_bmqwrkN_*); exit status 3 when not every job completed or any failed.
import { Queue, Worker } from "bullmq";
import { parseArgs, printKV } from "./args.mjs";

const o = parseArgs(process.argv.slice(2), {
  port: 6379, jobs: 50000, concurrency: 64, queue: "work", "max-seconds": 600,
});
const connection = { host: "127.0.0.1", port: o.port };
const queue = new Queue(o.queue, { connection });
await queue.waitUntilReady();
const data = "x".repeat(98);
const f0 = performance.now();
for (let i = 0; i < o.jobs; i += 1000) {
  const n = Math.min(1000, o.jobs - i);
  await queue.addBulk(Array.from({ length: n }, () => ({ name: "job", data, opts: { removeOnComplete: true } })));
}
const fillSecs = (performance.now() - f0) / 1000;
const waiting = await queue.getWaitingCount();

let completed = 0, failed = 0, first = 0, last = 0, firstError = "";
let done;
const finished = new Promise((resolve) => { done = resolve; });
const w0 = performance.now();
const worker = new Worker(o.queue, async () => {}, { connection, concurrency: o.concurrency });
worker.on("completed", () => {
  const now = performance.now();
  if (completed === 0) first = now;
  last = now;
  completed++;
  if (completed + failed >= o.jobs) done(true);
});
worker.on("failed", (job, e) => {
  failed++;
  firstError ||= String(e && e.message ? e.message : e);
  if (completed + failed >= o.jobs) done(true);
});
worker.on("error", (e) => { firstError ||= String(e && e.message ? e.message : e); });
const timer = setTimeout(() => done(false), o["max-seconds"] * 1000);
const inTime = await finished;
clearTimeout(timer);
await worker.close();
const left = await queue.getJobCounts("wait", "active", "completed", "failed");
await queue.close();
const secs = (last - first) / 1000, fromStart = (last - w0) / 1000;
const ok = inTime && completed === o.jobs && failed === 0;
if (!ok) {
  console.error(`bullmq_worker: FAILED: ${completed} of ${o.jobs} completed, ${failed} failed` +
    `${inTime ? "" : `, still running after ${o["max-seconds"]} s`}${firstError ? `; ${firstError}` : ""}`);
}
printKV({
  jobs: o.jobs, concurrency: o.concurrency, fill_seconds: fillSecs, waiting_before: waiting,
  completed, failed, seconds: secs, rate: secs > 0 && completed > 1 ? (completed - 1) / secs : 0,
  seconds_from_start: fromStart, rate_from_start: fromStart > 0 ? completed / fromStart : 0,
  left_wait: left.wait, left_active: left.active, left_completed: left.completed, left_failed: left.failed,
  ok: ok ? 1 : 0,
});
process.exit(ok ? 0 : 3);
