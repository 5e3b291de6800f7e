// @apollo/gateway requires, as it loads, packages for features this platform does not use: the
// OpenTelemetry metrics SDK, its OTLP exporter and four cloud resource detectors (Apollo's usage
// reporting, off: APOLLO_TELEMETRY_DISABLED), @apollo/composition (the supergraph managers that
// compose; the gateway reads the composed file) and make-fetch-happen (the fetcher of remote
// subgraphs and of Apollo's Uplink: embedded, every subgraph is in process): about 660 of its
// 1,350 modules, and make-fetch-happen's own (cacache, minipass, iconv-lite...). Each is put in
// the CommonJS cache as a stand-in that loads the real package the first time anything touches
// it, so whatever uses one still gets it, on first use instead of at start.
import Module, { createRequire } from 'node:module';

/**
 * Package, and what `__esModule` reads on it (asked by TypeScript's import helpers without using the
 * module). 'interop': a CommonJS package whose importers copy its exports as they load
 * (`__importStar`, as the gateway's Uplink manager does make-fetch-happen's): `__esModule` reads
 * true, so the helper takes the stand-in as it is, and `default` is the package's exports, as
 * `__importDefault` would have made it.
 */
const DEFERRED: Array<[name: string, esModule: boolean | 'interop']> = [
  ['@opentelemetry/sdk-metrics', true],
  ['@opentelemetry/exporter-metrics-otlp-http', true],
  ['@opentelemetry/resource-detector-alibaba-cloud', true],
  ['@opentelemetry/resource-detector-aws', true],
  ['@opentelemetry/resource-detector-gcp', true],
  ['@opentelemetry/resource-detector-azure', true],
  ['@apollo/composition', true],
  ['make-fetch-happen', 'interop'],
];

type CjsCache = Record<string, { id: string; filename: string; loaded: boolean; exports: unknown; children: unknown[]; paths: string[] } | undefined>;

function standIn(esModule: boolean | 'interop', load: () => unknown): object {
  let real: object | undefined;
  const get = (): object => (real ??= load() as object);
  const read = (prop: string | symbol): unknown => {
    if (prop === '__esModule') return esModule === 'interop' ? true : real === undefined ? esModule : Reflect.get(get(), prop);
    // Interop: `default` is the package's exports, as __importDefault would have made it.
    if (esModule === 'interop' && prop === 'default' && !Reflect.get(get(), '__esModule')) return get();
    return Reflect.get(get(), prop);
  };
  // An arrow function as the target: callable (a package may export a function) and with no
  // non-configurable own property a proxy would have to report.
  return new Proxy(() => {}, {
    get: (_t, prop) => read(prop),
    has: (_t, prop) => Reflect.has(get(), prop),
    ownKeys: () => Reflect.ownKeys(get()),
    getOwnPropertyDescriptor: (_t, prop) => {
      const d = Reflect.getOwnPropertyDescriptor(get(), prop);
      return d && { ...d, configurable: true };
    },
    set: (_t, prop, value) => Reflect.set(get(), prop, value),
    apply: (_t, self, args) => Reflect.apply(get() as (...a: unknown[]) => unknown, self, args),
    construct: (_t, args) => Reflect.construct(get() as new (...a: unknown[]) => object, args),
    getPrototypeOf: () => Reflect.getPrototypeOf(get()),
  });
}

let installed = false;

/** Installs the stand-ins (once), before @apollo/gateway is first loaded. */
export function deferUnusedGatewayDeps(): void {
  if (installed) return;
  installed = true;
  let gatewayMain: string;
  try {
    gatewayMain = createRequire(import.meta.url).resolve('@apollo/gateway');
  } catch {
    return;
  }
  const req = createRequire(gatewayMain);
  const cache = (Module as unknown as { _cache: CjsCache })._cache;
  for (const [name, esModule] of DEFERRED) {
    let filename: string;
    try {
      filename = req.resolve(name);
    } catch {
      continue;
    }
    if (cache[filename]) continue; // already loaded for real
    const entry = {
      id: filename,
      filename,
      loaded: true,
      children: [],
      paths: [],
      exports: standIn(esModule, () => {
        // The first use: the stand-in leaves the cache and the package loads as it would have.
        if (cache[filename] === entry) delete cache[filename];
        return req(name);
      }),
    };
    cache[filename] = entry;
  }
}
