// One JSON-RPC 2.0 call over node:http: the Cortex node's readiness (eth_chainId, while a start
// waits for anvil and on /readyz). Not fetch: the first fetch of a process loads Node's own undici,
// 37-55 ms of the main thread on a 2-core VM, and the start's only fetch was this call; node:http
// is loaded by the services' listeners anyway.
import http from 'node:http';

export class JsonRpcError extends Error {}

/** The call's result; a JsonRpcError for a JSON-RPC error, a non-2xx answer, a body that is not JSON-RPC or none in time. */
export function jsonRpc<T>(url: string, method: string, params: unknown[] = [], timeoutMs = 2000): Promise<T> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  return new Promise<T>((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          let answer: { result?: T; error?: { message?: string } };
          try {
            answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            return reject(new JsonRpcError(`${method}: answered ${res.statusCode} without JSON`));
          }
          if (answer?.error) return reject(new JsonRpcError(`${method}: ${answer.error.message ?? 'error'}`));
          if ((res.statusCode ?? 0) >= 300) return reject(new JsonRpcError(`${method}: answered ${res.statusCode}`));
          if (!answer || !('result' in answer)) return reject(new JsonRpcError(`${method}: no result`));
          resolve(answer.result as T);
        });
      },
    );
    req.on('error', (e) => reject(e.name === 'AbortError' ? new JsonRpcError(`${method}: no answer within ${timeoutMs} ms`) : e));
    req.end(body);
  });
}
