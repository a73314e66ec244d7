// The registry of route modules, one per entry of the route table (contracts/routes.ts); the compiler
// refuses a table entry without its module. The engine reaches a route only through here.

import type { RouteName } from '../../../contracts/routes.ts';
import { alpha } from './alpha/index.ts';
import { alphaCompat } from './alpha-compat/index.ts';
import { beta } from './beta/index.ts';
import { gamma } from './gamma/index.ts';
import { gammaCloud } from './gamma-cloud/index.ts';
import { gammaCloudb } from './gamma-cloudb/index.ts';
import { gammaDirect } from './gamma-direct/index.ts';
import { local } from './local/index.ts';
import type { RouteModule } from './route-module.ts';

export const ROUTE_MODULES: Readonly<Record<RouteName, RouteModule>> = {
  alpha,
  'alpha-compat': alphaCompat,
  beta,
  gamma,
  'gamma-cloud': gammaCloud,
  'gamma-direct': gammaDirect,
  'gamma-cloudb': gammaCloudb,
  local,
};
