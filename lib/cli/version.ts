// `pidfence --version`: the package's own version (lib/base/package-version.ts).
export { packageVersion } from '../base/package-version';
