// How a store spells its parameters and its clock inside one statement: the shared SQL builders
// (`lib/store/*-statements.ts`) take each placeholder as text, so SQLite passes `@runId` and PostgreSQL `$1`.
export type SqlParams<K extends string> = Readonly<Record<K, string>>;
