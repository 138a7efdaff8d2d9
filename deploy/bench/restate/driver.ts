// Load driver for the Restate noop_chain benchmark. Calls the ingress
// request-response endpoint `POST /NoopChain/run` (the call returns when the
// invocation has finished), keeps `--concurrency` calls in flight, and prints
// the same report shape as `hcpflow bench` (same percentile rule, same
// rounding) so the two can be read side by side.
//
//   node dist/driver.js --count N --concurrency C --steps M
//        [--ingress http://127.0.0.1:18080] [--timeout-secs 120] [--idempotency]
//
// Only loopback targets are accepted. HTTP/1.1 with keep-alive, one undici
// pool of exactly C connections (no pipelining), so each in-flight call owns
// a connection.

import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";

interface Args {
  count: number;
  concurrency: number;
  steps: number;
  ingress: string;
  timeoutSecs: number;
  idempotency: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    count: 1000,
    concurrency: 32,
    steps: 10,
    ingress: process.env.RESTATE_INGRESS_URL ?? "http://127.0.0.1:18080",
    timeoutSecs: 120,
    idempotency: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const int = () => {
      const v = Number(value());
      if (!Number.isInteger(v) || v < 0) throw new Error(`${flag} needs a non-negative integer`);
      return v;
    };
    switch (flag) {
      case "--count": args.count = int(); break;
      case "--concurrency": args.concurrency = Math.max(1, int()); break;
      case "--steps": args.steps = int(); break;
      case "--ingress": args.ingress = value(); break;
      case "--timeout-secs": args.timeoutSecs = Math.max(1, int()); break;
      case "--idempotency": args.idempotency = true; break;
      case "-h":
      case "--help":
        console.log("usage: driver --count N --concurrency C --steps M [--ingress URL] [--timeout-secs S] [--idempotency]");
        process.exit(0);
      default:
        throw new Error(`unknown argument ${flag}`);
    }
  }
  const host = new URL(args.ingress).hostname;
  if (!["127.0.0.1", "localhost", "[::1]", "::1"].includes(host)) {
    throw new Error(`ingress must be a loopback address, not ${host}`);
  }
  return args;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.round((sorted.length - 1) * p);
  return sorted[Math.min(index, sorted.length - 1)];
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const pool = new Pool(args.ingress, {
    connections: args.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    headersTimeout: args.timeoutSecs * 1000,
    bodyTimeout: args.timeoutSecs * 1000,
  });
  const body = JSON.stringify({ steps: args.steps });
  const runId = `bench-${Date.now()}-${randomUUID().slice(0, 8)}`;

  const latencies: number[] = [];
  let failed = 0;
  const fail = (message: string) => {
    failed++;
    if (failed <= 5) console.error(`bench: ${message}`);
  };

  const callOne = async (n: number): Promise<void> => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (args.idempotency) headers["idempotency-key"] = `${runId}-${n}`;
    const begin = performance.now();
    try {
      const res = await pool.request({ path: "/NoopChain/run", method: "POST", headers, body });
      const text = await res.body.text();
      const elapsed = performance.now() - begin;
      if (res.statusCode !== 200) {
        fail(`call ${n}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
      } else if (Number(text) !== args.steps) {
        fail(`call ${n}: expected ${args.steps} steps, got ${text.slice(0, 200)}`);
      } else {
        latencies.push(elapsed);
      }
    } catch (err) {
      fail(`call ${n}: ${err instanceof Error ? err.message : String(err)}`);
    }
  };

  let next = 0;
  const worker = async () => {
    while (next < args.count) {
      const n = next++;
      await callOne(n);
    }
  };

  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(args.concurrency, Math.max(args.count, 1)) }, worker));
  const seconds = Math.max((performance.now() - started) / 1000, Number.EPSILON);
  await pool.close();

  latencies.sort((a, b) => a - b);
  const completed = latencies.length;
  console.log(`bench: ${args.count} x restate noop_chain (steps ${args.steps}, concurrency ${args.concurrency})`);
  console.log(`  completed      ${completed} (${failed} failed) in ${seconds.toFixed(2)} s`);
  console.log(`  workflows/s    ${(completed / seconds).toFixed(1)}`);
  console.log(`  steps/s        ${((completed * args.steps) / seconds).toFixed(1)}`);
  console.log(`  latency p50    ${percentile(latencies, 0.5).toFixed(1)} ms`);
  console.log(`  latency p99    ${percentile(latencies, 0.99).toFixed(1)} ms`);
  if (failed > 0) process.exitCode = 2;
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
