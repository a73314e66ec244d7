// Once per run of the browser project: Chromium is there before any test starts (installed on a clean machine).
import { ensureChromium } from './chromium.ts';

export default async function setup(): Promise<void> {
  await ensureChromium((line) => process.stderr.write(`browser tests: ${line}\n`));
}
