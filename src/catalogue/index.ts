/** The query catalogue (docs/catalogue.md): YAML in, compiled queries out. */
export type * from './types.js';
export { QUERY_DEFAULTS } from './types.js';
export type { CatalogueBuiltins } from './builtins.js';
export { compileCatalogue, resolveDatabase, type CatalogueDatabases, type CatalogueInputs } from './compile.js';
export { buildCatalogue, defaultBuiltinPath, loadCatalogue, readCatalogueFiles, type LoadCatalogueOptions } from './load.js';
export { mergeLayers, mergeQuery } from './merge.js';
export { parseCatalogueText, type Layer } from './parse.js';
export { CatalogueStore, diffCatalogues, type CatalogueStoreOptions, type ReloadResult } from './store.js';
