// Budgets above the user (ADR 1312, issue 38) on a real `tollgate proxy` process with a config file: a user
// within a team within the namespace. A call is admitted only if every budget it falls under has room, and its
// cost lands at each level.
//
// Prices: gpt-4o-mini at 100 USD per million input tokens and 2,000 per million output tokens; the fake reports
// 1,000 input and 200 output tokens for every call: 1,000 × 100 / 10⁶ + 200 × 2,000 / 10⁶ = 0.10 + 0.40 = 0.50
// USD a call. A call holds about 0.404 while in flight: max_tokens 200 × 2,000 / 10⁶ = 0.40, plus its input
// estimated from the body (~100 bytes at four a token, ~25 tokens × 100 / 10⁶ ≈ 0.003).
// Limits: each user 2.00 (four calls), the team payments (alice, bob) 1.50 (three calls), the namespace 2.50 (five).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';
import { refusedConfigFile, startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    env: bed.env,
    configYaml: bed.configYaml(`
pricing:
  models:
    - { provider: openai, model: gpt-4o-mini, input_per_million: 100, output_per_million: 2000 }
budgets:
  policies:
    - { name: per-user, users: ["*"], limitUsd: 2 }
    - { name: payments, team: { name: payments, users: [alice, bob] }, limitUsd: 1.5 }
    - { name: shop, scope: Namespace, limitUsd: 2.5 }
`),
  });
  bed.openai.behave({ usage: { input: 1000, output: 200 } });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

const chat = JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'hi' }] });

function call(user: string): Promise<Response> {
  return fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-tollgate-user': user }, body: chat });
}

async function spent(key: string): Promise<number | undefined> {
  const res = await fetch(`${proxy.url}/_local/api/budgets/${encodeURIComponent(key)}`);
  if (res.status !== 200) return undefined;
  return ((await res.json()) as { spent_usd: number }).spent_usd;
}

/** Calls and waits until its cost has landed (at the namespace, the last level charged). */
async function answered(user: string, namespaceAfter: number): Promise<void> {
  expect((await call(user)).status).toBe(200);
  await waitFor(`the namespace charged ${namespaceAfter}`, async () => (await spent('@namespace:shop')) === namespaceAfter);
}

describe('a user within a team within a namespace budget', () => {
  it("the team's limit stops a user who still has room of their own; the namespace's stops everyone; charges land at every level", async () => {
    await answered('alice', 0.5);
    await answered('alice', 1);
    await answered('bob', 1.5); // team 1.00 + 0.404 held ≤ 1.50: admitted, charged 0.50: the team has spent 1.50
    expect(await spent('alice')).toBe(1);
    expect(await spent('bob')).toBe(0.5);
    expect(await spent('@team:payments')).toBe(1.5);

    // bob has 2.00 − 0.50 = 1.50 of his own, but the team has nothing left: refused, nothing sent upstream.
    const sentBefore = bed.openai.requests.length;
    const refused = await call('bob');
    expect(refused.status).toBe(429);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('budget_exceeded');
    expect(body.error.message).toContain('the team "payments" (of user "bob") has spent the 1.5 USD monthly budget of policy "payments"');
    expect(bed.openai.requests.length).toBe(sentBefore);

    // carol is in no team: only her own budget and the namespace's (1.50 + 0.404 ≤ 2.50, then 2.00 + 0.404 ≤ 2.50).
    await answered('carol', 2);
    await answered('carol', 2.5);
    expect(await spent('carol')).toBe(1);
    expect(await spent('@team:payments')).toBe(1.5); // carol's calls are not the team's

    // The namespace has spent 2.50 of 2.50: dave, who has spent nothing, is refused too.
    const namespaceFull = await call('dave');
    expect(namespaceFull.status).toBe(429);
    expect(((await namespaceFull.json()) as { error: { message: string } }).error.message).toContain(
      'the namespace budget (over user "dave") has spent the 2.5 USD monthly budget of policy "shop"',
    );
    expect(bed.openai.requests.length).toBe(sentBefore + 2);
    expect(await spent('dave')).toBe(0);
  });
});

describe('bad subjects', () => {
  const twoTeams = {
    policies: [
      { name: 'a', limitUsd: 1, team: { name: 'a', users: ['x'] } },
      { name: 'b', limitUsd: 1, team: { name: 'b', users: ['x'] } },
    ],
  };

  it('the config API refuses a user in two teams with 400 naming the field, and changes nothing', async () => {
    const res = await fetch(`${proxy.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ budgets: twoTeams }) });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('budgets.policies[1].team.users[0] names the user \\"x\\" as a team member, which budgets.policies[0] already names at the same level');
    // The file's policies are still in force: the namespace is still spent.
    expect((await call('erin')).status).toBe(429);
  });

  it('a config file with a team naming a team stops the proxy at start with exit code 2, naming the field', async () => {
    const { code, stderr } = await refusedConfigFile('budgets:\n  policies:\n    - { name: p, limitUsd: 1, team: { name: p, users: [x], teams: [q] } }\n');
    expect(code).toBe(2);
    expect(stderr).toContain('budgets.policies[0].team.teams cannot be set: teams do not nest');
  });
});
