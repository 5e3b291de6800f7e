import { useCallback, useEffect, useRef, useState } from 'react';
import { gql, live } from './gql.ts';

export interface QueryState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/** A GraphQL query, run again when `deps` change or reload() is called (by a subscription's event, never by a timer). */
export function useQuery<T = any>(query: string, variables: Record<string, unknown>, deps: unknown[], skip = false): QueryState<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<Error>();
  const [loading, setLoading] = useState(!skip);
  const seq = useRef(0);
  const running = useRef<Promise<void> | null>(null);
  const again = useRef(false);
  const run = useCallback(() => {
    if (skip) return;
    // One request at a time: events arriving during a fetch coalesce into one more fetch.
    if (running.current) {
      again.current = true;
      return;
    }
    const mine = ++seq.current;
    setLoading(true);
    running.current = gql<T>(query, variables)
      .then((d) => {
        if (mine === seq.current) {
          setData(d);
          setError(undefined);
        }
      })
      .catch((e: Error) => {
        if (mine === seq.current) setError(e);
      })
      .finally(() => {
        running.current = null;
        if (mine === seq.current) setLoading(false);
        if (again.current) {
          again.current = false;
          run();
        }
      });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [skip, ...deps]);
  useEffect(() => {
    seq.current++;
    running.current = null;
    run();
  }, [run]);
  return { data, error, loading, reload: run };
}

/** A subscription for as long as the component is mounted (and `deps` are the same). */
export function useLive<T extends { cursor: string }>(
  query: string,
  variables: Record<string, unknown>,
  field: string,
  onEvent: (e: T) => void,
  deps: unknown[],
  skip = false,
) {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => {
    if (skip) return;
    return live<T>(query, variables, field, (e) => handler.current(e));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [skip, ...deps]);
}

/** The hash route: `#/stacks/<id>` -> ['stacks', '<id>'], with its query parameters. */
export function useRoute(): { parts: string[]; params: URLSearchParams } {
  const read = () => {
    const [p, q] = location.hash.replace(/^#\/?/, '').split('?');
    return { parts: p ? p.split('/').map(decodeURIComponent) : [], params: new URLSearchParams(q ?? '') };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

export const href = (...parts: string[]) => `#/${parts.map(encodeURIComponent).join('/')}`;
