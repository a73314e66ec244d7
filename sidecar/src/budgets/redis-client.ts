// The engines open the counter store as the operator does (contracts/redis-connection.ts).
export { openRedisClient, storeError } from '../../../contracts/redis-connection.ts';
