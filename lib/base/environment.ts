// The environment variables a job runs with or a runner reads its settings from, typed without
// @types/node so that the published declarations need none (docs/decisions/0222); `process.env` is one.
export type Environment = Readonly<Record<string, string | undefined>>;
