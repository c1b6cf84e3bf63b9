// `npm run test:fast`: every test but the ones tagged slow (`*.slow.test.ts`: the PostgreSQL HA suite,
// which builds streaming replicas). `npm test` runs everything.
import { readFileSync } from 'node:fs';

const base = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')).ava;

export default { ...base, files: ['dist/test/**/*.test.js', '!dist/test/**/*.slow.test.js'] };
