/** The query catalogue (SPEC §3): YAML in, compiled queries out. See docs/catalogue.md. */
export type * from './types.js';
export { QUERY_DEFAULTS } from './types.js';
export type { CatalogueBuiltins } from './builtins.js';
export { compileCatalogue, resolveDatabase, type CatalogueDatabases, type CatalogueInputs } from './compile.js';
export { buildCatalogue, defaultBuiltinPath, loadCatalogue, readCatalogueFiles, type LoadCatalogueOptions } from './load.js';
export { mergeLayers, mergeQuery } from './merge.js';
export { parseCatalogueText, type Layer } from './parse.js';
export { CatalogueStore, diffCatalogues, type CatalogueStoreOptions, type ReloadResult } from './store.js';
