// Start-up progress: a starting service says what it is doing (deploying a contract, waiting for
// receipts) and whoever shows a start banner listens. In-process only; nothing listens by default.
export interface ProgressEvent {
  service: string;
  step: string;
}

const listeners = new Set<(e: ProgressEvent) => void>();

export function reportProgress(service: string, step: string): void {
  for (const l of listeners) l({ service, step });
}

/** Listens until the returned function is called. */
export function onProgress(listener: (e: ProgressEvent) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
