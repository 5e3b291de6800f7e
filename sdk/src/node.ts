// Node entry: the same client with the `ws` package as its WebSocket (Node 20 has no global one).
import WebSocket from 'ws';
import { CogClient, type ClientOptions } from './client.ts';
import type { WebSocketConstructor } from './subscribe.ts';

export * from './index.ts';

export function createClient(options: ClientOptions): CogClient {
  return new CogClient({ webSocket: WebSocket as unknown as WebSocketConstructor, ...options });
}
