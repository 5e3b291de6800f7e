export function uiSourceHash(): string;
export function uiBuildCurrent(): boolean;
export function ensureUiBuilt(opts?: { log?: (m: string) => void; force?: boolean }): Promise<'current' | 'built' | 'unavailable'>;
