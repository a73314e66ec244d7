import { describe, expect, it } from 'vitest';
import { ResponseStore } from './response-store.ts';

const items = (text: string) => [{ type: 'message', role: 'user', content: text }];
const bytes = (text: string) => Buffer.byteLength(JSON.stringify(items(text)));

describe('the response store', () => {
  it('keeps the newest responses within the count, counting each eviction', () => {
    const store = new ResponseStore({ maxResponses: 2, maxBytes: 1 << 20 });
    store.put('resp_1', 'alice', items('one'));
    store.put('resp_2', 'alice', items('two'));
    store.put('resp_3', 'alice', items('three'));
    expect(store.get('resp_1', 'alice')).toBeUndefined();
    expect(store.get('resp_3', 'alice')).toEqual(items('three'));
    expect(store.stats()).toEqual({ stored: 2, bytes: bytes('two') + bytes('three'), evicted: 1 });
  });

  it('keeps within the bytes, and does not keep one response larger than all of them', () => {
    const store = new ResponseStore({ maxResponses: 100, maxBytes: bytes('aaaa') * 2 });
    store.put('resp_1', null, items('aaaa'));
    store.put('resp_2', null, items('bbbb'));
    store.put('resp_3', null, items('cccc'));
    expect([store.has('resp_1'), store.has('resp_2'), store.has('resp_3')]).toEqual([false, true, true]);
    store.put('resp_big', null, items('x'.repeat(1000)));
    expect(store.has('resp_big')).toBe(false);
    expect(store.stats()).toMatchObject({ stored: 2, evicted: 2 });
  });

  it('finds a response only for the user it was made for, and hands out a copy the caller cannot change', () => {
    const store = new ResponseStore();
    store.put('resp_1', 'alice', items('mine'));
    expect(store.get('resp_1', 'mallory')).toBeUndefined();
    expect(store.get('resp_1', null)).toBeUndefined();
    const copy = store.get('resp_1', 'alice')!;
    copy.push({ type: 'message', role: 'user', content: 'injected' });
    expect(store.get('resp_1', 'alice')).toEqual(items('mine'));
  });
});
