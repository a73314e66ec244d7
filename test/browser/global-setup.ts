// Once per run of the browser project: Chromium is there before any test starts (installed on a clean machine).
import { ensureChromium } from './chromium.ts';

export default function setup(): void {
  ensureChromium((line) => process.stderr.write(`browser tests: ${line}\n`));
}
