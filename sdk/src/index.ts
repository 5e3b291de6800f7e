// @cog/sdk: the typed client of the Cognitive Agent Platform. Browser-safe: no Node-only imports
// here (on Node 20, which has no global WebSocket, import from "@cog/sdk/node").
import { CogClient, type ClientOptions } from './client.ts';

export * from './client.ts';
export * from './errors.ts';
export { signedHeaders, signingMessage, publicKeyOf, generateKeyPair, type StackKey } from './sign.ts';
export type { ResumableSubscription, ResumeOptions, WebSocketConstructor, WebSocketLike } from './subscribe.ts';
export type { EventStream, PlatformEvent } from './events.ts';
export type { RetryOptions } from './transport.ts';
export { SLEEVE_KINDS, CPV_KEYS, type SleeveKind } from './validate.ts';
export * as graphql from './generated/graphql.ts';
export type { RestClient, RestInput, PathsFor, Success, paths, components } from './rest.ts';

/** A client for the gateway at `options.url`. */
export function createClient(options: ClientOptions): CogClient {
  return new CogClient(options);
}
