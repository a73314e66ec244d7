// The local model runtime as the engine sees it: where it is (local.runtime.baseUrl, the upstream of route
// `local`), which models it has, the child process the proxy may run it as, and its section of
// GET /_local/api/health. Built only when local.enabled (the local proxy; not a pod, not the server).

import type { Logger } from 'pino';
import type { ConfigStore } from '../config/config-store.ts';
import { routeBaseUrl } from '../routes/upstream-base-url.ts';
import { LocalModelCatalog } from './local-models.ts';
import { OllamaApi } from './ollama-api.ts';
import { RuntimeSupervisor, type RuntimeProcessView } from './runtime-supervisor.ts';

export interface LmStudioListenerState {
  port: number;
  listening: boolean;
  /** Why it is not listening (the port is taken); null while it listens or before it started. */
  problem: string | null;
}

export interface LocalRuntimeHealth {
  baseUrl: string;
  reachable: boolean;
  version: string | null;
  /** Why the runtime did not answer; null when it did. */
  problem: string | null;
  /** Models on its disk, and those loaded in memory now. */
  models: string[];
  loaded: string[];
  /** The child process POST /_local/api/start runs. */
  process: RuntimeProcessView;
  lmstudio: LmStudioListenerState;
}

export interface LocalRuntimeOptions {
  store: ConfigStore;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
}

export class LocalRuntime {
  readonly api = new OllamaApi();
  readonly models: LocalModelCatalog;
  readonly supervisor: RuntimeSupervisor;
  readonly #store: ConfigStore;
  lmstudio: LmStudioListenerState;

  constructor(opts: LocalRuntimeOptions) {
    this.#store = opts.store;
    const baseUrl = () => this.baseUrl();
    this.models = new LocalModelCatalog({ api: this.api, baseUrl });
    // What runs is fixed when the engine starts: no later config layer (a pushed snapshot) can change it (ADR 1401).
    const { command, startTimeoutMs } = opts.store.get().local.runtime;
    this.supervisor = new RuntimeSupervisor({
      api: this.api,
      settings: () => ({ baseUrl: baseUrl(), command, startTimeoutMs }),
      logger: opts.logger,
      ...(opts.env ? { env: opts.env } : {}),
    });
    this.lmstudio = { port: opts.store.get().local.lmstudioPort, listening: false, problem: null };
  }

  /** The runtime's address under the live config: upstreams.local.baseUrl, else local.runtime.baseUrl. */
  baseUrl(): string {
    return routeBaseUrl('local', this.#store.get());
  }

  async health(): Promise<LocalRuntimeHealth> {
    const baseUrl = this.baseUrl();
    const [version, models, loaded] = await Promise.allSettled([this.api.version(baseUrl), this.api.models(baseUrl), this.api.loadedModels(baseUrl)]);
    const reachable = version.status === 'fulfilled';
    return {
      baseUrl,
      reachable,
      version: reachable ? version.value : null,
      problem: reachable ? null : `no answer from ${baseUrl}: ${(version.reason as Error).message}`,
      models: models.status === 'fulfilled' ? models.value.map((model) => model.name) : [],
      loaded: loaded.status === 'fulfilled' ? loaded.value.map((model) => model.name) : [],
      process: this.supervisor.view(),
      lmstudio: this.lmstudio,
    };
  }

  /** The proxy is stopping: a runtime it started stops with it. */
  async close(): Promise<void> {
    await this.supervisor.shutdown();
    await this.api.close();
  }
}
