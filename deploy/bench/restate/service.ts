// Restate counterpart of hcpflow's `noop_chain` workflow: M sequential no-op
// durable steps. Each `ctx.run` is journaled by restate-server (and acked)
// before the next one starts, exactly like one durable activity per step.
//
// Served over HTTP/2 (bidirectional streaming) on 127.0.0.1 only.
//   SERVICE_PORT  port to listen on (default 19080)

import * as http2 from "node:http2";
import * as restate from "@restatedev/restate-sdk";

// SDK 1.17 calls Promise.withResolvers (Node >= 22) while handling requests;
// Node 20 lacks it. The SDK only calls it per request, so defining it here,
// before the server starts, is early enough.
type WithResolvers = <T>() => { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void };
const P = Promise as unknown as { withResolvers?: WithResolvers };
if (typeof P.withResolvers !== "function") {
  P.withResolvers = <T>() => {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const noopChain = restate.service({
  name: "NoopChain",
  handlers: {
    run: async (ctx: restate.Context, input: { steps?: number }): Promise<number> => {
      const steps = Math.max(0, Math.floor(Number(input?.steps ?? 0)));
      let done = 0;
      for (let i = 0; i < steps; i++) {
        const step = i;
        await ctx.run(`step-${step}`, async () => step);
        done++;
      }
      return done;
    },
  },
});

const port = parseInt(process.env.SERVICE_PORT ?? "19080", 10);
const server = http2.createServer(restate.createEndpointHandler({ services: [noopChain] }));
server.on("error", (err) => {
  console.error(`service: server error: ${err}`);
  process.exit(1);
});
server.listen(port, "127.0.0.1", () => {
  console.log(`service: NoopChain listening on http://127.0.0.1:${port} (HTTP/2)`);
});

const shutdown = () => {
  server.close();
  process.exit(0);
};
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
