// A client generated from docs/openapi.yaml (@hey-api/openapi-ts, into ./gen by
// tests/integration/test_openapi.py) pushes, gets and finishes a job against a real daemon,
// then inspects it. Compiled by typescript with strict checks: the generated types must fit
// the calls below. Prints one JSON line with every answer (status, Content-Type, body) for the
// Python side to assert on and to check against the description.
//
//   node client-test.js <base URL> <topic> <token>
import { client } from './gen/client.gen';
import { finish, getJob, inspectJob, push } from './gen/sdk.gen';

// node's own, without @types/node
declare const process: { argv: string[]; exit(code: number): never };

interface Seen {
  status: number;
  contentType: string | null;
  body: unknown;
}

function seen(r: { response?: Response; data?: unknown; error?: unknown }): Seen {
  if (!r.response) throw new Error(`no response: ${String(r.error)}`);
  return {
    status: r.response.status,
    contentType: r.response.headers.get('content-type'),
    body: r.data !== undefined ? r.data : r.error,
  };
}

async function main(): Promise<void> {
  const [base, topic, token] = process.argv.slice(2);
  client.setConfig({ baseUrl: base, auth: () => token });

  const pushed = await push({ body: { topic, body: { hello: 'openapi' }, priority: 3, ttr: 60000 } });
  if (!pushed.data || !('id' in pushed.data)) throw new Error(`push: ${JSON.stringify(seen(pushed))}`);
  const id: string = pushed.data.id;

  const got = await getJob({ path: { topic }, query: { timeout: 5 } });
  if (!got.data) throw new Error(`get: ${JSON.stringify(seen(got))}`);
  const job = Array.isArray(got.data) ? got.data[0] : got.data;
  const attempt: number = job.attempt;

  const finished = await finish({ query: { id: job.id, attempt } });
  const view = await inspectJob({ path: { id } });
  console.log(
    JSON.stringify({
      id,
      push: seen(pushed),
      get: seen(got),
      finish: seen(finished),
      inspect: seen(view),
    }),
  );
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
